"""Slurm renderers: exact text for the prod stack, and the rules behind each line."""

from pathlib import Path

import pytest
import yaml

from components.slurm import render
from offline import plan
from stacks import config as cfgmod
from stacks import slurm_spec

GOLDEN = Path(__file__).with_name("golden")


def spec_of(stack: str) -> render.ClusterSpec:
    raw = yaml.safe_load((plan.ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    data = {k.split(":", 1)[1]: v for k, v in raw.items() if k.split(":", 1)[1] not in cfgmod.SECRET_KEYS}
    return slurm_spec.cluster_spec(cfgmod.parse(data))


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_slurm_gres_cgroup_conf_exact(stack):
    spec = spec_of(stack)
    assert render.slurm_conf(spec) == (GOLDEN / f"{stack}-slurm.conf").read_text()
    assert render.gres_conf(spec.nodes) == (GOLDEN / f"{stack}-gres.conf").read_text()
    assert render.cgroup_conf(spec.cgroup) == (GOLDEN / f"{stack}-cgroup.conf").read_text()


def test_slurmdbd_conf_exact():
    assert render.slurmdbd_conf("head01") == (GOLDEN / "slurmdbd.conf").read_text()


def test_prod_node_lines_come_from_ml_prod_v4():
    text = render.slurm_conf(spec_of("prod"))
    assert (
        text.count(
            "CPUs=256 Boards=1 SocketsPerBoard=2 CoresPerSocket=64 ThreadsPerCore=2 RealMemory=2033213 Gres=gpu:h100:8"
        )
        == 8
    )
    assert "SlurmctldParameters=enable_configless\n" in text
    assert "SelectType=select/cons_tres\n" in text and "GresTypes=gpu\n" in text
    assert "TaskPlugin=task/cgroup,task/affinity\n" in text  # cgroup enforcement on in prod
    assert "PartitionName=gpu Nodes=gpu01,gpu02,gpu03,gpu04,gpu05,gpu06,gpu07,gpu08 Default=YES" in text
    assert "PartitionName=debug Nodes=gpu01 Default=NO MaxTime=1:00:00 State=UP" in text
    assert "AccountingStorageType=accounting_storage/slurmdbd\n" in text


def test_dev_lab_runs_without_cgroup_enforcement():
    text = render.slurm_conf(spec_of("dev"))
    assert "ProctrackType=proctrack/linuxproc\n" in text
    # the notes' Pis run jobs as CPU-only nodes; the A100 box serves models only (one owner per GPU)
    assert "NodeName=rpi2 NodeAddr=192.168.0.203 CPUs=4 " in text and "Gres=" not in text.split("NodeName=rpi2")[1]
    assert "NodeName=gpu1" not in text and "PartitionName=cpu Nodes=rpi2,rpi3 Default=YES" in text
    assert render.cgroup_conf(False).count("=no") == 4


@pytest.mark.parametrize("enforce", [True, False])
def test_cgroup_conf_constrains_devices_when_enforced(enforce):
    text = render.cgroup_conf(enforce)
    assert ("ConstrainDevices=yes" in text) is enforce


def test_slurmdbd_conf_never_holds_the_password():
    text = render.slurmdbd_conf("head01")
    assert f"StoragePass={render.DB_PASSWORD_PLACEHOLDER}\n" in text
    assert "DbdHost=head01\n" in text


def test_def_mem_per_cpu_is_the_smallest_nodes_share():
    assert spec_of("prod").def_mem_per_cpu == 2033213 // 256


def test_slurm_gets_only_the_gpus_it_owns():
    node = render.NodeSpec("g", "10.0.0.9", 2, 8, 2, 1000, "a100", (0, 2, 3))
    assert "Gres=gpu:a100:3 " in node.line
    assert render.gres_conf((node,)).splitlines()[-1] == "NodeName=g Name=gpu Type=a100 File=/dev/nvidia[0,2-3]"
    assert render.device_range((5,)) == "/dev/nvidia5" and render.device_range((0, 1, 2, 3)) == "/dev/nvidia[0-3]"
