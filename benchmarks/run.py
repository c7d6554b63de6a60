"""make bench: plan scale against the bare SDK, and the modelled `pulumi up` critical path.

For 8, 64, 256 and 1024 GPU workers (prod-shaped stacks, benchmarks/stack.py), each measured in
a fresh process:

* **plan scale**: resources registered, wall time and peak RSS of the offline plan, and in the
  same run a baseline that registers the same number of plain resources (remote commands with a
  one-word script, no project code) under the same mock engine and recording monitor;
  time per resource and the ratio to the baseline;
* **critical path**: the plan's dependency graph (dependencies and provider edges) weighted with
  the nominal step durations of ``DURATIONS``, as wall time with unbounded parallelism and with
  ``pulumi up --parallel 16`` (list scheduling), plus the longest chain.

Results: build/bench/results.json, results.md, plan_scale.png. Change minimality is asserted by
tests/stacks/test_change_minimality.py (part of make test).
"""

from __future__ import annotations

import argparse
import heapq
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from offline.plan import ROOT, PlanRun, Record

SIZES = (8, 64, 256, 1024)
PARALLEL = 16
OUT = ROOT / "build" / "bench"

# Nominal durations (seconds) of one step on a real site, by resource name suffix or type.
# Package installs and image builds dominate; model loads are the longest single steps.
DURATIONS: list[tuple[str, float]] = [
    ("-glusterd", 60),
    ("-brick", 2),
    ("-peers", 10),
    ("-volume", 20),
    ("-options", 10),
    ("-nfs-install", 60),
    ("-nfs-config", 10),
    ("-mount-fstab", 30),
    ("-k3s", 90),
    ("-kubeconfig", 2),
    ("-munge-key-file", 2),
    ("-slurm-secrets", 2),
    ("-slurm-state", 2),
    ("-slurm-conf", 3),
    ("-gres-conf", 3),
    ("-cgroup-conf", 3),
    ("-sysctl", 2),
    ("-gpu-preflight", 5),
    ("-drain", 5),
    ("-resume", 3),
    ("-import", 30),
    ("inference-check", 10),
]
TYPE_DURATIONS: dict[str, float] = {
    "docker:index/image:Image": 300,  # build on the host
    "docker:index/network:Network": 3,
    "docker:index/container:Container": 30,
    "kubernetes:apps/v1:Deployment": 600,  # model download and load into GPU memory
    "kubernetes:helm.sh/v3:Release": 90,
}
DEFAULT_DURATION = 2.0


def duration(r: Record) -> float:
    if not r.custom or r.type.startswith("pulumi:providers:") or r.type.startswith("random:"):
        return 0.0 if not r.custom else 0.5
    for suffix, seconds in DURATIONS:
        if r.name.endswith(suffix):
            return seconds
    return TYPE_DURATIONS.get(r.type, DEFAULT_DURATION)


def graph(result: PlanRun) -> dict[str, list[str]]:
    """urn -> the urns it waits for (dependencies and its provider)."""
    urns = {r.urn for r in result.resources}
    return {
        r.urn: sorted({d for d in r.dependencies if d in urns} | ({r.provider} if r.provider in urns else set()))
        for r in result.resources
    }


def critical_path(result: PlanRun) -> tuple[float, list[str]]:
    """Wall time with unbounded parallelism, and the longest chain (resource names)."""
    from graphlib import TopologicalSorter

    g = graph(result)
    by_urn = {r.urn: r for r in result.resources}
    finish: dict[str, float] = {}
    prev: dict[str, str | None] = {}
    for urn in TopologicalSorter(g).static_order():
        start, before = 0.0, None
        for d in g[urn]:
            if finish[d] > start:
                start, before = finish[d], d
        finish[urn] = start + duration(by_urn[urn])
        prev[urn] = before
    end = max(finish, key=finish.__getitem__)
    chain: list[str] = []
    node: str | None = end
    while node is not None:
        if duration(by_urn[node]) > 0:
            chain.append(by_urn[node].name)
        node = prev[node]
    return finish[end], chain[::-1]


def parallel_makespan(result: PlanRun, slots: int) -> float:
    """Wall time when at most ``slots`` steps run at once (pulumi up --parallel), greedy list scheduling."""
    g = graph(result)
    by_urn = {r.urn: r for r in result.resources}
    waiting = {u: set(d) for u, d in g.items()}
    users: dict[str, list[str]] = {u: [] for u in g}
    for u, deps in g.items():
        for d in deps:
            users[d].append(u)
    ready = sorted(u for u, d in waiting.items() if not d)
    running: list[tuple[float, str]] = []
    now, done = 0.0, 0

    def release(u: str) -> None:
        for v in users[u]:
            waiting[v].discard(u)
            if not waiting[v]:
                ready.append(v)

    while done < len(g):
        while ready and (len(running) < slots or duration(by_urn[ready[0]]) == 0):
            u = ready.pop(0)
            if duration(by_urn[u]) == 0:
                done += 1
                release(u)
            else:
                heapq.heappush(running, (now + duration(by_urn[u]), u))
        if not running:
            continue
        now, u = heapq.heappop(running)
        done += 1
        release(u)
    return now


def baseline_program(count: int) -> Any:
    def program() -> None:
        from pulumi_command import remote

        for i in range(count):
            remote.Command(f"baseline-{i}", connection=remote.ConnectionArgs(host="10.0.0.1"), create="true")

    return program


def measure(workers: int, baseline: bool) -> dict[str, Any]:
    """One measurement in this (fresh) process."""
    from benchmarks.stack import prod_shaped
    from offline import plan
    from stacks import cluster  # noqa: F401

    overrides = prod_shaped(workers)
    started = time.perf_counter()
    result = plan.run("prod", overrides)
    seconds = time.perf_counter() - started
    out: dict[str, Any] = {"workers": workers, "resources": len(result.resources), "seconds": seconds}
    if baseline:
        started = time.perf_counter()
        base = plan.run("prod", overrides, program=baseline_program(len(result.resources)))
        out["baseline_seconds"] = time.perf_counter() - started
        out["baseline_resources"] = len(base.resources)
    else:
        out["critical_path_s"], out["longest_chain"] = critical_path(result)
        out["parallel16_s"] = parallel_makespan(result, PARALLEL)
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def run_isolated(workers: int, baseline: bool) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--one", str(workers), *(["--baseline"] if baseline else [])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3600,
        check=True,
    )
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def report(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| GPU workers | resources | plan s | ms/resource | baseline ms/resource | ratio | peak RSS MiB | "
        "critical path s | --parallel 16 s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['workers']} | {r['resources']} | {r['seconds']:.1f} | {r['ms_per_resource']:.2f} | "
            f"{r['baseline_ms_per_resource']:.2f} | {r['ratio']:.2f} | {r['peak_rss_mib']:.0f} | "
            f"{r['critical_path_s']:.0f} | {r['parallel16_s']:.0f} |"
        )
    first, last = rows[0], rows[-1]
    at64 = next((r for r in rows if r["workers"] == 64), first)
    lines += [
        "",
        f"- project overhead at {last['workers']} workers: {last['ratio']:.2f}x the bare SDK per resource "
        "(target <= 1.3)",
        f"- ms/resource at {last['workers']} vs 64: {last['ms_per_resource'] / at64['ms_per_resource']:.2f}x "
        "(target <= 1.2)",
        f"- critical path at {last['workers']} vs {first['workers']}: "
        f"{last['critical_path_s'] / first['critical_path_s']:.2f}x (target <= 1.10)",
        f"- longest chain: {' -> '.join(last['longest_chain'])}",
    ]
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    x = [r["workers"] for r in rows]
    a.plot(x, [r["ms_per_resource"] for r in rows], "o-", label="hpc-cluster")
    a.plot(x, [r["baseline_ms_per_resource"] for r in rows], "s--", label="bare SDK baseline")
    a.set(xscale="log", xlabel="GPU workers", ylabel="ms per resource", title="Offline plan")
    a.legend()
    b.plot(x, [r["critical_path_s"] / 60 for r in rows], "o-", label="unbounded parallelism")
    b.plot(x, [r["parallel16_s"] / 60 for r in rows], "s--", label="--parallel 16")
    b.set(xscale="log", yscale="log", xlabel="GPU workers", ylabel="minutes", title="Modelled pulumi up")
    b.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--baseline", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one is not None:
        print(json.dumps(measure(a.one, a.baseline)))
        return 0
    rows = []
    for n in a.sizes:
        print(f"{n:5d} workers: planning the stack and the baseline ...", file=sys.stderr, flush=True)
        project = run_isolated(n, baseline=False)
        base = run_isolated(n, baseline=True)
        row = project | {
            "baseline_seconds": base["baseline_seconds"],
            "ms_per_resource": 1000 * project["seconds"] / project["resources"],
            "baseline_ms_per_resource": 1000 * base["baseline_seconds"] / base["baseline_resources"],
        }
        row["ratio"] = row["ms_per_resource"] / row["baseline_ms_per_resource"]
        rows.append(row)
        print(
            f"{n:5d} workers: {row['resources']} resources, {row['seconds']:.1f}s "
            f"({row['ms_per_resource']:.2f} ms/resource, {row['ratio']:.2f}x baseline), "
            f"critical path {row['critical_path_s'] / 60:.1f} min, --parallel 16 {row['parallel16_s'] / 60:.1f} min",
            flush=True,
        )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(rows, indent=1) + "\n")
    (OUT / "results.md").write_text(report(rows))
    plot(rows, OUT / "plan_scale.png")
    print(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
