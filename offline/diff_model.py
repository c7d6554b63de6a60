"""What changes between two plans, grouped per host: the pure half of the plan diff.

``compare`` takes two ``Snapshot``s (plan document, rendered files, policy results) and returns
a ``StackDiff``: the counts, the stateful resources touched, and one ``HostSection`` per machine
(its changed resources and its changed files). Shared text is never repeated: the shell library
is one file (``shell/lib.sh``), a removed file is named, not replayed, and a file added for a new
host that matches a sibling host's file (names and addresses substituted) is shown as "same as"
or as its difference from that sibling. ``markdown`` renders a whole diff; the PR comment
(``offline.pr_comment``) renders several within GitHub's size limit.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from components import scripts
from offline import per_host

REPLACE_ALWAYS = ("docker:index/container:Container", "docker:index/image:Image", "docker:index/network:Network")
COMMENT_MARKER = "<!-- hpc-cluster plan diff -->"
SHARED = "(shared)"


@dataclass
class Snapshot:
    """One side of the diff: the plan document, its rendered files, its policy results."""

    doc: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)
    policies: list[dict[str, str]] = field(default_factory=list)

    @classmethod
    def load(cls, out: Path) -> Snapshot:
        """A written plan (``offline.plan --out``); an empty one where nothing was planned."""
        doc = json.loads((out / "plan.json").read_text()) if (out / "plan.json").exists() else {"resources": []}
        root = out / "files"
        files = {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}
        results = out / "policy-results.json"
        return cls(doc, files, json.loads(results.read_text()) if results.exists() else [])

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return {r["urn"]: r for r in self.doc.get("resources", [])}

    @cached_property
    def hosts(self) -> frozenset[str]:
        """The hosts this plan runs steps on (its rendered file tree)."""
        return frozenset(p.split("/")[1] for p in self.files if p.startswith("hosts/"))


@dataclass
class Change:
    kind: str  # add, remove, update, replace
    resource: dict[str, Any]
    keys: list[str] = field(default_factory=list)


@dataclass
class HostSection:
    name: str
    status: str  # "new", "removed" or "changed"
    changes: list[Change] = field(default_factory=list)
    files: list[tuple[str, str]] = field(default_factory=list)  # (path, Markdown block)


@dataclass
class StackDiff:
    stack: str
    base_ref: str
    counts: dict[str, int]
    total_after: int
    stateful: list[str]
    sections: list[HostSection]
    policies: list[str]

    def header(self) -> list[str]:
        """Title, the STATEFUL warning (first: it is what a reviewer must not miss), the counts."""
        lines = [f"## Plan diff for `{self.stack}` against `{self.base_ref}`", ""]
        if self.stateful:
            lines += ["### :warning: STATEFUL RESOURCES AFFECTED", "", *self.stateful, ""]
        c = self.counts
        lines += [
            f"**{c['add']} to add, {c['update']} to update, {c['replace']} to replace, {c['remove']} to remove** "
            f"({sum(c.values())} changes, {self.total_after} resources after)"
            + (f" on {', '.join(s.name for s in self.sections)}." if self.sections else "."),
            "",
        ]
        return lines

    def table(self, section: HostSection) -> list[str]:
        title = f"### {section.name}" + ("" if section.status == "changed" else f" ({section.status})")
        lines = [title, ""]
        if section.changes:
            lines += ["| change | resource | type | changed inputs |", "|---|---|---|---|"]
            for ch in section.changes:
                r = ch.resource
                lines.append(f"| {ch.kind} | `{r['name']}` | `{r['type']}` | {', '.join(ch.keys)} |")
            lines.append("")
        return lines

    def policy_lines(self) -> list[str]:
        return ["### Policies", "", *(self.policies or ["All policies pass."]), ""]

    def markdown(self) -> str:
        """The whole diff: every table and every file block."""
        lines = [COMMENT_MARKER, *self.header()]
        for s in self.sections:
            lines += self.table(s)
            for _, block in s.files:
                lines += [block, ""]
        lines += self.policy_lines()
        return "\n".join(lines) + "\n"


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


def _renamed(a: dict[str, Any], b: dict[str, Any]) -> bool:
    meta_a, meta_b = a["inputs"].get("metadata") or {}, b["inputs"].get("metadata") or {}
    return isinstance(meta_a, dict) and isinstance(meta_b, dict) and any(
        meta_a.get(k) != meta_b.get(k) for k in ("name", "namespace")
    )


def _host_of(r: dict[str, Any], names: set[str]) -> str:
    return per_host.locate(r["type"], r.get("provider"), r.get("inputs", {}), names)[0]


def _file_host(path: str, files: dict[str, str], names: set[str]) -> str:
    """The machine a file is about: its host directory, or the host a step runs for (a worker's
    drain on the head; its delete script inherits that from the create script)."""
    if path.startswith("hosts/"):
        text = files.get(path.replace(".delete.sh", ".sh"), files.get(path, ""))
        runs_for = scripts.headers(text).get("runs-for")
        return runs_for if runs_for in names else path.split("/")[1]
    if path.startswith("k8s/"):  # a workload pinned to a node belongs to that machine
        try:
            doc = yaml.safe_load(files.get(path, "")) or {}
        except yaml.YAMLError:
            doc = {}
        spec = ((doc.get("spec") or {}).get("template") or {}).get("spec") or {} if isinstance(doc, dict) else {}
        node = (spec.get("nodeSelector") or {}).get(per_host.HOSTNAME_LABEL)
        return node if node in names else per_host.CLUSTER
    return SHARED if path.startswith("shell/") else "images"


def _fence(body: str) -> str:
    ticks = "````" if "```" in body else "```"
    return f"{ticks}diff\n{body.rstrip()}\n{ticks}"


def _sibling(path: str, text: str, base: Snapshot, host: str) -> tuple[str, str, str] | None:
    """The base file of another host that this added file is most like: (its path, that host,
    its text with the names substituted)."""
    best: tuple[float, str, str, str] | None = None
    for other in sorted(base.hosts - {host}):
        candidate = path.replace(host, other)
        if candidate not in base.files:
            continue
        like = base.files[candidate].replace(other, host)
        ratio = difflib.SequenceMatcher(None, like, text, autojunk=False).quick_ratio()
        if best is None or ratio > best[0]:
            best = (ratio, candidate, other, like)
    return (best[1], best[2], best[3]) if best and best[0] > 0.6 else None


def file_block(path: str, before: str | None, after: str | None, base: Snapshot, host: str) -> str:
    """One changed file as a collapsed Markdown block."""
    title = f"<details><summary><code>{path}</code>"
    if after is None:
        return f"{title} removed</summary></details>"
    if before is None and path.startswith("hosts/") and (sib := _sibling(path, after, base, host)):
        other_path, other, like = sib
        if like == after:
            return f"{title} new, same as <code>{other_path}</code> with {other} → {host}</summary></details>"
        body = "".join(difflib.unified_diff(like.splitlines(True), after.splitlines(True), other_path, f"b/{path}"))
        note = f" new, shown as its difference from <code>{other_path}</code> ({other} → {host})"
        return f"{title}{note}</summary>\n\n{_fence(body)}\n\n</details>"
    body = "".join(
        difflib.unified_diff((before or "").splitlines(True), after.splitlines(True), f"a/{path}", f"b/{path}")
    )
    return f"{title}</summary>\n\n{_fence(body)}\n\n</details>"


def compare(base: Snapshot, head: Snapshot, stack: str, base_ref: str) -> StackDiff:
    b, h = base.resources, head.resources
    names = set(base.hosts | head.hosts)
    changes: list[Change] = [Change("add", h[u]) for u in sorted(h.keys() - b.keys())]
    changes += [Change("remove", b[u]) for u in sorted(b.keys() - h.keys())]
    for urn in sorted(b.keys() & h.keys()):
        keys = changed_keys(b[urn].get("inputs", {}), h[urn].get("inputs", {}))
        if keys:
            kind = "replace" if replaces(h[urn], keys) or _renamed(b[urn], h[urn]) else "update"
            changes.append(Change(kind, h[urn], keys))
    counts = {k: sum(1 for c in changes if c.kind == k) for k in ("add", "update", "replace", "remove")}

    stateful = []
    for c in changes:
        held = stateful_of(c.resource)
        if held is None or c.kind == "add":
            continue
        what = {"remove": "its data would be lost", "replace": f"changed: {', '.join(c.keys)}"}.get(
            c.kind, f"changed: {', '.join(c.keys)}; a changed layout is refused on the host, not forced"
        )
        stateful.append(f"- **{c.kind}** `{c.resource['name']}` holds **{held}** ({what})")

    sections: dict[str, HostSection] = {}

    def section(name: str) -> HostSection:
        if name not in sections:
            status = "new" if name not in base.hosts and name in head.hosts else "changed"
            status = "removed" if name in base.hosts and name not in head.hosts else status
            sections[name] = HostSection(name, status)
        return sections[name]

    for c in changes:
        section(_host_of(c.resource, names)).changes.append(c)
    for path in sorted(p for p in base.files.keys() | head.files.keys() if base.files.get(p) != head.files.get(p)):
        before, after = base.files.get(path), head.files.get(path)
        host = _file_host(path, head.files if after is not None else base.files, names)
        section(host).files.append((path, file_block(path, before, after, base, host)))
    order = {n: i for i, n in enumerate(sorted(names))}
    ordered = sorted(sections.values(), key=lambda s: (s.status != "new", order.get(s.name, len(order)), s.name))
    policies = [f"- **{p['level']}** `{p['policy']}`: {p['message']}" for p in head.policies]
    return StackDiff(stack, base_ref, counts, len(h), stateful, ordered, policies)
