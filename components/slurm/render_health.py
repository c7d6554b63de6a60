"""Pure renderers for Slurm's node health check: the program every slurmd runs and its slurm.conf lines.

slurmd runs ``HealthCheckProgram`` when it starts and every ``HealthCheckInterval`` seconds, on
the nodes in ``HealthCheckNodeState``. The program (``scripts/healthcheck.sh``, filled per node
with what its profile says) lives on the worker host's own disk, ``HEALTH_DIR``, mounted read-only
into the worker container: changing a check rewrites a file and never replaces a container (which
drains the node). Its checks, in order, the first failure giving the drain reason:

* GPUs (GPU nodes): ``nvidia-smi`` answers and shows the profile's count and model; no
  uncorrectable ECC error since the driver loaded, no retired page pending;
* XIDs (GPU nodes): no critical XID since boot in the kernel log for this node's GPUs;
* Fabric Manager (NVSwitch boards: NVLink with 4 or more GPUs): every GPU's fabric state is
  ``Completed``/``Success``;
* the shared volume writable, munge encoding and decoding, free space in the job and state
  directories.

A failure drains the node with ``REASON_PREFIX`` and the evidence; a passing run resumes only a
node whose reason starts with that prefix (an admin's drain, or the container replacement's,
stays).

Around every job, the same directory holds the GPU job checks (``scripts/gpu-job-check.sh``),
slurm.conf's ``Prolog`` and ``Epilog``: the job's own GPUs must run no process and hold no
memory before it starts (else the node drains with ``JOB_REASON_PREFIX`` and the job is
requeued elsewhere), and must be free again within ``Health.epilog_wait_s`` after it ended
(else the node drains). Nothing resumes those drains: a GPU someone else holds needs an admin's look.
slurm.conf names the two programs by path; Slurm fails every prolog on a node that lacks them,
so they are installed before the controller's slurm.conf names them (``job_checks.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from components.hardware import CRITICAL_XIDS, HardwareProfile
from components.scripts import Raw, fill

SCRIPTS = Path(__file__).with_name("scripts")
HEALTH_DIR = "/etc/hpc-cluster/health"  # on the worker host, and at the same path in its container
PROGRAM = f"{HEALTH_DIR}/hpc-healthcheck"
REASON_PREFIX = "hpc-health:"
SHARED_IN_CONTAINER = "/home"  # the shared volume's home directory, as the worker container mounts it
TOOL_TIMEOUT_S = 30  # one tool call (nvidia-smi hangs on a GPU that fell off the bus)
NODE_STATES = ("any", "alloc", "idle", "mixed", "nondrained_idle")  # HealthCheckNodeState's values
FABRIC_MIN_GPUS = 4  # NVLink boards with this many GPUs or more carry NVSwitches (HGX)
JOB_PHASES = ("prolog", "epilog")
JOB_REASON_PREFIX = "hpc-gpu:"
GPU_BUSY_MIB = 512  # memory in use on a GPU with no process listed: a context of someone else's
EPILOG_WAIT_S = 60  # a killed job's GPU contexts are torn down within seconds; a minute is generous
EPILOG_POLL_S = 2


def job_check_path(phase: str) -> str:
    return f"{HEALTH_DIR}/{phase}-hpc-gpu"


@dataclass(frozen=True)
class Health:
    """When slurmd runs the check, and how much free space it wants."""

    enabled: bool = True
    interval_s: int = 300
    node_states: tuple[str, ...] = ("any",)
    cycle: bool = True  # spread the runs over the interval instead of all nodes at once
    min_free_mib: int = 1024
    job_gpu_checks: bool = True  # the prolog/epilog GPU checks around every job
    epilog_wait_s: int = EPILOG_WAIT_S  # how long a job's GPUs may stay busy after it ended


def conf_lines(h: Health) -> str:
    """The slurm.conf lines that make slurmd run the check and the job checks (none of what is off)."""
    lines = ""
    if h.enabled:
        states = ",".join(s.upper() for s in h.node_states) + (",CYCLE" if h.cycle else "")
        lines = f"HealthCheckProgram={PROGRAM}\nHealthCheckInterval={h.interval_s}\nHealthCheckNodeState={states}\n"
    if h.job_gpu_checks:
        # Alloc: the prolog runs when the job is allocated, on all its nodes, before anything
        # starts (salloc too); nohold_on_prolog_fail: a job refused by a prolog is requeued and
        # runs elsewhere instead of waiting held for an admin.
        lines += (
            f"Prolog={job_check_path('prolog')}\nEpilog={job_check_path('epilog')}\n"
            "PrologFlags=Alloc\nSchedulerParameters=nohold_on_prolog_fail\n"
        )
    return lines


def model_key(model: str) -> str:
    """What nvidia-smi's name of the profile's GPU contains: 'NVIDIA H100 SXM5 80GB' -> 'h100'
    (nvidia-smi says 'NVIDIA H100 80GB HBM3'), 'NVIDIA A100 PCIe 80GB' -> 'a100'."""
    words = [w for w in re.split(r"[\s-]+", model) if w and w.upper() != "NVIDIA"]
    return re.sub(r"[^a-z0-9]", "", (words[0] if words else model).lower())


def needs_fabric_manager(hw: HardwareProfile) -> bool:
    return hw.gpus is not None and hw.gpus.interconnect == "nvlink" and hw.gpus.count >= FABRIC_MIN_GPUS


def program(
    node: str, hw: HardwareProfile, gpus: int, h: Health, dirs: tuple[str, ...], shared: str = SHARED_IN_CONTAINER
) -> str:
    """The health check program for ``node``: ``gpus`` is how many GPUs its container shows (the
    ones Slurm owns there: the NVIDIA runtime exposes only those); ``dirs`` the directories that
    need ``h.min_free_mib`` free."""
    return fill(
        SCRIPTS / "healthcheck.sh",
        node=node,
        gpus=gpus,
        model=model_key(hw.gpus.model) if hw.gpus else "",
        fabric=int(needs_fabric_manager(hw)),
        shared=shared,
        min_free_mib=h.min_free_mib,
        dirs=list(dirs),
        prefix=REASON_PREFIX,
        xids=Raw(" ".join(map(str, CRITICAL_XIDS))),
        tool_timeout=TOOL_TIMEOUT_S,
    )


def job_check(node: str, gpus: int, phase: str, wait_s: int) -> str:
    """The GPU job check for ``node``'s ``phase`` (``prolog`` or ``epilog``): ``gpus`` is how many
    GPUs Slurm owns there (0: the program exits at once, so CPU nodes run the same slurm.conf);
    ``wait_s`` how long the epilog waits for the job's GPUs to be free."""
    if phase not in JOB_PHASES:
        raise ValueError(f"job check phase {phase!r}: one of {', '.join(JOB_PHASES)}")
    return fill(
        SCRIPTS / "gpu-job-check.sh",
        node=node,
        gpus=gpus,
        phase=phase,
        prefix=JOB_REASON_PREFIX,
        busy_mib=GPU_BUSY_MIB,
        wait_s=wait_s,
        poll_s=EPILOG_POLL_S,
        tool_timeout=TOOL_TIMEOUT_S,
    )
