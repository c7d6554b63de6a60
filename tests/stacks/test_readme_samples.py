"""The README's samples are what the commands print: each is produced here by the real command
with the input the sample names, and compared line by line (a changed message fails until the
README changes with it)."""

from __future__ import annotations

import copy
import json
import re

from offline import plan
from tests.stacks.test_operator_errors import DEV, cli, no_traceback

README = (plan.ROOT / "README.md").read_text()


def sample(first_line_start: str) -> list[str]:
    """The lines of the README's ```text block whose first line starts with ``first_line_start``."""
    for block in re.findall(r"```text\n(.*?)```", README, re.S):
        lines = block.rstrip("\n").splitlines()
        if lines and lines[0].startswith(first_line_start):
            return lines
    raise AssertionError(f"no README sample starts with {first_line_start!r}")


def test_the_configuration_error_sample(tmp_path):
    lines = sample("$ make plan STACK=dev   # rpi2's sshUser misspelt as sshUsr")
    hosts = copy.deepcopy(DEV["hpc:hosts"])
    rpi2 = next(h for h in hosts if h["name"] == "rpi2")
    rpi2["sshUsr"] = rpi2.pop("sshUser")
    proc = cli(
        "offline.plan", "--stack", "dev", "--out", str(tmp_path / "p"),
        "--set", f"hpc:hosts={json.dumps(hosts)}", "--set", f"hcp:k3s={json.dumps(DEV['hpc:k3s'])}",
    )  # fmt: skip
    assert proc.returncode == 2
    assert no_traceback(proc) == lines[1:]


def test_the_plan_diff_sample(tmp_path):
    """The sample: dev with phi3-mini-128k's maxModelLen at 16000 against dev as committed."""
    from offline.plan_diff import COMMENT_MARKER, Snapshot, diff

    start = README.index(COMMENT_MARKER)
    expected = README[start : README.index("\n\n## ", start)].strip()
    inference = copy.deepcopy(DEV["hpc:inference"])
    phi3 = next(m for m in inference["models"] if m["name"] == "phi3-mini-128k")
    assert phi3["maxModelLen"] != 16000
    phi3["maxModelLen"] = 16000
    changed = ["--set", f"hpc:inference={json.dumps(inference)}"]
    for out, extra in ((tmp_path / "base", []), (tmp_path / "head", changed)):
        proc = cli("offline.plan", "--stack", "dev", "--out", str(out), "--quiet", *extra)
        assert proc.returncode in (0, 1), proc.stderr  # 1: advisory policy results only
    got = diff(Snapshot.load(tmp_path / "base"), Snapshot.load(tmp_path / "head"), "dev", "HEAD~1").strip()
    assert got == expected
