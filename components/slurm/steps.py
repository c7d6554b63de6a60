"""Pure renderers for the Slurm tier's remote steps (host side of the containers).

Secrets (the munge key, the accounting DB password) arrive on stdin and are written to files
with the right owner and mode; they never appear in a script, an argument or the plan.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from components.accounts import SLURM_GID, SLURM_UID
from components.hardware import MIN_NVIDIA_DRIVER_BRANCH, HardwareProfile
from components.scripts import Raw, RemoteScript, fill, no_undo, put_file, restart_running, script
from components.slurm import render, render_health

SCRIPTS = Path(__file__).with_name("scripts")
CONFIG_DIR = "/etc/slurm"
# The munge key on every Slurm host's own disk, owned by root (uid 991 may name another account on a
# site's host), mounted read-only at the same path in its containers; the entrypoint installs it as
# the image's munge user. A directory of its own, not /etc/munge: a host may run its own munge.
MUNGE_DIR = "/etc/hpc-cluster/munge"
MIN_MUNGE_KEY_BYTES = 32
DB_PASSWORD_FILE = f"{CONFIG_DIR}/db-password"  # mounted at /run/secrets/slurm-db-password
SYSCTL_FILE = "/etc/sysctl.d/90-hpc-cluster.conf"
# The NVIDIA driver makes its device files with these (root's only: jobs get theirs in the worker
# container, whose entrypoint opens them to the job's user; Slurm's devices cgroup confines them).
NVIDIA_MODPROBE_FILE = "/etc/modprobe.d/90-hpc-cluster-nvidia.conf"
NVIDIA_DEVICE_OPTIONS = "options nvidia NVreg_DeviceFileUID=0 NVreg_DeviceFileGID=0 NVreg_DeviceFileMode=0660\n"
# The state and database paths in use on the head host: a changed path is a move, refused or migrated.
STATE_RECORD = "/etc/hpc-cluster/slurm-paths"
HEAD_CONTAINER = "slurm-head"
WORKER_CONTAINER = "slurm-worker"
LOGIN_CONTAINER = "slurm-login"
SLURM_CONTAINERS = (HEAD_CONTAINER, WORKER_CONTAINER, LOGIN_CONTAINER)  # whichever runs on a host
DRAIN_REASON = "hpc-cluster: replacing the slurmd container"
# How long docker stop/restart waits for a container's daemons to stop in order (the entrypoint):
# slurmctld saving its state and MariaDB flushing InnoDB take seconds; then SIGKILL.
CONTAINER_STOP_TIMEOUT_S = 60
DRAIN_TIMEOUT_S = 3600
DRAIN_POLL_S = 2
CONTROLLER_RECONFIGURE_TIMEOUT_S = 120
# How long a drain or resume waits for slurmctld to answer (a head container being restarted or
# replaced takes well under a minute in the Slurm suite) before it fails naming the controller.
CONTROLLER_WAIT_S = 300
PAGE_SIZE = 4096
MIB = 1024 * 1024


# ---- head -----------------------------------------------------------------------------------
def munge_key(host: str, shared_mount: str) -> RemoteScript:
    """Write the munge key (base64 on stdin) to this host's own disk, ``MUNGE_DIR`` (0700, key
    0400, both root's: no host account holds it, whatever uid 991 is there), never the shared
    volume: anything on the subnet could read it there. A key an older
    release left on the shared volume is removed. A changed key (rotation) restarts the host's
    running Slurm containers, since munged reads the key only at start."""
    body = fill(
        SCRIPTS / "munge-key.sh",
        dir=MUNGE_DIR,
        key=f"{MUNGE_DIR}/munge.key",
        owner="0:0",
        min_bytes=MIN_MUNGE_KEY_BYTES,
        restart=restart_running(SLURM_CONTAINERS, "with the new munge key"),
        legacy=f"{shared_mount}/munge/munge.key",
    )
    create = script(host, f"{host}-munge-key", body, extra_headers={"secret-stdin": "munge-key"})
    delete = script(host, f"{host}-munge-key-delete", f"rm -f {MUNGE_DIR}/munge.key\n")
    return RemoteScript(f"{host}-munge-key", host, create, delete)


def head_secrets(host: str) -> RemoteScript:
    """Write the DB password file and slurmdbd.conf (placeholder substituted) from stdin."""
    body = fill(
        SCRIPTS / "head-secrets.sh",
        config_dir=CONFIG_DIR,
        password_file=DB_PASSWORD_FILE,
        template=Raw(render.slurmdbd_conf(host).rstrip()),
        owner=f"{SLURM_UID}:{SLURM_GID}",
        placeholder=Raw(render.DB_PASSWORD_PLACEHOLDER),
    )
    create = script(host, f"{host}-slurm-secrets", body, extra_headers={"secret-stdin": "db-password"})
    delete = script(host, f"{host}-slurm-secrets-delete", f"rm -f {DB_PASSWORD_FILE} {CONFIG_DIR}/slurmdbd.conf\n")
    return RemoteScript(f"{host}-slurm-secrets", host, create, delete)


def state_dirs(host: str, state_path: str, db_path: str, allow_destroy: bool, migrate: bool = False) -> RemoteScript:
    """Durable controller state and database directories on the head host. A moved directory
    whose old place holds data is refused, or with ``migrate`` copied (head stopped) and compared;
    the old directory is kept either way."""
    body = fill(
        SCRIPTS / "state-dirs.sh",
        state_path=state_path,
        db_path=db_path,
        owner=f"{SLURM_UID}:{SLURM_GID}",
        record=STATE_RECORD,
        migrate=int(migrate),
        container=HEAD_CONTAINER,
    )
    create = script(
        host,
        f"{host}-slurm-state",
        body,
        extra_headers={"stateful": "slurm-state+accounting-db", "allow-destroy": str(int(allow_destroy))},
    )
    if allow_destroy:
        body = f"rm -rf --one-file-system {shlex.quote(state_path)} {shlex.quote(db_path)}\n"
    else:
        body = (
            f'echo "hpc: keeping Slurm state {state_path} and the accounting database {db_path} '
            '(hpc:slurm.allowDestroy is false)"\n'
        )
    return RemoteScript(f"{host}-slurm-state", host, create, script(host, f"{host}-slurm-state-delete", body))


def config_file(host: str, name: str, content: str) -> RemoteScript:
    """One Slurm config file on the head; a running controller picks up a changed file.

    Slurm 24.11's ``scontrol reconfigure`` restarts slurmctld in place and so also adds or
    removes nodes (22.05 refused that and needed a container restart; the Slurm suite proves
    24.11 on real daemons); the configless workers then fetch the new files. Workers are never
    restarted."""
    path = f"{CONFIG_DIR}/{name}"
    step = f"{host}-{name.replace('.', '-')}"
    body = fill(
        SCRIPTS / "config-file.sh",
        config_dir=CONFIG_DIR,
        path=path,
        container=HEAD_CONTAINER,
        timeout=CONTROLLER_RECONFIGURE_TIMEOUT_S,
    )
    create = script(host, step, body, file=path)
    delete = script(host, f"{step}-delete", f"rm -f {path}\n")
    return RemoteScript(step, host, create, delete, path, content)


# ---- GPU workers ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class KernelTuning:
    """Kernel limits the spec sheets ask for, derived from the node's memory."""

    file_max: int
    shmmax: int
    shmall: int

    @classmethod
    def for_profile(cls, hw: HardwareProfile) -> KernelTuning:
        # shmmax: one segment may span 3/4 of RAM (large in-memory datasets, NCCL/shm transports);
        # shmall: the same in pages; file-max: 32 handles per MiB of RAM, at least 2^20.
        shmmax = hw.memory_mib * MIB * 3 // 4
        return cls(file_max=max(2**20, hw.memory_mib * 32), shmmax=shmmax, shmall=shmmax // PAGE_SIZE)

    @property
    def text(self) -> str:
        return (
            "# Managed by hpc-cluster (Pulumi): derived from the node's memory.\n"
            f"fs.file-max = {self.file_max}\n"
            f"kernel.shmmax = {self.shmmax}\n"
            f"kernel.shmall = {self.shmall}\n"
        )


def sysctl(host: str, tuning: KernelTuning) -> RemoteScript:
    create = script(host, f"{host}-sysctl", fill(SCRIPTS / "sysctl.sh", file=SYSCTL_FILE), file=SYSCTL_FILE)
    delete = script(host, f"{host}-sysctl-delete", f"rm -f {SYSCTL_FILE}\n")
    return RemoteScript(f"{host}-sysctl", host, create, delete, SYSCTL_FILE, tuning.text)


def gpu_preflight(host: str, gpus: int, min_branch: int = MIN_NVIDIA_DRIVER_BRANCH) -> RemoteScript:
    """Fail clearly unless the NVIDIA driver is R<min_branch>+ and the node shows ``gpus`` GPUs;
    keep the GPU device files 0660 root:root (now and at the driver's next load). Delete removes
    the modprobe setting (the modes return to the driver's default at its next load)."""
    modprobe = put_file(NVIDIA_MODPROBE_FILE, "0644", "# Managed by hpc-cluster (Pulumi)\n" + NVIDIA_DEVICE_OPTIONS)
    body = fill(SCRIPTS / "gpu-preflight.sh", host=host, gpus=gpus, min_branch=min_branch, modprobe=Raw(modprobe))
    create = script(host, f"{host}-gpu-preflight", body, extra_headers={"min-driver-branch": str(min_branch)})
    delete = script(host, f"{host}-gpu-preflight-delete", f"rm -f {NVIDIA_MODPROBE_FILE}\n")
    return RemoteScript(f"{host}-gpu-preflight", host, create, delete)


def health_check(host: str, program: str) -> RemoteScript:
    """Install the node's health check program (``render_health``); slurmd runs the new file at
    its next interval, the container stays as it is."""
    return _health_file(host, f"{host}-health-check", render_health.PROGRAM, program)


def job_check(host: str, phase: str, program: str) -> RemoteScript:
    """Install the node's GPU check for ``phase`` (``render_health.job_check``) at the path slurm.conf's
    Prolog/Epilog names; slurmd runs it from the next job on."""
    return _health_file(host, f"{host}-gpu-{phase}", render_health.job_check_path(phase), program)


def _health_file(host: str, step: str, path: str, content: str) -> RemoteScript:
    create = script(host, step, fill(SCRIPTS / "health-install.sh", file=path), file=path)
    delete = script(host, f"{step}-delete", f"rm -f {shlex.quote(path)}\n")
    return RemoteScript(step, host, create, delete, path, content)


def drain(head: str, node: str, max_unavailable: int = 1, timeout_s: int = DRAIN_TIMEOUT_S) -> RemoteScript:
    """On the head: drain ``node`` before its container is replaced, and wait for its jobs.

    Rolling: at most ``max_unavailable`` nodes are drained by hpc-cluster at once, whatever the
    engine runs in parallel (the check and the drain happen under a lock on the head), so the
    graph gains no edge between sibling workers. Bounded: a node whose jobs outlast
    ``timeout_s`` is resumed and the step fails naming the jobs; its container stays as it is."""
    body = fill(
        SCRIPTS / "drain.sh",
        container=HEAD_CONTAINER,
        node=node,
        ours="Reason=" + DRAIN_REASON,
        reason=DRAIN_REASON,
        max_unavailable=max_unavailable,
        timeout=timeout_s,
        poll=DRAIN_POLL_S,
        controller_timeout=CONTROLLER_WAIT_S,
    )
    create = script(head, f"{node}-drain", body, extra_headers={"runs-for": node})
    delete = no_undo(head, f"{node}-drain")
    return RemoteScript(f"{node}-drain", head, create, delete)


def resume(head: str, node: str) -> RemoteScript:
    """On the head: resume ``node`` if this project drained it."""
    body = fill(
        SCRIPTS / "resume.sh",
        container=HEAD_CONTAINER,
        node=node,
        ours="Reason=" + DRAIN_REASON,
        controller_timeout=CONTROLLER_WAIT_S,
    )
    create = script(head, f"{node}-resume", body, extra_headers={"runs-for": node})
    delete = no_undo(head, f"{node}-resume")
    return RemoteScript(f"{node}-resume", head, create, delete)


# ---- after deployment -------------------------------------------------------------------------
# The smoke test's jobs: how long one may wait for a busy cluster before it is reported "busy"
# (not a failure), how often the queue is read, and each job's time limit.
SMOKE_WAIT_S = 300
SMOKE_POLL_S = 2
SMOKE_JOB_MINUTES = 5


def smoke_test(
    head: str, partitions: list[tuple[str, bool]], mpi: str | None = None, wait_s: int = SMOKE_WAIT_S
) -> RemoteScript:
    """On the head, after every node is up: one job per partition (``(name, has_gpus)``) through
    the real scheduler, and with ``mpi`` (a partition) an MPI job across two of its nodes
    (``srun --mpi=pmix``, mpi4py); a JSON verdict on stdout, one failing line naming the
    partition and the node when a job fails (scripts/smoke-test.sh). A job pending on a busy
    cluster for ``wait_s`` is reported "busy"."""
    runs = [(name, "gpu" if gpu else "cpu") for name, gpu in partitions] + ([(mpi, "mpi")] if mpi else [])
    checks = Raw("\n".join(f"smoke {shlex.quote(name)} {kind}" for name, kind in runs))
    body = fill(
        SCRIPTS / "smoke-test.sh",
        container=HEAD_CONTAINER,
        wait=wait_s,
        poll=SMOKE_POLL_S,
        minutes=SMOKE_JOB_MINUTES,
        checks=checks,
    )
    name = f"{head}-slurm-smoke-test"
    return RemoteScript(name, head, script(head, name, body, stdout_is_output=True), no_undo(head, name))
