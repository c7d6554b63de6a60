"""Plan diff for reviewers: what a change would do, as Markdown (the pull-request comment).

``python -m stacks.plan_diff --base origin/main --stack dev`` (``make plan-diff``) plans the
stack at ``--base`` (its own code, in a temporary git worktree) and in the working tree, and
prints:

* resources added, removed, updated and replaced, with the input keys that changed (replaced:
  a change Pulumi carries out by replacement: ``triggers`` of remote commands, ``replaceOnChanges``
  keys, Docker containers and images, a Kubernetes object's name or namespace);
* a unified diff of every changed rendered file, per host (scripts, configs, manifests);
* the policy results of the new plan;
* a loud section for stateful resources (bricks, volume, Slurm state and accounting DB) that
  would be removed, replaced or changed, with what they hold.
"""

from __future__ import annotations

import argparse
import difflib
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components import scripts
from stacks.plan import ROOT

REPLACE_ALWAYS = ("docker:index/container:Container", "docker:index/image:Image", "docker:index/network:Network")
COMMENT_MARKER = "<!-- hpc-cluster plan diff -->"


@dataclass
class Snapshot:
    """One side of the diff: the plan document, its rendered files, its policy results."""

    doc: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)
    policies: list[dict[str, str]] = field(default_factory=list)

    @classmethod
    def load(cls, out: Path) -> Snapshot:
        doc = json.loads((out / "plan.json").read_text()) if (out / "plan.json").exists() else {"resources": []}
        files = (
            {
                str(p.relative_to(out / "files")): p.read_text()
                for p in sorted((out / "files").rglob("*"))
                if p.is_file()
            }
            if (out / "files").exists()
            else {}
        )
        results = out / "policy-results.json"
        return cls(doc, files, json.loads(results.read_text()) if results.exists() else [])

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return {r["urn"]: r for r in self.doc.get("resources", [])}


def stateful_of(r: dict[str, Any]) -> str | None:
    """What a resource holds that would be lost, from its step header or its protection."""
    create = r.get("inputs", {}).get("create")
    if isinstance(create, str):
        held = scripts.headers(scripts.unwrap(create)).get("stateful")
        if held:
            return held
    return "protected state" if r.get("options", {}).get("protect") else None


def changed_keys(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def replaces(r: dict[str, Any], keys: list[str]) -> bool:
    if r["type"] in REPLACE_ALWAYS:
        return True
    replace_on = {k.split("[")[0].split(".")[0] for k in r.get("options", {}).get("replaceOnChanges", [])}
    return bool(replace_on & set(keys))


def diff(base: Snapshot, head: Snapshot, stack: str, base_ref: str) -> str:
    b, h = base.resources, head.resources
    added = sorted(h.keys() - b.keys())
    removed = sorted(b.keys() - h.keys())
    updated: list[tuple[str, list[str]]] = []
    replaced: list[tuple[str, list[str]]] = []
    for urn in sorted(b.keys() & h.keys()):
        keys = changed_keys(b[urn].get("inputs", {}), h[urn].get("inputs", {}))
        if not keys:
            continue
        meta_b = b[urn]["inputs"].get("metadata") or {}
        meta_h = h[urn]["inputs"].get("metadata") or {}
        renamed = (
            isinstance(meta_b, dict)
            and isinstance(meta_h, dict)
            and any(meta_b.get(k) != meta_h.get(k) for k in ("name", "namespace"))
        )
        (replaced if replaces(h[urn], keys) or renamed else updated).append((urn, keys))

    lines = [COMMENT_MARKER, f"## Plan diff for `{stack}` against `{base_ref}`", ""]
    stateful: list[str] = []
    for urn in removed:
        if held := stateful_of(b[urn]):
            stateful.append(f"- **removed** `{b[urn]['name']}` holds **{held}**: its data would be lost")
    for urn, keys in replaced:
        if held := stateful_of(h[urn]):
            stateful.append(f"- **replaced** `{h[urn]['name']}` holds **{held}** (changed: {', '.join(keys)})")
    for urn, keys in updated:
        if held := stateful_of(h[urn]):
            stateful.append(
                f"- **changed** `{h[urn]['name']}` holds **{held}** (changed: {', '.join(keys)}); "
                "check the diff below: a changed layout is refused on the host, not forced"
            )
    if stateful:
        lines += ["### :warning: STATEFUL RESOURCES AFFECTED", "", *stateful, ""]

    total = len(added) + len(removed) + len(updated) + len(replaced)
    lines += [
        f"**{len(added)} to add, {len(updated)} to update, {len(replaced)} to replace, "
        f"{len(removed)} to remove** ({total} changes, {len(h)} resources after).",
        "",
    ]

    def table(title: str, rows: list[tuple[dict[str, Any], list[str]]]) -> None:
        if rows:
            lines.extend([f"### {title}", "", "| resource | type | changed inputs |", "|---|---|---|"])
            lines.extend(f"| `{r['name']}` | `{r['type']}` | {', '.join(keys)} |" for r, keys in rows)
            lines.append("")

    table("Added", [(h[u], []) for u in added])
    table("Removed", [(b[u], []) for u in removed])
    table("Replaced", [(h[u], k) for u, k in replaced])
    table("Updated", [(h[u], k) for u, k in updated])

    changed_files = sorted(p for p in base.files.keys() | head.files.keys() if base.files.get(p) != head.files.get(p))
    if changed_files:
        lines += ["### Rendered files", ""]
        for path in changed_files:
            before = base.files.get(path, "").splitlines(keepends=True)
            after = head.files.get(path, "").splitlines(keepends=True)
            body = "".join(difflib.unified_diff(before, after, f"a/{path}", f"b/{path}"))
            lines += [
                f"<details><summary><code>{path}</code></summary>",
                "",
                "```diff",
                body.rstrip(),
                "```",
                "",
                "</details>",
                "",
            ]

    lines += ["### Policies", ""]
    if head.policies:
        lines += [f"- **{p['level']}** `{p['policy']}`: {p['message']}" for p in head.policies]
    else:
        lines.append("All policies pass.")
    return "\n".join(lines) + "\n"


def plan_into(out: Path, cwd: Path, stack: str) -> None:
    """Run the offline plan of ``cwd``'s code for ``stack`` into ``out`` (policy failures are reported,
    not fatal here: the diff shows them)."""
    if not (cwd / "stacks" / "plan.py").exists():
        return  # the base predates the plan: everything is new
    proc = subprocess.run(
        [sys.executable, "-m", "stacks.plan", "--stack", stack, "--out", str(out), "--quiet"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode not in (0, 1) or not (out / "plan.json").exists():
        raise RuntimeError(f"planning {stack} in {cwd} failed:\n{proc.stdout}\n{proc.stderr}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stacks.plan_diff", description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="git ref to compare against, e.g. origin/main")
    ap.add_argument("--stack", default="dev")
    ap.add_argument("--out", type=Path, help="write the Markdown here as well as to stdout")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hpc-plan-diff-") as tmp:
        t = Path(tmp)
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(t / "base"), a.base], cwd=ROOT, check=True, capture_output=True
        )
        try:
            plan_into(t / "base-plan", t / "base", a.stack)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(t / "base")], cwd=ROOT, capture_output=True)
        plan_into(t / "head-plan", ROOT, a.stack)
        text = diff(Snapshot.load(t / "base-plan"), Snapshot.load(t / "head-plan"), a.stack, a.base)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
