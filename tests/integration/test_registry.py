"""Images built once and pulled by digest, through a real registry (Debian's docker-registry).

A stack with ``hpc:slurm.registry`` records one ``docker.Image`` per Slurm role, both on the
head's Docker provider, and on every worker a ``docker.RemoteImage`` named by the worker image's
digest. Here the head's dockerd holds the image built from that record and pushes it to a
registry in the lab (what the provider's push does); the worker's dockerd pulls it by the digest
the push returned (the engine fills the worker's ``name`` from the Image's ``repoDigest``
output) and runs it.
"""

from __future__ import annotations

import re
import subprocess
from typing import Any

import pytest

from offline import plan
from offline.mocks import plain
from tests.integration import docker_lab, hostkeys
from tests.integration import lab as labmod

pytestmark = pytest.mark.integration

NET = "10.84.0"
REGISTRY = f"{NET}.2:5000"
TOOLS = ("dockerd", "debootstrap", "docker-registry", "nsenter")
REGISTRY_CONFIG = """\
version: 0.1
storage:
  filesystem:
    rootdirectory: {root}
http:
  addr: {addr}
"""


def stack() -> dict[str, Any]:
    def host(name: str, i: int, roles: list[str]) -> dict[str, Any]:
        return {"name": name, "address": f"{NET}.{11 + i}", "sshUser": "root", "hostKey": hostkeys.public(name),
                "profile": "a100x2-80g" if "gpu-worker" in roles else "epyc-7502p-256g", "roles": roles,
                "containerAddress": f"{NET}.{41 + i}"}  # fmt: skip

    return {
        "hpc:environment": "dev",
        "hpc:network": labmod.stack_network(NET),
        "hpc:hosts": [
            host("head", 0, ["storage", "slurm-head"]),
            host("w1", 1, ["storage", "gpu-worker"]),
            host("w2", 2, ["gpu-worker"]),
        ],
        "hpc:storage": {"replica": 2, "mountPoint": "/srv/gfsv"},
        "hpc:slurm": {"clusterName": "itest", "registry": f"{REGISTRY}/hpc"},
        "hpc:k3s": {"version": "v1.31.4+k3s1"},
        "hpc:inference": {"models": []},
        "hpc:racks": None,
        "hpc:hfToken": None,
    }


@pytest.fixture(scope="module")
def records() -> dict[str, plan.Record]:
    return {r.name: r for r in plan.run("dev", stack()).resources}


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    labmod.require(*TOOLS)
    builder = docker_lab.Builder(tmp_path_factory.mktemp("registry-builder"))
    lab = labmod.Lab(["head", "w1"], net=NET)
    daemons: dict[str, docker_lab.Dockerd] = {}
    registry = None
    try:
        lab.up()
        config = lab.dir / "registry.yml"
        config.write_text(REGISTRY_CONFIG.format(root=lab.dir / "registry", addr=REGISTRY))
        serve = ["ip", "netns", "exec", f"{lab.prefix}-cl", "docker-registry", "serve", str(config)]
        registry = subprocess.Popen(serve, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for name in ("head", "w1"):
            daemons[name] = docker_lab.Dockerd(lab.dir / name / "docker", holder=lab.hosts[name].holder,
                                               extra=[f"--insecure-registry={REGISTRY}"]).start()  # fmt: skip
        yield lab, builder, daemons
    finally:
        for d in daemons.values():
            d.stop()
        if registry is not None:
            registry.terminate()
            registry.wait(10)
        lab.down()
        builder.stop()


def test_one_build_per_role_on_the_head_and_every_worker_pulls_by_digest(records):
    images = {n: r for n, r in records.items() if r.type == "docker:index/image:Image"}
    assert sorted(images) == ["head-image", "head-worker-image"]  # built once, whatever the worker count
    for r in images.values():
        assert plain(r.inputs)["skipPush"] is False
        assert "head-docker" in str(r.provider)  # built on the head host
    worker_repo = plain(images["head-worker-image"].inputs)["imageName"].rsplit(":", 1)[0]
    for w in ("w1", "w2"):
        pulled = plain(records[f"{w}-image"].inputs)["name"]
        assert records[f"{w}-image"].type == "docker:index/remoteImage:RemoteImage"
        assert re.fullmatch(re.escape(worker_repo) + r"@sha256:[0-9a-f]{64}", pulled), pulled
        assert plain(records[f"{w}-container"].inputs)["image"] == pulled


def test_the_pushed_image_runs_on_a_worker_that_never_built_it(hosts, records):
    _, builder, daemons = hosts
    image = records["head-worker-image"]
    tag = plain(image.inputs)["imageName"]
    head = daemons["head"]
    head.load_as(builder.image(image), tag)
    repo, version = tag.rsplit(":", 1)
    pushed = [c for c in head.api.push(repo, tag=version, stream=True, decode=True)]
    errors = [c["error"] for c in pushed if "error" in c]
    assert not errors, errors
    digest = next(c["aux"]["Digest"] for c in pushed if "aux" in c and "Digest" in c["aux"])
    ref = f"{repo}@{digest}"  # what the engine puts into the workers' RemoteImage and container
    w1 = daemons["w1"]
    assert not w1.api.images(name=repo)  # nothing built or loaded on the worker
    w1.api.pull(ref)
    assert w1.api.inspect_image(ref)["Id"] == head.api.inspect_image(tag)["Id"]  # the same bytes
    created = w1.api.create_container(ref, entrypoint=["slurmd", "-V"], host_config=w1.api.create_host_config(
        network_mode="none"))  # fmt: skip
    w1.api.start(created["Id"])
    assert w1.api.wait(created["Id"], timeout=60)["StatusCode"] == 0
    assert w1.api.logs(created["Id"]).decode().startswith("slurm-wlm 24.11.")
