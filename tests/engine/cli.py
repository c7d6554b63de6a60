"""The real Pulumi engine for tests: the CLI `make engine` built, a throwaway copy of the project,
a local file backend and a passphrase secrets provider, and runs inside a network namespace with
only loopback, so nothing can reach a stack's real addresses.

Nothing here imitates the engine: every call runs `.engine/bin/pulumi`, which starts the real
Python language host, runs the unchanged program and talks to the plugins `make engine` installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / ".engine"
STATUS = ENGINE / "status.json"
PASSPHRASE = "engine-test-passphrase-not-a-secret-of-any-site"
RUN_TIMEOUT_S = 300
VERSIONS = ROOT / "tools" / "engine" / "versions.env"


def pin(name: str) -> str:
    """A version from tools/engine/versions.env, where make engine's pins live."""
    match = re.search(rf"^{name}=(\S+)$", VERSIONS.read_text(), re.M)
    assert match, f"{name} is not set in {VERSIONS}"
    return match.group(1)


def status() -> dict[str, Any]:
    """What `make engine` built: versions and, per plugin, built or the reason it could not be."""
    return dict(json.loads(STATUS.read_text()))


def missing_plugins() -> dict[str, str]:
    """Plugins the engine lacks, each with the reason `make engine` recorded."""
    return {n: p["reason"] for n, p in status()["plugins"].items() if p["state"] != "built"}


@dataclass
class Result:
    rc: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def json(self) -> dict[str, Any]:
        return dict(json.loads(self.stdout))


class Project:
    """A copy of the committed project (tracked files only) with its own state and stacks."""

    def __init__(self, tmp: Path):
        self.dir = tmp / "project"
        self.state = tmp / "state"
        self.home = tmp / "pulumi-home"
        self.passphrase = PASSPHRASE
        files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout
        for rel in filter(None, files.decode().split("\0")):
            target = self.dir / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, target)
        (self.dir / ".venv").symlink_to(ROOT / ".venv")
        self.state.mkdir()
        # The project's PULUMI_HOME holds the plugins make engine installed; a copy keeps the
        # tests' credentials and workspace files out of the developer's.
        shutil.copytree(ENGINE / "home", self.home, symlinks=True)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")}
        env.update(
            PATH=f"{ROOT / '.venv' / 'bin'}:{ENGINE / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            PULUMI_HOME=str(self.home),
            PULUMI_BACKEND_URL=f"file://{self.state}",
            PULUMI_CONFIG_PASSPHRASE=self.passphrase,
            PULUMI_SKIP_UPDATE_CHECK="true",
            PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION="true",
            PULUMI_IGNORE_AMBIENT_PLUGINS="true",
        )
        return env

    def pulumi(self, *args: str, stdin: str | None = None, isolated: bool = False) -> Result:
        """Run the real CLI in the project. isolated: in a new network namespace with only
        loopback up (the engine and its plugins talk gRPC on 127.0.0.1; nothing else is reachable)."""
        cmd = [str(ENGINE / "bin" / "pulumi"), *args, "--non-interactive"]
        if isolated:
            cmd = ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *cmd]
        p = subprocess.run(
            cmd, cwd=self.dir, env=self.env(), input=stdin, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
        )
        return Result(p.returncode, p.stdout, p.stderr)

    def init_stack(self, stack: str, secrets: dict[str, str]) -> None:
        """The README's sequence: stack init, then each secret from stdin (never a command line)."""
        r = self.pulumi("stack", "init", stack)
        assert r.rc == 0, r.output
        for key, value in secrets.items():
            r = self.pulumi("config", "set", "--secret", key, "--stack", stack, stdin=value)
            assert r.rc == 0, r.output

    def preview_json(self, stack: str, *extra: str) -> Result:
        return self.pulumi("preview", "--stack", stack, "--json", *extra, isolated=True)

    def all_state_text(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.state.rglob("*") if p.is_file())


def plan_resources(stack: str) -> dict[str, dict[str, Any]]:
    """The offline plan's resources by URN (make plan writes build/<stack>/plan.json)."""
    plan = json.loads((ROOT / "build" / stack / "plan.json").read_text())
    return {r["urn"]: r for r in plan["resources"]}


def diagnostics(preview: dict[str, Any]) -> list[str]:
    return [d.get("message", "") for d in preview.get("diagnostics", [])]


def missing_plugin_errors(preview: dict[str, Any]) -> set[str]:
    """Plugin names from the engine's own 'no resource plugin' errors."""
    found = set()
    for msg in diagnostics(preview):
        if "no resource plugin 'pulumi-resource-" in msg:
            found.add(msg.split("pulumi-resource-", 1)[1].split("'", 1)[0])
    return found
