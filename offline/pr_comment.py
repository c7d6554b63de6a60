"""The pull-request comment: every stack's plan diff, within GitHub's size limit by design.

GitHub refuses a comment body above 65,536 characters; cutting the text at a fixed length (what
the workflow once did) can end inside a code fence or drop the last stack without a word. Here
the comment is built from whole parts, most important first:

1. for every stack: its title, the STATEFUL warning, the counts and the policy results (always);
2. the per-host tables of changed resources, stack by stack, while they fit;
3. the file diffs (each a collapsed ``<details>`` block), in order, while they fit.

What does not fit is counted per stack and points to the full diff in the workflow's artifact.

``python -m offline.pr_comment --artifact-url URL build/plan-diff-dev.json build/plan-diff-prod.json``
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from offline.diff_model import COMMENT_MARKER, Change, HostSection, StackDiff

GITHUB_LIMIT = 65_536
BUDGET = 60_000  # headroom for GitHub's own accounting (it counts UTF-16 code units)


def from_dict(d: dict[str, Any]) -> StackDiff:
    sections = [
        HostSection(
            s["name"],
            s["status"],
            [Change(c["kind"], c["resource"], c["keys"]) for c in s["changes"]],
            [(p, b) for p, b in s["files"]],
        )
        for s in d["sections"]
    ]
    return StackDiff(
        d["stack"], d["base_ref"], d["counts"], d["total_after"], d["stateful"], sections, d["policies"]
    )


def _size(lines: list[str]) -> int:
    return sum(len(line) + 1 for line in lines)


def compose(diffs: list[StackDiff], artifact_url: str | None = None, budget: int = BUDGET) -> str:
    """One comment for all stacks, never above ``budget`` characters, never cut inside a block."""
    where = f"[the `plan` artifact]({artifact_url})" if artifact_url else "the `plan` artifact of this run"
    intro = [COMMENT_MARKER, f"Full diffs, every file: {where} (`build/plan-diff-<stack>.md`).", ""]
    omitted_note = 120  # room for each stack's "N more ..." line
    used = _size(intro) + sum(
        _size(d.header()) + _size(d.policy_lines()) + omitted_note for d in diffs
    )
    tables: dict[int, bool] = {}
    for i, d in enumerate(diffs):
        cost = sum(_size(d.table(s)) for s in d.sections)
        tables[i] = used + cost <= budget
        used += cost if tables[i] else 0
    shown: set[tuple[int, int, int]] = set()
    for i, d in enumerate(diffs):
        for j, s in enumerate(d.sections):
            for k, (_, block) in enumerate(s.files):
                cost = _size([block, ""])
                if tables[i] and used + cost <= budget:
                    shown.add((i, j, k))
                    used += cost
    lines = list(intro)
    for i, d in enumerate(diffs):
        lines += d.header()
        hidden = 0
        for j, s in enumerate(d.sections):
            if tables[i]:
                lines += d.table(s)
            for k, (_, block) in enumerate(s.files):
                if (i, j, k) in shown:
                    lines += [block, ""]
                else:
                    hidden += 1
        if not tables[i]:
            lines += [f"_{len(d.sections)} machine sections did not fit here: see {where}._", ""]
        if hidden:
            lines += [f"_{hidden} more changed files for `{d.stack}`: see {where}._", ""]
        lines += d.policy_lines()
    text = "\n".join(lines) + "\n"
    if len(text) > budget:  # only when the headers alone exceed the budget (hundreds of stacks)
        raise ValueError(f"the stack summaries alone are {len(text)} characters, above {budget}")
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m offline.pr_comment", description=__doc__.split("\n")[0])
    ap.add_argument("diffs", nargs="+", type=Path, help="build/plan-diff-<stack>.json files")
    ap.add_argument("--artifact-url", default=None)
    ap.add_argument("--budget", type=int, default=BUDGET)
    a = ap.parse_args(argv)
    missing = [str(p) for p in a.diffs if not p.is_file()]
    if missing:
        print(f"error: no such plan diff: {', '.join(missing)} (make plan-diff writes them)", file=sys.stderr)
        return 2
    diffs = [from_dict(json.loads(p.read_text())) for p in a.diffs]
    print(compose(diffs, a.artifact_url, a.budget), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
