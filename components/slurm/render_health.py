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


@dataclass(frozen=True)
class Health:
    """When slurmd runs the check, and how much free space it wants."""

    enabled: bool = True
    interval_s: int = 300
    node_states: tuple[str, ...] = ("any",)
    cycle: bool = True  # spread the runs over the interval instead of all nodes at once
    min_free_mib: int = 1024


def conf_lines(h: Health) -> str:
    """The slurm.conf lines that make slurmd run the check (none when it is off)."""
    if not h.enabled:
        return ""
    states = ",".join(s.upper() for s in h.node_states) + (",CYCLE" if h.cycle else "")
    return f"HealthCheckProgram={PROGRAM}\nHealthCheckInterval={h.interval_s}\nHealthCheckNodeState={states}\n"


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
