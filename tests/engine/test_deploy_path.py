"""The deploy path with the real CLI: the operator's backend, secrets from stdin, never a new stack.

``make up`` from a checkout whose backend has no such stack stops before the engine starts, with
one line naming ``pulumi stack init``, and creates nothing (a new stack would generate new
cluster secrets). Once the stack exists, a second fresh checkout against the same backend finds
the same stack and sets a secret from standard input (the deploy workflow's path)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.engine import cli

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(not (cli.ENGINE / "bin" / "pulumi").exists(), reason="no engine: run make engine"),
]
KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-real-key-of-any-site\n-----END OPENSSH PRIVATE KEY-----\n"


def make(project: cli.Project, *args: str, stdin: str | None = None) -> cli.Result:
    p = subprocess.run(["make", "--no-print-directory", *args], cwd=project.dir, env=project.env(), input=stdin,
                       capture_output=True, text=True, timeout=cli.RUN_TIMEOUT_S)  # fmt: skip
    return cli.Result(p.returncode, p.stdout, p.stderr)


def stacks(project: cli.Project) -> list[str]:
    r = project.pulumi("stack", "ls", "--json")
    assert r.rc == 0, r.output
    return [s["name"] for s in json.loads(r.stdout or "[]")]


def test_make_up_never_creates_a_stack_and_two_checkouts_find_the_same_one(tmp_path):
    first = cli.Project(tmp_path / "a")
    refused = make(first, "up", "STACK=dev")
    assert refused.rc != 0
    errors = [line for line in refused.stderr.splitlines() if line.startswith("hpc: error:")]
    assert len(errors) == 1 and "stack dev does not exist in file://" in errors[0], refused.output
    assert "'pulumi stack init dev'" in errors[0]
    assert stacks(first) == []  # nothing was created, not even an empty stack
    assert not (first.dir / "build" / "dev").exists()  # stopped before the offline plan and the engine

    assert first.pulumi("stack", "init", "dev").rc == 0
    second = cli.Project(tmp_path / "b")  # another fresh checkout, the same backend
    second.state = first.state
    salt = next(line for line in (first.dir / "Pulumi.dev.yaml").read_text().splitlines() if "encryptionsalt" in line)
    with (second.dir / "Pulumi.dev.yaml").open("a") as f:  # the salt line is committed with the stack
        f.write(salt + "\n")
    assert stacks(second) == ["dev"]
    secret = make(second, "secret", "STACK=dev", "KEY=hpc:sshPrivateKey", stdin=KEY)
    assert secret.rc == 0, secret.output
    assert "not-a-real-key" not in secret.output
    shown = second.pulumi("config", "get", "hpc:sshPrivateKey", "--stack", "dev")
    assert shown.rc == 0 and shown.stdout == KEY, shown.output
    assert stacks(first) == ["dev"]  # still one stack in the backend
    assert "not-a-real-key" not in first.all_state_text()
