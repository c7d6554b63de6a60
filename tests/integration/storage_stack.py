"""The storage part of a test stack whose hosts are a lab's namespaces, and its planned steps."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from offline import plan
from tests.integration import hostkeys
from tests.integration import lab as labmod
from tests.integration.steps import Step, steps

NET = "10.77.0"
STORAGE_COMPONENTS = (
    "hpc:storage:StorageNode",
    "hpc:storage:GlusterVolume",
    "hpc:storage:NfsGateway",
    "hpc:storage:ClientMount",
)
TOOLS = (
    "glusterd",
    "gluster",
    "ganesha.nfsd",
    "/usr/sbin/sshd",
    "nfs-cp",
    "nfs-cat",
    "nfs-ls",
    "ip",
    "nsenter",
)


def stack(hosts: list[str] | None = None, ssh_user: str = "root", **storage):
    """A stack whose storage hosts are the lab's namespaces (replaces every key of dev)."""
    order = hosts or ["gl1", "gl2", "gl3"]
    entries = [
        {
            "name": f"gl{i}",
            "address": f"{NET}.{11 + i - 1}",
            "sshUser": ssh_user,
            "hostKey": hostkeys.public(f"gl{i}"),
            "profile": "rpi4-8g",
            "roles": ["storage", "slurm-head"] if i == 1 else ["storage"],
        }
        | ({"containerAddress": f"{NET}.241"} if i == 1 else {})
        for i in (1, 2, 3)
    ]
    by_name = {h["name"]: h for h in entries}
    return {
        "hpc:environment": "dev",
        "hpc:network": {
            "subnet": f"{NET}.0/24",
            "gateway": f"{NET}.1",
            "parentInterface": "eth0",
            "containerRange": f"{NET}.240/28",
        },
        "hpc:hosts": [by_name[n] for n in order],
        "hpc:storage": {
            "volume": "gv0",
            "brickPath": "/srv/bricks/gv0/brick",
            "replica": 3,
            "mountPoint": "/srv/gfsv",
            "allowedClients": [f"{NET}.0/25"],
            "nfsGrace": False,
        }
        | storage,
        "hpc:slurm": {"clusterName": "itest"},
        "hpc:k3s": {"version": "v1.31.4+k3s1"},
        "hpc:inference": {"models": []},
        "hpc:hfToken": None,
    }


def storage_steps(hosts: list[str] | None = None, ssh_user: str = "root", **storage) -> dict[str, Step]:
    """The plan's storage steps by name, in dependency order (``hosts``: the stack file's order)."""
    return {s.name: s for s in steps(plan.run("dev", stack(hosts, ssh_user, **storage)), STORAGE_COMPONENTS)}




def storage_lab(clients: dict[str, str]) -> Iterator[labmod.Lab]:
    """Body of a module fixture: gl1..gl3 and ``clients`` up, torn down after (or skipped)."""
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")
    if missing := labmod.missing_tools(*TOOLS):
        pytest.skip(f"missing tools: {missing}")
    lab = labmod.Lab(["gl1", "gl2", "gl3"], net=NET, clients=clients)
    try:
        yield lab.up()
    finally:
        lab.down()
