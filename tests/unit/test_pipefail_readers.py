"""No pipeline under ``pipefail`` ends in a reader that may stop reading early.

``cmd | head -1``, ``cmd | grep -q x`` and ``cmd | grep -m1 x`` exit as soon as they have what
they need; a ``cmd`` still writing then dies of SIGPIPE, and under ``set -o pipefail`` the whole
pipeline fails (status 141) or an ``if`` takes the wrong branch, depending on timing. shellcheck
does not flag it. Every shell text the project runs is checked: the repository's scripts, the
Dockerfiles' ``RUN`` lines (their ``SHELL`` sets pipefail) and every remote script the dev and
prod plans render. The safe forms read a captured value (``grep -q x <<<"$(cmd)"``,
``[ "$(cmd)" = y ]``) or read the whole input (``sed -n 1p``).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from components import scripts
from offline import plan
from offline.mocks import plain

ROOT = plan.ROOT
# A pipe into head, or into grep with -q/--quiet/--silent/-m/--max-count (also in a flag cluster).
EARLY_READER = re.compile(
    r"\|\s*(head\b|grep(?:\s+-[A-Za-z]+)*\s+(?:-[A-Za-z]*[qm][A-Za-z0-9]*|--(?:quiet|silent|max-count)\b))"
)


def early_exit_readers(text: str) -> list[str]:
    """The lines of a shell text that pipe into an early-exit reader (comments ignored)."""
    found = []
    for line in text.splitlines():
        code = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
        code = re.sub(r"'[^']*'", "''", code)  # a quoted '|' is not a pipe
        if "|" in code and EARLY_READER.search(code.replace("||", "  ")):
            found.append(line.strip())
    return found


def tracked_shell_texts() -> dict[str, str]:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    texts = {}
    for rel in files:
        path = ROOT / rel
        if not path.is_file():
            continue
        head = path.read_bytes()[:64]
        if rel.endswith(".sh") or head.startswith((b"#!/usr/bin/env bash", b"#!/bin/bash")):
            texts[rel] = path.read_text()
        elif Path(rel).name.startswith("Dockerfile"):
            dockerfile = path.read_text().replace("\\\n", " ")
            texts[rel] = "\n".join(line for line in dockerfile.splitlines() if line.startswith("RUN "))
    return texts


def rendered_scripts(stack: str) -> dict[str, str]:
    texts = {}
    for r in plan.run(stack).of_type("command:remote:Command"):
        inputs = plain(r.inputs)
        for kind in ("create", "delete"):
            if isinstance(inputs.get(kind), str):
                texts[f"{stack}:{r.name}:{kind}"] = scripts.unwrap(inputs[kind])
    return texts


@pytest.mark.parametrize(
    "line",
    [
        '"$etcd" --version | head -1',
        "docker inspect -f x c 2>/dev/null | grep -qx true",
        "sc show node w1 | grep -Eq 'State=DRAIN'",
        "ls | grep -m1 foo",
        "k3s ctr images ls -q | grep -c . | grep --quiet 1",
        "x=$(sinfo | grep -F -q idle) && echo",
    ],
)
def test_the_rule_finds_an_early_reader(line):
    assert early_exit_readers(line) == [line]


@pytest.mark.parametrize(
    "line",
    [
        "grep -q 'is UP' <<<\"$(scontrol ping)\"",
        '[ "$(docker inspect -f x c)" = true ]',
        "cmd | sed -n 1p",
        "cmd | grep -c . || true",
        "grep -o 'gpu' <<<\"$g\" | sed -n '1p'",
        "echo 'a | head -1'",
        "# cmd | head -1 in a comment",
        "a || grep -q x file",
    ],
)
def test_the_rule_accepts_safe_forms(line):
    assert early_exit_readers(line) == []


def test_no_repository_script_pipes_into_an_early_reader():
    texts = tracked_shell_texts()
    assert {".ci/run", "tools/k8s/build.sh", "components/shell/lib.sh", "images/slurm/entrypoint.sh"} <= set(texts)
    found = {name: hits for name, text in texts.items() if (hits := early_exit_readers(text))}
    assert not found, found


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_no_rendered_remote_script_pipes_into_an_early_reader(stack):
    texts = rendered_scripts(stack)
    assert len(texts) > 50
    found = {name: hits for name, text in texts.items() if (hits := early_exit_readers(text))}
    assert not found, found
