"""Slurm components in the whole program under the mock engine: secrets and wiring."""

import pytest

from offline import plan


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
    assert not plan.plain(worker.inputs.get("devices") or [])
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
