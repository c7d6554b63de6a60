"""Prod-shaped stacks with N GPU workers, as config overrides on Pulumi.prod.yaml."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from offline.plan import ROOT

WORKER_PROFILE = "ml-prod-v4"


def worker_name(i: int) -> str:
    return f"gpu{i:04d}"


def prod_shaped(workers: int) -> dict[str, Any]:
    """Three storage nodes, a head, ``workers`` ML-PROD-V4 workers and the prod inference hosts,
    on a /16 (hosts in 10.40.0-127.x, containers in 10.40.128-255.x)."""
    base = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())["config"]
    keep = [h for h in base["hpc:hosts"] if not h["name"].startswith("gpu")]
    for n, h in enumerate(keep):
        h.pop("rack", None)
        if "containerAddress" in h:  # the head, the login node
            h["containerAddress"] = f"10.40.128.{2 + n}"
    hosts = keep + [
        {
            "name": worker_name(i),
            "address": f"10.40.{1 + i // 250}.{i % 250 + 1}",
            "sshUser": "root",
            "profile": WORKER_PROFILE,
            "roles": ["gpu-worker"],
            "containerAddress": f"10.40.{129 + i // 250}.{i % 250 + 1}",
        }
        for i in range(workers)
    ]
    storage = copy.deepcopy(base["hpc:storage"])
    storage["allowedClients"] = ["10.40.0.0/17"]  # the hosts; never the container range
    return {
        "hpc:network": {
            "subnet": "10.40.0.0/16",
            "gateway": "10.40.0.1",
            "parentInterface": "bond0",
            "containerRange": "10.40.128.0/17",
        },
        "hpc:hosts": hosts,
        "hpc:storage": storage,
        "hpc:slurm": {
            "clusterName": "prod",
            "registry": base["hpc:slurm"]["registry"],
            "partitions": [{"name": "gpu", "default": True, "maxTime": "7-00:00:00"}],
        },
        "hpc:racks": None,
    }
