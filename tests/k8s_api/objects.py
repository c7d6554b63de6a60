"""What the real-API tests apply: the plan's recorded objects, and what k3s itself would add.

* ``recorded``: every Kubernetes object a plan records (``offline.plan.k8s_manifest``: no copies),
  in the engine's order: after everything it depends on (``dependsOn`` and the resources its
  inputs came from; a component stands for all its resources). Objects without an edge between
  them may be created in any order by ``pulumi up``: a missing edge shows up here as a refusal.
  ``NodePatch`` records are marked as patches.
* ``k3s_nodes``: the Node each k3s host registers (name, k3s's labels, capacity from the stack's
  hardware profile), as kwok fake nodes.
* ``k3s_disables``: the server config's ``disable:`` list (k3s then does not install that add-on,
  e.g. Traefik and its CRDs).
* ``provisioned_volume``: the PersistentVolume the NFS CSI driver's provisioner would create for
  a claim (the driver's Helm chart cannot be installed here: no chart repository).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from graphlib import TopologicalSorter
from typing import TYPE_CHECKING, Any

import yaml

from components import scripts
from components.inference.capacity import KUBELET_EVICTION_MIB
from offline import plan
from offline.mocks import plain
from offline.plan import PlanRun, Record, k8s_manifest
from offline.stack_file import read as read_stack
from stacks.config import ClusterConfig
from stacks.config_base import Role

if TYPE_CHECKING:
    from tests.k8s_api.cluster import Api

from .cluster import FAKE_NODE_ANNOTATION

NFS_CSI_DRIVER = "nfs.csi.k8s.io"
KUBE_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


@dataclass(frozen=True)
class Recorded:
    """One recorded object: its manifest, whether the program patches (not owns) it, its resource name."""

    manifest: dict[str, Any]
    patch: bool
    resource: str

    @property
    def key(self) -> tuple[str, str, str]:
        meta = self.manifest["metadata"]
        return (self.manifest["kind"], meta.get("namespace", ""), meta["name"])


def dependency_order(result: PlanRun) -> list[Record]:
    """Every resource after the resources it depends on, as the engine creates them."""
    children: dict[str, list[str]] = {}
    for r in result.resources:
        if r.parent:
            children.setdefault(r.parent, []).append(r.urn)
    by_urn = {r.urn: r for r in result.resources}

    def expand(urn: str) -> set[str]:
        r = by_urn.get(urn)
        if r is None:
            return set()
        if r.custom:
            return {urn}
        return set().union(*(expand(c) for c in children.get(urn, [])))

    graph = {}
    for r in result.resources:
        direct = set(r.dependencies).union(*r.property_dependencies.values())
        graph[r.urn] = set().union(*(expand(d) for d in direct)) if direct else set()
    return [by_urn[u] for u in TopologicalSorter(graph).static_order() if u in by_urn]


def recorded(result: PlanRun, reveal: bool = False) -> list[Recorded]:
    """The plan's Kubernetes objects in dependency order; secret values masked, as the plan shows
    them, unless ``reveal`` (the plan's stand-ins in clear: a test that reads them back)."""
    out = []
    for r in dependency_order(result):
        if r.custom and r.type.startswith("kubernetes:") and not r.type.startswith("kubernetes:helm"):
            manifest = k8s_manifest(r)
            if reveal and manifest["kind"] == "Secret":
                for key in ("stringData", "data"):
                    if key in r.inputs:
                        manifest[key] = plain(r.inputs[key])
            out.append(Recorded(manifest, r.type.endswith("Patch"), r.name))
    return out


def helm_releases(result: PlanRun) -> list[dict[str, Any]]:
    return [plain(r.inputs) for r in result.of_type("kubernetes:helm.sh/v3:Release")]


def k3s_nodes(cfg: ClusterConfig, memory_mib: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """The Nodes k3s registers for the stack's k3s hosts, capacity from their hardware profiles
    (``memory_mib`` overrides a host's: a machine that differs from its profile)."""
    nodes = []
    server = {h.name for h in cfg.with_role(Role.K3S_SERVER)}
    for h in cfg.hosts:
        if not (h.has(Role.K3S_SERVER) or h.has(Role.K3S_AGENT)):
            continue
        hw = h.hardware
        arch = KUBE_ARCH[hw.arch]
        labels = {
            "kubernetes.io/hostname": h.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": arch,
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": arch,
            "node.kubernetes.io/instance-type": "k3s",
        }
        if h.name in server:
            labels |= {"node-role.kubernetes.io/control-plane": "true", "node-role.kubernetes.io/master": "true"}
        memory = (memory_mib or {}).get(h.name, hw.memory_mib)
        capacity = {"cpu": str(hw.cpus), "memory": f"{memory}Mi", "pods": "110", "ephemeral-storage": "500Gi"}
        # the kubelet keeps its default hard-eviction threshold back (memory.available<100Mi)
        allocatable = capacity | {"memory": f"{memory - KUBELET_EVICTION_MIB}Mi"}
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": h.name, "labels": labels, "annotations": dict([FAKE_NODE_ANNOTATION])},
                "status": {"capacity": capacity, "allocatable": allocatable},
            }
        )
    return nodes


def k3s_disables(cfg: ClusterConfig, result: PlanRun) -> list[str]:
    """The ``disable:`` list of the config.yaml the server's install step writes."""
    server = cfg.with_role(Role.K3S_SERVER)[0].name
    create = scripts.unwrap(plain(result.by_name(f"{server}-k3s").inputs["create"]))
    m = re.search(r"<<'K3S_CONFIG'\n(.*?)\nK3S_CONFIG\n", create, re.S)
    assert m, f"{server}-k3s writes no config.yaml"
    disabled: list[str] = (yaml.safe_load(m.group(1)) or {}).get("disable", [])
    return disabled


def provisioned_volume(claim: dict[str, Any], storage_class: dict[str, Any]) -> dict[str, Any]:
    """The PV csi-driver-nfs's provisioner creates for ``claim``: a ``pvc-<uid>`` subdirectory of
    the class's share, the class's reclaim policy and mount options, bound to the claim."""
    meta, spec = claim["metadata"], claim["spec"]
    params = storage_class["parameters"]
    name = f"pvc-{meta['uid']}"
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": NFS_CSI_DRIVER}},
        "spec": {
            "capacity": {"storage": spec["resources"]["requests"]["storage"]},
            "accessModes": spec["accessModes"],
            "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy", "Delete"),
            "storageClassName": storage_class["metadata"]["name"],
            "mountOptions": storage_class.get("mountOptions", []),
            "csi": {
                "driver": NFS_CSI_DRIVER,
                "volumeHandle": f"{params['server']}#{params['share'].lstrip('/')}#{name}##",
                "volumeAttributes": {**params, "subdir": name},
            },
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
        },
    }


def fields_changed(sent: Any, got: Any, path: str = "") -> list[str]:
    """Paths where the server's object differs from what was sent (fields the server only adds
    are defaults, not changes; an empty list or map sent comes back omitted, which means the same)."""
    if isinstance(sent, dict) and isinstance(got, dict):
        out = []
        for k, v in sent.items():
            if k not in got and v in ({}, [], None):
                continue
            if k not in got:
                out.append(f"{path}.{k} dropped")
            else:
                out += fields_changed(v, got[k], f"{path}.{k}")
        return out
    if isinstance(sent, list) and isinstance(got, list):
        if len(sent) != len(got):
            return [f"{path}: {len(sent)} items sent, {len(got)} back"]
        return [p for i, (a, b) in enumerate(zip(sent, got, strict=True)) for p in fields_changed(a, b, f"{path}[{i}]")]
    return [] if sent == got else [f"{path}: sent {sent!r}, got {got!r}"]


def pod_requests(pod: dict[str, Any], resource: str) -> int:
    """A pod's request of ``resource`` in bytes (memory) as the scheduler sums it."""
    units = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4}
    total = 0
    for c in pod["spec"]["containers"]:
        q = c.get("resources", {}).get("requests", {}).get(resource, "0")
        total += int(q[:-2]) * units[q[-2:]] if q[-2:] in units else int(q)
    return total


def set_allocatable_memory(api: Api, node: str, mib: int) -> None:
    patch = {"status": {"allocatable": {"memory": f"{mib}Mi"}}}
    api.request("PATCH", f"/api/v1/nodes/{node}/status", patch, "application/merge-patch+json")


def without_model(stack: str, name: str) -> dict[str, Any]:
    raw = read_stack(plan.ROOT, stack)["config"]["hpc:inference"]
    return {"hpc:inference": {**raw, "models": [m for m in raw["models"] if m["name"] != name]}}
