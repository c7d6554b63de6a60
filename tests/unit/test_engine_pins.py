"""`make engine`'s pins agree with each other and with the SDK wheels (tools/engine/versions.env)."""

from __future__ import annotations

import importlib.metadata
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.engine.cli import pin

ENGINE_DIR = Path(__file__).resolve().parents[2] / "tools" / "engine"
VERSIONS = (ENGINE_DIR / "versions.env").read_text()


def plugins() -> dict[str, tuple[str, str]]:
    rows = re.findall(r'^  "(\w+)\|([^|]*)\|([^|]*)\|[^"]*"$', VERSIONS, re.M)
    return {name: (version, pkg) for name, version, pkg in rows}


def requires(gomod: Path, module: str) -> str:
    match = re.search(rf"^\s+{re.escape(module)} (\S+)", gomod.read_text(), re.M)
    assert match, f"{gomod} does not require {module}"
    return match.group(1)


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def test_cli_is_at_or_above_the_sdk_pin() -> None:
    assert _version_tuple(pin("PULUMI_CLI_VERSION")) >= _version_tuple(importlib.metadata.version("pulumi"))


def test_wrapper_modules_build_the_pinned_versions() -> None:
    cli = ENGINE_DIR / "cli" / "go.mod"
    assert requires(cli, "github.com/pulumi/pulumi/pkg/v3") == f"v{pin('PULUMI_CLI_VERSION')}"
    assert requires(cli, "github.com/pulumi/pulumi/sdk/v3") == f"v{pin('PULUMI_CLI_VERSION')}"
    host = ENGINE_DIR / "langhost" / "go.mod"
    module = "github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3"
    assert requires(host, module) == pin("PULUMI_LANGUAGE_PYTHON_VERSION")
    assert requires(host, "github.com/pulumi/pulumi/pkg/v3") == f"v{pin('PULUMI_LANGUAGE_PYTHON_SDK')}"
    for mod in (cli, host):
        assert (mod.parent / "go.sum").stat().st_size > 0, f"{mod.parent}/go.sum pins every module's hash"


@pytest.mark.parametrize("package", ["pulumi_command", "pulumi_random", "pulumi_kubernetes", "pulumi_docker"])
def test_each_plugin_is_pinned_at_the_version_its_sdk_asks_for(package: str) -> None:
    files = importlib.metadata.files(package) or []
    meta = next(f for f in files if f.name == "pulumi-plugin.json")
    wanted = json.loads(meta.read_text())
    assert plugins()[wanted["name"]][0] == wanted["version"]


def test_every_plugin_without_a_package_says_why() -> None:
    for name, (_, pkg) in plugins().items():
        if not pkg:
            assert re.search(rf'^NOT_BUILDABLE_{name}=".+"$', VERSIONS, re.M), name


def test_build_script_is_shellcheck_clean() -> None:
    shellcheck = shutil.which("shellcheck", path=str(ENGINE_DIR.parents[1] / ".venv" / "bin")) or "shellcheck"
    proc = subprocess.run([shellcheck, "-x", "-P", str(ENGINE_DIR.parents[1]), str(ENGINE_DIR / "build.sh")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
