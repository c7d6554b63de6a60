"""The program under the real Pulumi engine (`make engine`): CLI, language host, secrets, config
validation, the policy pack's analyzer, and the offline plan compared with a real preview.

Every preview runs in a network namespace with only loopback: nothing can reach the stacks'
addresses. What the engine cannot run for want of a plugin (see tools/engine/versions.env) is
named by the engine's own error, and each test states which part it could not compare.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.engine import cli

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(not (cli.ENGINE / "bin" / "pulumi").exists(), reason="no engine: run make engine"),
    pytest.mark.skipif(shutil.which("unshare") is None, reason="unshare (util-linux) is needed"),
]

SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nengine-test-" + "k" * 40 + "\n-----END OPENSSH PRIVATE KEY-----\n"
HF_TOKEN = "hf_engineTestToken" + "t" * 20
MONITORING_PASSWORD = "engine-test-monitoring-" + "p" * 8
BACKUP_PASSWORD = "engine-test-backup-" + "b" * 8
SECRETS = {
    "hpc:sshPrivateKey": SSH_KEY,
    "hpc:hfToken": HF_TOKEN,
    "hpc:monitoringPassword": MONITORING_PASSWORD,
    "hpc:backupPassword": BACKUP_PASSWORD,
}
# prod serves its models only over HTTPS: it is initialised with the site's certificate too
# (placeholders: the program passes them to the TLS Secret and never parses them)
TLS = {
    "hpc:tlsCertificate": "-----BEGIN CERTIFICATE-----\nengine-test-" + "c" * 40 + "\n-----END CERTIFICATE-----\n",
    "hpc:tlsKey": "-----BEGIN PRIVATE KEY-----\nengine-test-" + "t" * 40 + "\n-----END PRIVATE KEY-----\n",
}
STACKS = ("dev", "prod")


def secrets_of(stack: str) -> dict[str, str]:
    return {**SECRETS, **(TLS if stack == "prod" else {})}


@pytest.fixture(scope="module")
def plans() -> None:
    """The offline plan of every stack, written the way make plan writes it."""
    for stack in STACKS:
        subprocess.run([str(cli.ROOT / ".venv/bin/python"), "-m", "offline.plan", "--stack", stack, "--quiet"],
                       cwd=cli.ROOT, check=True, capture_output=True)


@pytest.fixture
def project(tmp_path: Path) -> cli.Project:
    return cli.Project(tmp_path)


def test_engine_is_built_at_the_pinned_versions(project: cli.Project) -> None:
    r = project.pulumi("version")
    assert r.rc == 0 and r.stdout.strip() == f"v{cli.pin('PULUMI_CLI_VERSION')}", r.output
    for exe in ("pulumi-language-python", "pulumi-language-python-exec"):
        assert (cli.ENGINE / "bin" / exe).exists(), exe
    status = cli.status()
    assert status["cli"] == cli.pin("PULUMI_CLI_VERSION")
    assert status["languagePython"] == cli.pin("PULUMI_LANGUAGE_PYTHON_VERSION")
    # Installed plugins are exactly those make engine built, at the SDK's versions.
    listed = project.pulumi("plugin", "ls", "--json")
    assert listed.rc == 0, listed.output
    installed = {(p["name"], p["version"]) for p in json.loads(listed.stdout or "[]") if p["kind"] == "resource"}
    built = {(n, p["version"]) for n, p in status["plugins"].items() if p["state"] == "built"}
    assert installed == built
    for name, reason in cli.missing_plugins().items():
        assert reason.strip(), f"plugin {name} is missing without a reason"


@pytest.mark.parametrize("stack", STACKS)
def test_committed_stack_takes_its_secrets_from_the_cli(project: cli.Project, stack: str) -> None:
    project.init_stack(stack, secrets_of(stack))
    text = (project.dir / f"Pulumi.{stack}.yaml").read_text()
    assert "encryptionsalt: v1:" in text
    for key in secrets_of(stack):
        assert re.search(rf"^  {re.escape(key)}:\n    secure: v1:\S+$", text, re.M), key
    assert "engine-test-kkkk" not in text and HF_TOKEN not in text
    listed = project.pulumi("config", "--json", "--stack", stack)
    assert listed.rc == 0, listed.output
    assert all(listed.json()[key]["secret"] for key in secrets_of(stack))
    got = project.pulumi("config", "get", "hpc:sshPrivateKey", "--stack", stack)
    assert got.rc == 0 and got.stdout.strip() == SSH_KEY.strip()


def test_wrong_passphrase_is_refused(project: cli.Project) -> None:
    project.init_stack("dev", SECRETS)
    project.passphrase = "another-passphrase"
    r = project.pulumi("config", "get", "hpc:hfToken", "--stack", "dev")
    assert r.rc != 0 and "incorrect passphrase" in r.output
    assert HF_TOKEN not in r.output


@pytest.mark.parametrize("stack", STACKS)
def test_preview_lists_what_the_offline_plan_lists(project: cli.Project, plans: None, stack: str) -> None:
    """Every resource the real preview registers has the plan's URN, type and parent; the preview
    stops only where the engine lacks a plugin, and then says which."""
    project.init_stack(stack, secrets_of(stack))
    r = project.preview_json(stack, "--policy-pack", "policy",
                             "--policy-pack-config", str(cli.ROOT / "build" / stack / "policy-config.json"))
    preview = r.json()
    planned = cli.plan_resources(stack)
    seen = {s["urn"]: s["newState"] for s in preview["steps"] if s["op"] == "create"}
    stack_urn = f"urn:pulumi:{stack}::hpc-cluster::pulumi:pulumi:Stack::hpc-cluster-{stack}"
    assert stack_urn in seen
    for urn, state in seen.items():
        if urn == stack_urn:
            continue
        assert urn in planned, f"the engine registered {urn}, which the offline plan does not list"
        assert state["type"] == planned[urn]["type"]
        assert state.get("parent") == planned[urn]["parent"], urn
    missing = cli.missing_plugins()
    stopped_by = cli.missing_plugin_errors(preview)
    messages = "\n".join(cli.diagnostics(preview))
    assert "/stacks/" not in messages and "/components/" not in messages, "a traceback from the program"
    if not missing:
        assert r.rc == 0, messages
        assert set(seen) - {stack_urn} == set(planned), "the preview and the plan differ"
        return
    assert r.rc != 0
    assert stopped_by and stopped_by <= set(missing), messages
    not_compared = sorted({p["type"] for p in planned.values() if p["custom"]} - {s["type"] for s in seen.values()})
    components = sum(1 for p in planned.values() if not p["custom"])
    print(f"{stack}: {len(seen) - 1} of {len(planned)} planned resources compared "
          f"({len(seen) - 1} of {components} components); "
          f"stopped by missing plugin(s) {sorted(stopped_by)}; not compared: {not_compared}")


def test_bad_config_is_one_line_under_the_real_cli(project: cli.Project) -> None:
    project.init_stack("dev", SECRETS)
    r = project.pulumi("config", "set", "--path", "hpc:storage.replica", "4", "--stack", "dev")
    assert r.rc == 0, r.output
    preview = project.preview_json("dev")
    assert preview.rc != 0
    errors = [m.strip() for m in cli.diagnostics(preview.json()) if m.startswith("error:")]
    assert errors[0] == "error: hpc:storage.replica: replica 4 needs at least 4 storage hosts, found 3", errors
    assert not any("Traceback" in m for m in cli.diagnostics(preview.json()))
    assert [s["newState"]["type"] for s in preview.json()["steps"]] == ["pulumi:pulumi:Stack"]


def test_missing_secret_is_one_line_under_the_real_cli(project: cli.Project) -> None:
    """Every missing secret is named, one line each, and nothing is registered."""
    project.init_stack("dev", {"hpc:hfToken": HF_TOKEN})
    preview = project.preview_json("dev")
    errors = [m.strip() for m in cli.diagnostics(preview.json()) if m.startswith("error:")]
    lines = errors[0].removeprefix("error: ").splitlines()
    assert lines == [
        "hpc:sshPrivateKey: required secret is missing (pulumi config set --secret)",
        "hpc:monitoringPassword: required secret is missing (pulumi config set --secret)",
    ], errors
    assert not any("Traceback" in m for m in cli.diagnostics(preview.json()))
    assert [s["newState"]["type"] for s in preview.json()["steps"]] == ["pulumi:pulumi:Stack"]


def test_policy_pack_config_is_checked_by_the_real_analyzer(project: cli.Project, plans: None) -> None:
    project.init_stack("dev", SECRETS)
    config = json.loads((cli.ROOT / "build" / "dev" / "policy-config.json").read_text())
    first = sorted(config)[0]
    config[first]["enforcementLevel"] = "sometimes"
    bad = project.dir / "bad-policy-config.json"
    bad.write_text(json.dumps(config))
    r = project.pulumi("preview", "--stack", "dev", "--policy-pack", "policy", "--policy-pack-config", str(bad),
                       isolated=True)
    assert r.rc != 0
    assert f'parsing enforcement level for "{first}": "sometimes" is not a valid enforcement level' in r.output


def test_state_holds_no_plaintext_secret(project: cli.Project) -> None:
    project.init_stack("dev", SECRETS)
    up = project.pulumi("up", "--yes", "--stack", "dev", isolated=True)
    exported = project.pulumi("stack", "export", "--stack", "dev")
    assert exported.rc == 0, exported.output
    for text in (up.output, exported.stdout, project.all_state_text()):
        assert "engine-test-kkkk" not in text and HF_TOKEN not in text
