"""The recorded k3s objects applied to a real control plane (``Applied``), and what the tests
read back from it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from offline import plan
from offline.stack_file import read as read_stack
from stacks import config as cfgmod
from tests.integration.lab import wait_until

from . import objects
from .cluster import K8S, Api, ApiError, ControlPlane

NS = "inference"
# What k3s's Traefik chart installs: the default class, which Traefik serves.
INGRESS_CLASS = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "IngressClass",
    "metadata": {"name": "traefik", "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"}},
    "spec": {"controller": "traefik.io/ingress-controller"},
}


@dataclass
class Applied:
    stack: str
    cp: ControlPlane
    result: plan.PlanRun
    cfg: cfgmod.ClusterConfig
    records: list[objects.Recorded]
    back: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    refused: dict[tuple[str, str, str], str] = field(default_factory=dict)

    @property
    def api(self) -> Api:
        return self.cp.api

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [r.manifest for r in self.records if r.manifest["kind"] == kind]


def stack_config(stack: str) -> cfgmod.ClusterConfig:
    raw = read_stack(plan.ROOT, stack).get("config", {})
    return cfgmod.parse({k.removeprefix("hpc:"): v for k, v in raw.items() if k.startswith("hpc:")})


def install_k3s_addons(api: Api, disabled: list[str]) -> None:
    """What k3s installs itself: Traefik's CRDs and its IngressClass (unless the server config
    disables Traefik)."""
    if "traefik" in disabled:
        return
    api.apply(INGRESS_CLASS, manager="k3s")
    crds = [c for c in yaml.safe_load_all((K8S / "extras" / "traefik-crds.yaml").read_text()) if c]
    for crd in crds:
        api.apply(crd, manager="k3s")
    for crd in crds:
        name = crd["metadata"]["name"]
        wait_until(
            lambda n=name: any(
                c["type"] == "Established" and c["status"] == "True"
                for c in (api.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", n) or {})
                .get("status", {})
                .get("conditions", [])
            ),
            f"CRD {name} established",
            timeout=90,
        )
    api.forget_discovery()


def apply_plan(a: Applied) -> None:
    """Apply each recorded object in the engine's (dependency) order; a patch needs its object to exist (the
    provider's NodePatch fails otherwise). A claim gets the provisioner's volume."""
    classes = {m["metadata"]["name"]: m for m in a.of_kind("StorageClass")}
    for rec in a.records:
        m = rec.manifest
        try:
            if (
                rec.patch
                and a.api.get(m["apiVersion"], m["kind"], m["metadata"]["name"], m["metadata"].get("namespace")) is None
            ):
                raise ApiError(404, f"{m['kind']} {m['metadata']['name']} does not exist to be patched")
            a.back[rec.key] = a.api.apply(m)
        except ApiError as e:
            a.refused[rec.key] = e.message
            continue
        if m["kind"] == "PersistentVolumeClaim":
            sc = classes[m["spec"]["storageClassName"]]
            if sc["provisioner"] == objects.NFS_CSI_DRIVER:
                a.api.create(objects.provisioned_volume(a.back[rec.key], sc))


@contextlib.contextmanager
def applied_stack(stack: str, result: plan.PlanRun, reveal: bool = False) -> Iterator[Applied]:
    """A fresh control plane with the k3s nodes and add-ons, ``result``'s objects applied and
    every Deployment available (unless the server refused an object); stopped afterwards.
    ``reveal``: the Secrets hold the plan's values, not the plan's masks."""
    cfg = stack_config(stack)
    cp = ControlPlane().start()
    try:
        a = Applied(stack, cp, result, cfg, objects.recorded(result, reveal))
        for node in objects.k3s_nodes(cfg):
            cp.api.create(node)
        install_k3s_addons(cp.api, objects.k3s_disables(cfg, result))
        apply_plan(a)
        for d in a.of_kind("Deployment"):
            if not a.refused:
                wait_until(
                    lambda n=d["metadata"]["name"]: deployment_available(cp.api, n),
                    f"Deployment {d['metadata']['name']} available",
                    timeout=120,
                )
        yield a
    finally:
        cp.stop()


def deployment_available(api: Api, name: str) -> bool:
    d = api.get("apps/v1", "Deployment", name, NS) or {}
    conds = d.get("status", {}).get("conditions", [])
    return any(c["type"] == "Available" and c["status"] == "True" for c in conds)


def pods_of(api: Api, app: str) -> list[dict[str, Any]]:
    return [
        p for p in api.list("v1", "Pod", NS, labelSelector=f"app={app}") if not p["metadata"].get("deletionTimestamp")
    ]


def job_complete(api: Api, name: str) -> bool:
    conds = (api.get("batch/v1", "Job", name, NS) or {}).get("status", {}).get("conditions", [])
    return any(c["type"] == "Complete" and c["status"] == "True" for c in conds)


def secrets_read(pod: dict[str, Any]) -> set[str]:
    """The Secrets a pod reads: env references, envFrom and secret volumes."""
    spec = pod["spec"]
    names = {v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v}
    for c in spec.get("initContainers", []) + spec["containers"]:
        names |= {
            e["valueFrom"]["secretKeyRef"]["name"] for e in c.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})
        }
        names |= {e["secretRef"]["name"] for e in c.get("envFrom", []) if "secretRef" in e}
    return names
