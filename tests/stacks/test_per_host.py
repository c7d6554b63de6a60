"""`make plan` read per machine: each host's steps in the order they happen, the steps that run
elsewhere for it, its containers, and which model sits on which GPU."""

import re

import pytest

from offline import per_host, plan


@pytest.fixture(scope="module")
def dev():
    return per_host.render(plan.run("dev"))


def section(text: str, host: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{host}  "))
    out = []
    for line in lines[start + 1 :]:
        if not line.startswith(" "):
            break
        out.append(line.strip())
    return out


def position(lines: list[str], name: str) -> int:
    return next(i for i, line in enumerate(lines) if re.match(rf"\d+\. {re.escape(name)}  ", line))


def test_a_worker_lists_its_drain_before_and_resume_after_its_container(dev):
    rpi2 = section(dev, "rpi2")
    assert "rpi2-drain  Command  (runs on rpi1)" in " ".join(rpi2)
    assert position(rpi2, "rpi2-preflight-check") < position(rpi2, "rpi2-drain")
    assert position(rpi2, "rpi2-drain") < position(rpi2, "rpi2-container") < position(rpi2, "rpi2-resume")
    assert any("rpi2-container  Container  slurm-worker from hpc-cluster/slurm-worker:" in line for line in rpi2)


def test_every_step_of_a_host_comes_after_its_dependencies():
    result = plan.run("dev")
    by_urn = {r.urn: r for r in result.resources}
    ordered = per_host.ordered([r for r in result.resources if r.custom])
    seen: set[str] = set()
    for r in ordered:
        assert all(d in seen for d in r.dependencies if d in by_urn and by_urn[d].custom), r.name
        seen.add(r.urn)


def test_the_inference_host_shows_which_model_sits_on_which_gpu(dev):
    gpu1 = section(dev, "gpu1")
    assert "GPU 0: gemma-7b, llama3-8b" in gpu1
    assert "GPU 1: decilm-7b, phi3-mini-128k, stablelm-1-6b" in gpu1


def test_stateful_steps_say_what_they_hold(dev):
    assert "rpi1-brick  Command  holds gluster-brick  [protect, retainOnDelete]" in " ".join(section(dev, "rpi1"))


def test_prod_gpu_workers_say_their_gpus_go_to_slurm():
    text = per_host.render(plan.run("prod"))
    workers = [h["name"] for h in per_host.stack_hosts(plan.run("prod")) if "gpu-worker" in h["roles"]]
    assert workers
    for name in workers:
        assert any(line.startswith("GPUs") and "Slurm (gres/gpu)" in line for line in section(text, name)), name


def test_cluster_wide_objects_are_listed_once_after_the_hosts(dev):
    assert dev.count("(cluster-wide)") == 1
    assert dev.index("(cluster-wide)") > dev.index("gpu1  ")
