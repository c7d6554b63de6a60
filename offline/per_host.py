"""The plan read per machine: what will happen on each host, in the order it happens.

An admin asks "what will this do to gpu03?", not "which component types exist". For each host of
the stack this lists, in dependency order (a step after everything it depends on):

* the remote steps that run there, and the steps that run elsewhere *for* it (a worker's drain
  and resume run on the Slurm head: ``# hpc: runs-for=<host>``);
* its Docker images and containers (through the host's own Docker provider);
* the Kubernetes workloads pinned to it, and which model sits on which GPU.

Cluster-wide resources (the k3s API objects that belong to no host, generated secrets) follow.
Pure: it reads a ``PlanRun``'s records and config, and returns text.
"""

from __future__ import annotations

import json
from functools import cache
from typing import TYPE_CHECKING, Any

from components import scripts
from offline.mocks import plain

if TYPE_CHECKING:
    from offline.record import PlanRun, Record

HOSTNAME_LABEL = "kubernetes.io/hostname"
CLUSTER = "(cluster-wide)"


def stack_hosts(result: PlanRun) -> list[dict[str, Any]]:
    """The stack's hosts as configured (name, address, roles, profile)."""
    raw = result.config.get("hpc:hosts", "[]")
    try:
        hosts = json.loads(raw)
    except json.JSONDecodeError:
        return []
    return [h for h in hosts if isinstance(h, dict) and isinstance(h.get("name"), str)]


def _script(inputs: dict[str, Any]) -> dict[str, str]:
    create = plain(inputs.get("create"))
    return scripts.headers(scripts.unwrap(create)) if isinstance(create, str) else {}


def locate(type_: str, provider: str | None, inputs: dict[str, Any], names: set[str]) -> tuple[str, str | None]:
    """(the host a resource is about, the host it runs on when that differs), from its type,
    provider and inputs (a recorded resource or its view in plan.json)."""
    if type_ == "command:remote:Command":
        head = _script(inputs)
        runs_on = head.get("host", CLUSTER)
        about = head.get("runs-for", runs_on)
        return (about, runs_on if runs_on != about else None)
    if provider and provider.startswith("urn:") and "pulumi:providers:docker::" in provider:
        host = provider.rsplit("::", 1)[1].removesuffix("-docker")
        if host in names:
            return host, None
    if type_.startswith("kubernetes:"):
        spec = plain(inputs.get("spec")) or {}
        selector = ((spec.get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
        if selector.get(HOSTNAME_LABEL) in names:
            return selector[HOSTNAME_LABEL], None
        meta = plain(inputs.get("metadata")) or {}
        if type_.endswith("NodePatch") and meta.get("name") in names:
            return meta["name"], None
    return CLUSTER, None


def placement(r: Record, names: set[str]) -> tuple[str, str | None]:
    return locate(r.type, r.provider, r.inputs, names)


def gpu_use(r: Record) -> tuple[str, list[str]] | None:
    """A Deployment's model server and the GPU indices it is pinned to (NVIDIA_VISIBLE_DEVICES)."""
    if r.type != "kubernetes:apps/v1:Deployment":
        return None
    spec = ((plain(r.inputs.get("spec")) or {}).get("template") or {}).get("spec") or {}
    for c in spec.get("containers") or []:
        for e in c.get("env") or []:
            if e.get("name") == "NVIDIA_VISIBLE_DEVICES" and isinstance(e.get("value"), str):
                return r.name, e["value"].split(",")
    return None


def _describe(r: Record, runs_on: str | None) -> str:
    short = r.type.split(":")[-1]
    extra = ""
    if r.type == "docker:index/container:Container":
        image = plain(r.inputs.get("image"))
        nets = plain(r.inputs.get("networksAdvanced")) or []
        addrs = ", ".join(n.get("ipv4Address", "") for n in nets if isinstance(n, dict))
        extra = f"  {plain(r.inputs.get('name'))} from {image}" + (f" at {addrs}" if addrs else "")
    elif r.type == "docker:index/image:Image":
        build = plain(r.inputs.get("build")) or {}
        extra = f"  builds {build.get('dockerfile')} ({build.get('platform')})"
    elif (held := _script(r.inputs).get("stateful")) is not None:
        extra = f"  holds {held}"
    if runs_on:
        extra += f"  (runs on {runs_on})"
    flags = [k for k in ("protect", "retainOnDelete") if r.options.get(k)]
    if flags:
        extra += f"  [{', '.join(flags)}]"
    return f"{r.name}  {short}{extra}"


def ordered(resources: list[Record]) -> list[Record]:
    """Dependency order (depth of the longest chain of dependencies), then name."""
    by_urn = {r.urn: r for r in resources}

    @cache
    def depth(urn: str) -> int:
        deps = [d for d in by_urn[urn].dependencies if d in by_urn and d != urn]
        return 1 + max((depth(d) for d in deps), default=0)

    return sorted(resources, key=lambda r: (depth(r.urn), r.name))


def render(result: PlanRun) -> str:
    """The per-machine section of ``make plan``."""
    hosts = stack_hosts(result)
    names = {h["name"] for h in hosts}
    custom = [r for r in result.resources if r.custom and not r.type.startswith("pulumi:providers:")]
    per: dict[str, list[tuple[Record, str | None]]] = {}
    for r in ordered(custom):
        about, runs_on = placement(r, names)
        per.setdefault(about, []).append((r, runs_on))
    lines = ["Per machine (in the order it happens):"]
    for h in hosts:
        name = h["name"]
        roles = ", ".join(h.get("roles") or [])
        lines += ["", f"{name}  {h.get('address', '?')}  [{roles}]  profile {h.get('profile', '?')}"]
        items = per.get(name, [])
        for i, (r, runs_on) in enumerate(items, 1):
            lines.append(f"  {i:3d}. {_describe(r, runs_on)}")
        gpus: dict[str, list[str]] = {}
        for r, _ in items:
            if (use := gpu_use(r)) is not None:
                for g in use[1]:
                    gpus.setdefault(g, []).append(use[0])
        for g, models in sorted(gpus.items()):
            lines.append(f"       GPU {g}: {', '.join(m.removeprefix(f'{name}-inference-') for m in models)}")
        if "gpu-worker" in (h.get("roles") or []):
            lines.append("       GPUs " + ("not listed above" if gpus else "all") + ": Slurm (gres/gpu)")
        if not items:
            lines.append("       nothing")
    rest = per.get(CLUSTER, [])
    if rest:
        lines += ["", f"{CLUSTER}  the k3s API and generated secrets"]
        lines += [f"  {i:3d}. {_describe(r, runs_on)}" for i, (r, runs_on) in enumerate(rest, 1)]
    return "\n".join(lines)
