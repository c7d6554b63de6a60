"""Plan diff for reviewers: what a change would do, as Markdown (the pull-request comment).

``python -m offline.plan_diff --base origin/main --stack dev`` (``make plan-diff``) plans the
stack at ``--base`` (its own code, in a temporary git worktree) and in the working tree, and
writes ``build/plan-diff-<stack>.md`` (everything) and ``.json`` (the same, structured, for
``offline.pr_comment``). The diff (``offline.diff_model``) leads with the stateful resources a
change would touch and the counts, then one section per machine: its added, removed, updated and
replaced resources (replaced: ``triggers`` of remote commands, ``replaceOnChanges`` keys, Docker
containers and images, a Kubernetes object's new name) and its changed files, then the policy
results. A stack that does not exist at the base is all added; a base that is not a commit, or a
stack that exists nowhere, is refused in one line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from offline.diff_model import COMMENT_MARKER, Snapshot, StackDiff, compare
from offline.record import ROOT
from offline.stack_file import stacks_in

__all__ = ["COMMENT_MARKER", "Snapshot", "diff", "main"]


def diff(base: Snapshot, head: Snapshot, stack: str, base_ref: str) -> str:
    """The whole diff as Markdown."""
    return compare(base, head, stack, base_ref).markdown()


class DiffError(Exception):
    """A misuse of the plan diff, said in one line."""


def plan_into(out: Path, cwd: Path, stack: str) -> None:
    """Run the offline plan of ``cwd``'s code for ``stack`` into ``out`` (policy failures are reported,
    not fatal here: the diff shows them). Nothing is planned where the stack or the plan does not
    exist yet (everything is then new)."""
    module = next((m for m in ("offline.plan", "stacks.plan") if (cwd / f"{m.replace('.', '/')}.py").exists()), None)
    if module is None or not (cwd / f"Pulumi.{stack}.yaml").exists():
        return
    proc = subprocess.run(
        [sys.executable, "-m", module, "--stack", stack, "--out", str(out), "--quiet"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode not in (0, 1) or not (out / "plan.json").exists():
        last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        raise DiffError(f"planning {stack} at {cwd.name} failed: {last}")


def _commit(ref: str) -> str:
    proc = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=ROOT, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise DiffError(f"--base {ref!r} is not a commit in this clone (git fetch origin, or name a branch or sha)")
    return proc.stdout.strip()


def _progress(line: str) -> None:
    print(f"plan-diff: {line}", file=sys.stderr, flush=True)


def stack_diff(base_ref: str, stack: str, progress: Callable[[str], None] = _progress) -> StackDiff:
    """Both plans and their comparison; each stage is announced on ``progress`` (stderr), with
    its time when it ends, so a run of several seconds is never silent."""
    commit = _commit(base_ref)
    if not (ROOT / f"Pulumi.{stack}.yaml").exists():
        raise DiffError(f"--stack {stack!r}: no Pulumi.{stack}.yaml here; stacks: {', '.join(stacks_in(ROOT))}")
    with tempfile.TemporaryDirectory(prefix="hpc-plan-diff-") as tmp:
        t = Path(tmp)
        subprocess.run(["git", "worktree", "add", "--detach", str(t / "base"), commit], cwd=ROOT, check=True,
                       capture_output=True)  # fmt: skip
        try:
            started = time.monotonic()
            progress(f"planning {stack} at {base_ref} ({commit[:12]}) ...")
            plan_into(t / "base-plan", t / "base", stack)
            progress(f"planned {base_ref} in {time.monotonic() - started:.1f} s")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(t / "base")], cwd=ROOT, capture_output=True)
        started = time.monotonic()
        progress(f"planning {stack} in the working tree ...")
        plan_into(t / "head-plan", ROOT, stack)
        progress(f"planned the working tree in {time.monotonic() - started:.1f} s; comparing ...")
        return compare(Snapshot.load(t / "base-plan"), Snapshot.load(t / "head-plan"), stack, base_ref)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m offline.plan_diff", description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="git ref to compare against, e.g. origin/main")
    ap.add_argument("--stack", default="dev")
    ap.add_argument("--out", type=Path, help="write the Markdown here (and its .json beside it) as well as to stdout")
    a = ap.parse_args(argv)
    try:
        result = stack_diff(a.base, a.stack)
    except DiffError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    text = result.markdown()
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text)
        a.out.with_suffix(".json").write_text(json.dumps(dataclasses.asdict(result), indent=1) + "\n")
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
