"""Slurm components in the whole program under the mock engine: secrets and wiring."""

from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from components.slurm import smoke
from offline import plan
from stacks import config


@pytest.fixture(scope="module")
def dev():
    return plan.run("dev")


def test_munge_key_and_db_password_are_generated_and_secret_end_to_end(dev):
    key = dev.by_name("rpi1-munge-key")
    assert key.type == "random:index/randomBytes:RandomBytes"
    pw = dev.by_name("rpi1-db-password")
    assert pw.type == "random:index/randomPassword:RandomPassword"
    for step in ("rpi1-munge-key-file", "rpi1-slurm-secrets"):
        r = dev.by_name(step)
        assert "stdin" in r.secret_inputs(), step
        assert r.inputs["logging"] == "none"
        assert key.urn in r.dependencies or pw.urn in r.dependencies
    doc = plan.plan_document(dev)
    text = str(doc)
    for value in dev.secret_values:
        assert value not in text


def test_worker_is_drained_before_and_resumed_after_its_container(dev):
    ctr = dev.by_name("rpi2-container")
    drain, resume = dev.by_name("rpi2-drain"), dev.by_name("rpi2-resume")
    assert drain.urn in ctr.dependencies
    assert ctr.urn in resume.dependencies
    assert drain.inputs["triggers"] == resume.inputs["triggers"]
    assert plan.plain(drain.inputs["connection"])["host"] == "192.168.0.106"  # runs on the head host


def test_worker_depends_on_its_host_only_not_on_siblings():
    prod = plan.run("prod")
    gpu01 = {r.urn for r in prod.resources if r.name.startswith("gpu01")}
    for r in prod.resources:
        if r.name.startswith("gpu02"):
            assert not (set(r.dependencies) & gpu01), r.name


def test_containers_use_the_host_docker_provider_and_addresses(dev):
    head = dev.by_name("rpi1-container")
    assert head.provider and head.provider.endswith("::rpi1-docker")
    assert plan.plain(head.inputs["networksAdvanced"])[0]["ipv4Address"] == "192.168.0.201"
    worker = dev.by_name("rpi2-container")  # a CPU-only worker (the notes' Pis): no GPU devices
    assert plan.plain(worker.inputs["envs"]) == ["SLURM_CONF_SERVER=192.168.0.201:6817"]
    fuse = {"hostPath": "/dev/fuse", "containerPath": "/dev/fuse", "permissions": "rwm"}  # Apptainer's images
    assert plan.plain(worker.inputs.get("devices") or []) == [fuse]
    assert dev.by_name("rpi2").type == "hpc:compute:CpuWorker"
    assert not [r for r in dev.resources if r.name == "rpi2-gpu-preflight"]


def test_a_gpu_worker_that_also_serves_models_gets_only_slurms_gpus():
    import yaml

    hosts = yaml.safe_load((plan.ROOT / "Pulumi.dev.yaml").read_text())["config"]["hpc:hosts"]
    gpu1 = next(h for h in hosts if h["name"] == "gpu1")
    gpu1 |= {"roles": ["gpu-worker", "inference", "k3s-agent"], "containerAddress": "192.168.0.202",
             "inferenceGpus": [1]}  # fmt: skip
    models = yaml.safe_load((plan.ROOT / "Pulumi.dev.yaml").read_text())["config"]["hpc:inference"]
    models["models"] = models["models"][:2]  # llama3 and gemma on the one GPU inference owns
    for m in models["models"]:
        m["gpuIndex"] = 1
    mixed = plan.run("dev", {"hpc:hosts": hosts, "hpc:inference": models})
    devices = [d["hostPath"] for d in plan.plain(mixed.by_name("gpu1-container").inputs["devices"])]
    assert [d for d in devices if d[-1].isdigit()] == ["/dev/nvidia0"]  # Slurm's GPU only
    conf = plan.plain(mixed.by_name("rpi1-slurm-conf").inputs["stdin"])
    assert "NodeName=gpu1 " in conf and "Gres=gpu:a100:1 " in conf
    gres = plan.plain(mixed.by_name("rpi1-gres-conf").inputs["stdin"])
    assert "NodeName=gpu1 Name=gpu Type=a100 File=/dev/nvidia0" in gres


def test_state_steps_are_protected(dev):
    for name in ("rpi1-slurm-state", "gv0-volume", "rpi1-brick"):
        assert dev.by_name(name).options.get("protect"), name


def test_the_smoke_test_runs_after_every_node_is_back_and_reruns_with_any_slurm_container():
    prod = plan.run("prod")
    smoke = prod.by_name("head01-slurm-smoke-test")
    component = prod.by_name("slurm-smoke-test")
    assert component.type == "hpc:slurm:SmokeTest" and smoke.parent == component.urn
    resumes = [r for r in prod.resources if r.name.endswith("-resume")]
    assert resumes and all(r.urn in smoke.dependencies for r in resumes)
    containers = [r for r in prod.of_type("docker:index/container:Container") if r.name != "login01-container"]
    assert len(plan.plain(smoke.inputs["triggers"])) == len(containers)  # the head's and every worker's
    create = plan.plain(smoke.inputs["create"])
    assert "smoke gpu gpu\nsmoke debug gpu\n" in create  # prod's partitions, both with GPUs: one GPU each
    assert "\nsmoke gpu mpi\n" in create  # and MPI across two nodes of the largest partition
    assert "slurmCheck" in prod.stack_outputs


def test_the_mpi_check_takes_the_largest_partition_with_two_nodes_and_none_without():
    def spec(*partitions: tuple[str, int]) -> Any:
        parts = [SimpleNamespace(name=n, nodes=[f"n{i}" for i in range(k)]) for n, k in partitions]
        return SimpleNamespace(partitions=parts)

    assert smoke.mpi_partition(spec(("debug", 1), ("gpu", 3), ("cpu", 3))) == "gpu"  # the first of the largest
    assert smoke.mpi_partition(spec(("gpu", 1), ("cpu", 1))) is None  # one-node partitions: no MPI job
    assert smoke.mpi_partition(spec()) is None


def test_every_slurmd_container_gets_half_its_ram_as_dev_shm_and_unlimited_memlock():
    prod = plan.run("prod")
    raw = yaml.safe_load((plan.ROOT / "Pulumi.prod.yaml").read_text())["config"]
    cfg = config.parse({k.split(":", 1)[1]: v for k, v in raw.items()})
    for r in prod.of_type("docker:index/container:Container"):
        inputs = plan.plain(r.inputs)
        if inputs["name"] != "slurm-worker":
            assert "shmSize" not in inputs, r.name
            continue
        host = r.name.removesuffix("-container")
        memory = next(h for h in cfg.hosts if h.name == host).hardware.memory_mib
        assert inputs["shmSize"] == memory // 2, r.name
        assert inputs["ulimits"] == [{"name": "memlock", "soft": -1, "hard": -1}], r.name
