"""Replay the remote commands a plan recorded: exactly their create/delete text and stdin."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from graphlib import TopologicalSorter

from offline.mocks import plain
from offline.plan import PlanRun, Record


@dataclass(frozen=True)
class Step:
    name: str
    host: str  # address from the recorded connection
    create: str
    delete: str | None
    stdin: str | None
    after: tuple[str, ...]
    host_key: str | None = None  # the connection's pinned host key
    user: str = "root"  # the connection's login user


def steps(result: PlanRun, parents: tuple[str, ...]) -> list[Step]:
    """Remote commands under components of the given types, in dependency order (the hosts'
    preflight steps, which every step depends on, are run by the tests that are about them)."""
    by_urn = {r.urn: r for r in result.resources}
    chosen: dict[str, Record] = {}
    for r in result.of_type("command:remote:Command"):
        parent = by_urn.get(r.parent or "")
        if parent is not None and parent.type in parents:
            chosen[r.urn] = r
    graph = {u: [d for d in r.dependencies if d in chosen] for u, r in chosen.items()}
    out = []
    for urn in TopologicalSorter(graph).static_order():
        r = chosen[urn]
        conn = plain(r.inputs["connection"])
        out.append(
            Step(
                r.name,
                conn["host"],
                plain(r.inputs["create"]),
                plain(r.inputs.get("delete")),
                plain(r.inputs.get("stdin")),
                tuple(by_urn[d].name for d in graph[urn]),
                conn.get("hostKey"),
                conn.get("user", "root"),
            )
        )
    return out


def run_step(
    lab, step: Step, *, delete: bool = False, check: bool = True, timeout: float = 300
) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    command = step.delete if delete else step.create
    assert command, f"{step.name} has no {'delete' if delete else 'create'} command"
    stdin = step.stdin if not delete else None
    return lab.ssh(
        step.host, command, stdin=stdin, check=check, timeout=timeout, host_key=step.host_key, user=step.user
    )
