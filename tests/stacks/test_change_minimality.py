"""Change minimality on the 64-worker prod-shaped stack: the exact resources each change touches."""

import copy

import pytest

from benchmarks.stack import prod_shaped, worker_name
from offline import plan

WORKERS = 64


@pytest.fixture(scope="module")
def base():
    return plan.run("prod", prod_shaped(WORKERS))


def delta(base, overrides):
    """(added, removed, changed) resource names between the base plan and one with ``overrides``."""
    other = plan.run("prod", overrides)
    b = {r.urn: r for r in base.resources}
    o = {r.urn: r for r in other.resources}
    changed = {o[u].name for u in b.keys() & o.keys() if o[u].inputs != b[u].inputs or o[u].options != b[u].options}
    return {o[u].name for u in o.keys() - b.keys()}, {b[u].name for u in b.keys() - o.keys()}, changed


def test_adding_one_worker(base):
    added, removed, changed = delta(base, prod_shaped(WORKERS + 1))
    new = worker_name(WORKERS)
    assert added == {
        new,
        f"{new}-container",
        f"{new}-drain",
        f"{new}-gpu-preflight",
        f"{new}-health-check",
        f"{new}-job-checks",
        f"{new}-gpu-prolog",
        f"{new}-gpu-epilog",
        f"{new}-munge-key-file",
        f"{new}-preflight",
        f"{new}-preflight-check",
        f"{new}-image",
        f"{new}-macvlan",
        f"{new}-resume",
        f"{new}-sysctl",
        f"{new}-docker",
        f"{new}-mount",
        f"{new}-mount-fstab",
        f"{new}-exporters",
        f"{new}-accounts",  # the stack's users on the new host (no shell, no SSH)
    }
    assert removed == set()
    # the head's config, Gluster's auth.allow (it lists every host), Prometheus's targets and the
    # smoke test (it runs again once the new node is in service); no sibling, no image
    assert changed == {
        "head01-slurm-conf",
        "head01-gres-conf",
        "gv0-options",
        "head01-prometheus",
        "head01-slurm-smoke-test",
    }


def test_changing_one_workers_profile(base):
    overrides = prod_shaped(WORKERS)
    host = next(h for h in overrides["hpc:hosts"] if h["name"] == worker_name(5))
    host["profile"] = "ml-density-v2"  # 1 TB instead of 2 TB, H100 PCIe instead of SXM5
    added, removed, changed = delta(base, overrides)
    assert (added, removed) == (set(), set())
    # The node's container too (its /dev/shm is half the RAM), drained first and resumed after.
    node = worker_name(5)
    replaced = {f"{node}-container", f"{node}-drain", f"{node}-resume"}
    assert changed == {"head01-slurm-conf", f"{node}-sysctl", f"{node}-health-check", *replaced}


def test_changing_one_models_flags(base):
    overrides = prod_shaped(WORKERS)
    overrides["hpc:inference"] = copy.deepcopy(
        plan.yaml.safe_load((plan.ROOT / "Pulumi.prod.yaml").read_text())["config"]["hpc:inference"]
    )
    overrides["hpc:inference"]["models"][1]["maxModelLen"] = 4096  # llama3-8b on inf01
    added, removed, changed = delta(base, overrides)
    assert (added, removed, changed) == (set(), set(), {"inf01-inference-llama3-8b"})


def test_changing_a_storage_option(base):
    overrides = prod_shaped(WORKERS)
    overrides["hpc:storage"]["options"] = {"performance.cache-size": "256MB"}
    added, removed, changed = delta(base, overrides)
    assert (added, removed, changed) == (set(), set(), {"gv0-options"})
