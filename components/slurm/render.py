"""Pure renderers for the Slurm tier: slurm.conf, gres.conf, cgroup.conf, slurmdbd.conf.

Every figure comes from the hardware profiles (CPUs, sockets, cores, threads, RealMemory after the
OS reserve, GPUs) and the stack's Slurm section. Slurm is configless: these files live on the head
only (``SlurmctldParameters=enable_configless``); workers start ``slurmd --conf-server <head>``
and fetch slurm.conf, gres.conf and cgroup.conf from the controller. Paths are those inside the
containers (``images/``); the accounting database password is a placeholder that the head's
secret step substitutes on the host (``DB_PASSWORD_PLACEHOLDER``), never part of the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from components.slurm import render_health
from components.slurm.render_scheduling import Scheduling, conf_lines

DB_PASSWORD_PLACEHOLDER = "@@SLURM_DB_PASSWORD@@"
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
SLURMDBD_PORT = 6819
MARIADB_PORT = 3306
STATE_DIR = "/var/spool/slurmctld"
SPOOL_DIR = "/var/spool/slurmd"
LOG_DIR = "/var/log/slurm"
ACCOUNTING_DB = "slurm_acct_db"
DB_USER = "slurm"


@dataclass(frozen=True)
class NodeSpec:
    """One slurmd node, as Slurm must describe it."""

    name: str
    address: str
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    real_memory_mib: int
    gres_type: str | None  # None: a CPU-only node (no GRES)
    gpu_indexes: tuple[int, ...]  # the GPUs Slurm owns on this node (/dev/nvidia<i>)

    @property
    def gpus(self) -> int:
        return len(self.gpu_indexes) if self.gres_type else 0

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores_per_socket * self.threads_per_core

    @property
    def line(self) -> str:
        return (
            f"NodeName={self.name} NodeAddr={self.address} CPUs={self.cpus} Boards=1 "
            f"SocketsPerBoard={self.sockets} CoresPerSocket={self.cores_per_socket} "
            f"ThreadsPerCore={self.threads_per_core} RealMemory={self.real_memory_mib} "
            + (f"Gres=gpu:{self.gres_type}:{self.gpus} " if self.gpus else "")
            + "State=UNKNOWN"
        )


@dataclass(frozen=True)
class PartitionSpec:
    name: str
    nodes: tuple[str, ...]
    default: bool
    max_time: str
    billing: str = ""  # TRESBillingWeights (render_scheduling.billing)


@dataclass(frozen=True)
class ClusterSpec:
    """Everything slurm.conf says."""

    cluster_name: str
    head_name: str
    head_address: str
    nodes: tuple[NodeSpec, ...]
    partitions: tuple[PartitionSpec, ...]
    cgroup: bool
    scheduling: Scheduling = field(default_factory=Scheduling)
    health: render_health.Health = field(default_factory=render_health.Health)

    @property
    def gres_types(self) -> tuple[str, ...]:
        return tuple(sorted({n.gres_type for n in self.nodes if n.gres_type}))

    @property
    def def_mem_per_cpu(self) -> int:
        """A job that asks for no memory gets its CPUs' share of the smallest node."""
        if not self.nodes:
            return 1024
        return min(n.real_memory_mib // n.cpus for n in self.nodes)


def slurm_conf(spec: ClusterSpec) -> str:
    if spec.cgroup:
        plugins = (
            "ProctrackType=proctrack/cgroup\n"
            "TaskPlugin=task/cgroup,task/affinity\n"
            "JobAcctGatherType=jobacct_gather/cgroup"
        )
    else:
        plugins = "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/affinity\nJobAcctGatherType=jobacct_gather/linux"
    tres = ",".join(["gres/gpu", *(f"gres/gpu:{t}" for t in spec.gres_types)])
    nodes = "\n".join(n.line for n in spec.nodes)
    parts = "\n".join(
        f"PartitionName={p.name} Nodes={','.join(p.nodes)} Default={'YES' if p.default else 'NO'} "
        f"MaxTime={p.max_time} State=UP" + (f" TRESBillingWeights={p.billing}" if p.billing else "")
        for p in spec.partitions
        if p.nodes
    )
    return f"""\
# Managed by hpc-cluster (Pulumi): local edits are overwritten.
# Configless: slurmd on the workers fetches this file from slurmctld.
ClusterName={spec.cluster_name}
SlurmctldHost={spec.head_name}({spec.head_address})
SlurmctldParameters=enable_configless
SlurmctldPort={SLURMCTLD_PORT}
SlurmdPort={SLURMD_PORT}
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation={STATE_DIR}
SlurmdSpoolDir={SPOOL_DIR}
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile={LOG_DIR}/slurmctld.log
SlurmdLogFile={LOG_DIR}/slurmd.log
MailProg=/bin/true
MpiDefault=pmix
# Jobs keep slurmd's locked-memory limit (unlimited, the container's) instead of the submitting
# shell's (a login session's few MB): RDMA and NCCL pin memory.
PropagateResourceLimitsExcept=MEMLOCK
ReturnToService=2
{plugins}
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU={spec.def_mem_per_cpu}
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost={spec.head_name}
AccountingStoragePort={SLURMDBD_PORT}
AccountingStorageTRES={tres}
{render_health.conf_lines(spec.health)}{conf_lines(spec.scheduling)}{nodes}
{parts}
"""


def device_range(indexes: tuple[int, ...]) -> str:
    """/dev/nvidia0, or Slurm's range form: /dev/nvidia[0-3], /dev/nvidia[0,2-3]."""
    if len(indexes) == 1:
        return f"/dev/nvidia{indexes[0]}"
    runs: list[list[int]] = []
    for i in sorted(indexes):
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return "/dev/nvidia[" + ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs) + "]"


def gres_conf(nodes: tuple[NodeSpec, ...]) -> str:
    """gres.conf for every node (served to the workers in configless mode)."""
    lines = [
        "# Managed by hpc-cluster (Pulumi): local edits are overwritten.",
        "# Debian's Slurm has no NVML plugin: GPUs are listed, not detected.",
        "AutoDetect=off",
    ]
    for n in nodes:
        if n.gpus:
            lines.append(f"NodeName={n.name} Name=gpu Type={n.gres_type} File={device_range(n.gpu_indexes)}")
    return "\n".join(lines) + "\n"


def cgroup_conf(enforce: bool) -> str:
    """cgroup.conf for slurmd in its container: the plugin follows the host (cgroup v1 or v2).

    On cgroup v2 slurmd runs in a private cgroup namespace with no systemd to ask: IgnoreSystemd
    makes it create its slurmstepd scope with mkdir instead of over D-Bus, and EnableControllers
    enables the controllers Docker delegated to the container down to that scope. The man page
    calls both development options and warns that systemd may change a cgroup under them; here
    the tree is the container's own, a subtree the host's systemd delegated (Docker's scope,
    Delegate=yes) and leaves alone (proven on real hosts: tests/vm/test_cgroup_v2.py). Both are
    v2 keys; the v1 plugin ignores them.
    """
    yes = "yes" if enforce else "no"
    return f"""\
# Managed by hpc-cluster (Pulumi): local edits are overwritten.
CgroupPlugin=autodetect
IgnoreSystemd=yes
EnableControllers=yes
ConstrainCores={yes}
ConstrainRAMSpace={yes}
ConstrainSwapSpace={yes}
ConstrainDevices={yes}
"""


def slurmdbd_conf(head_name: str) -> str:
    """slurmdbd.conf with the DB password as a placeholder the host substitutes."""
    return f"""\
# Managed by hpc-cluster (Pulumi): local edits are overwritten.
AuthType=auth/munge
DbdHost={head_name}
DbdPort={SLURMDBD_PORT}
SlurmUser=slurm
LogFile={LOG_DIR}/slurmdbd.log
PidFile=/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={MARIADB_PORT}
StorageUser={DB_USER}
StoragePass={DB_PASSWORD_PLACEHOLDER}
StorageLoc={ACCOUNTING_DB}
"""
