"""Pure renderers for the Slurm tier's remote steps (host side of the containers).

Secrets (the munge key, the accounting DB password) arrive on stdin and are written to files
with the right owner and mode; they never appear in a script, an argument or the plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.accounts import MUNGE_GID, MUNGE_UID, SLURM_GID, SLURM_UID
from components.hardware import MIN_NVIDIA_DRIVER_BRANCH, HardwareProfile
from components.scripts import RemoteScript, no_undo, restart_running, script, sh_quote
from components.slurm import render

CONFIG_DIR = "/etc/slurm"
# The munge key on every Slurm host's own disk, mounted read-only at /etc/munge in its container. A
# directory of its own, not /etc/munge: a host may run its own munge with another uid.
MUNGE_DIR = "/etc/hpc-cluster/munge"
MIN_MUNGE_KEY_BYTES = 32  # on the head host; mounted at the same path in the head container
DB_PASSWORD_FILE = f"{CONFIG_DIR}/db-password"  # mounted at /run/secrets/slurm-db-password
SYSCTL_FILE = "/etc/sysctl.d/90-hpc-cluster.conf"
HEAD_CONTAINER = "slurm-head"
WORKER_CONTAINER = "slurm-worker"
LOGIN_CONTAINER = "slurm-login"
SLURM_CONTAINERS = (HEAD_CONTAINER, WORKER_CONTAINER, LOGIN_CONTAINER)  # whichever runs on a host
DRAIN_REASON = "hpc-cluster: replacing the slurmd container"
DRAIN_TIMEOUT_S = 3600
DRAIN_POLL_S = 2
CONTROLLER_RECONFIGURE_TIMEOUT_S = 120
PAGE_SIZE = 4096
MIB = 1024 * 1024


# ---- head -----------------------------------------------------------------------------------
def munge_key(host: str, shared_mount: str) -> RemoteScript:
    """Write the munge key (base64 on stdin) to this host's own disk, ``MUNGE_DIR`` (0700, owner
    munge), never the shared volume: anything on the subnet could read it there. A key an older
    release left on the shared volume is removed. A changed key (rotation) restarts the host's
    running Slurm containers, since munged reads the key only at start."""
    key = f"{MUNGE_DIR}/munge.key"
    legacy = f"{shared_mount}/munge/munge.key"
    create = script(
        host,
        f"{host}-munge-key",
        f"""\
hpc_dir {MUNGE_DIR} 0700 {MUNGE_UID}:{MUNGE_GID}
hpc_put_file {key} 0400 {MUNGE_UID}:{MUNGE_GID} < <(base64 -d)
[ "$(stat -c %s {key})" -ge {MIN_MUNGE_KEY_BYTES} ] \\
  || hpc_fail "the munge key on stdin is shorter than {MIN_MUNGE_KEY_BYTES} bytes"
if hpc_file_changed; then  # a rotated key: munged reads it only at start
{restart_running(SLURM_CONTAINERS, "with the new munge key")}fi
if [ -e {sh_quote(legacy)} ]; then
  rm -f {sh_quote(legacy)}
  hpc_changed "removed the munge key from the shared volume ({legacy})"
fi
""",
        extra_headers={"secret-stdin": "munge-key"},
    )
    delete = script(host, f"{host}-munge-key-delete", f"rm -f {key}\n")
    return RemoteScript(f"{host}-munge-key", host, create, delete)


def head_secrets(host: str) -> RemoteScript:
    """Write the DB password file and slurmdbd.conf (placeholder substituted) from stdin."""
    template = render.slurmdbd_conf(host)
    create = script(
        host,
        f"{host}-slurm-secrets",
        f"""\
password=$(cat)
[ -n "$password" ] || hpc_fail "no database password on stdin"
mkdir -p {CONFIG_DIR}
chmod 0755 {CONFIG_DIR}
hpc_put_file {DB_PASSWORD_FILE} 0600 0:0 < <(printf '%s' "$password")
template=$(cat <<'SLURMDBD_CONF'
{template.rstrip()}
SLURMDBD_CONF
)
hpc_put_file {CONFIG_DIR}/slurmdbd.conf 0600 {SLURM_UID}:{SLURM_GID} \\
  < <(printf '%s\\n' "${{template//{render.DB_PASSWORD_PLACEHOLDER}/$password}}")
""",
        extra_headers={"secret-stdin": "db-password"},
    )
    delete = script(host, f"{host}-slurm-secrets-delete", f"rm -f {DB_PASSWORD_FILE} {CONFIG_DIR}/slurmdbd.conf\n")
    return RemoteScript(f"{host}-slurm-secrets", host, create, delete)


def state_dirs(host: str, state_path: str, db_path: str, allow_destroy: bool) -> RemoteScript:
    """Durable controller state and database directories on the head host."""
    create = script(
        host,
        f"{host}-slurm-state",
        f"hpc_dir {sh_quote(state_path)} 0700 {SLURM_UID}:{SLURM_GID}\nhpc_mkdir {sh_quote(db_path)}\n",
        extra_headers={"stateful": "slurm-state+accounting-db", "allow-destroy": str(int(allow_destroy))},
    )
    if allow_destroy:
        body = f"rm -rf --one-file-system {sh_quote(state_path)} {sh_quote(db_path)}\n"
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
    create = script(
        host,
        step,
        f"""\
mkdir -p {CONFIG_DIR}
content=$(cat)
hpc_put_file {path} 0644 0:0 < <(printf '%s\\n' "$content")
running() {{ [ "$(docker inspect -f '{{{{.State.Running}}}}' {HEAD_CONTAINER} 2>/dev/null)" = true ]; }}
controller_up() {{ grep -q 'is UP' <<<"$(docker exec {HEAD_CONTAINER} scontrol ping)"; }}
if hpc_file_changed && running; then
  docker exec {HEAD_CONTAINER} scontrol reconfigure
  hpc_wait {CONTROLLER_RECONFIGURE_TIMEOUT_S} "slurmctld after the reconfigure" controller_up
  hpc_changed "scontrol reconfigure"
fi
""",
        file=path,
    )
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
    create = script(
        host,
        f"{host}-sysctl",
        f"""\
hpc_put_file {SYSCTL_FILE} 0644 0:0
if hpc_file_changed; then
  sysctl -q -p {SYSCTL_FILE}
  hpc_changed "applied {SYSCTL_FILE}"
fi
""",
        file=SYSCTL_FILE,
    )
    delete = script(host, f"{host}-sysctl-delete", f"rm -f {SYSCTL_FILE}\n")
    return RemoteScript(f"{host}-sysctl", host, create, delete, SYSCTL_FILE, tuning.text)


def gpu_preflight(host: str, gpus: int, min_branch: int = MIN_NVIDIA_DRIVER_BRANCH) -> RemoteScript:
    """Fail clearly unless the NVIDIA driver is R<min_branch>+ and the node shows ``gpus`` GPUs."""
    create = script(
        host,
        f"{host}-gpu-preflight",
        f"""\
command -v nvidia-smi >/dev/null \
  || hpc_fail "{host}: nvidia-smi not found: install the NVIDIA driver (R{min_branch} or newer)"
versions=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader) \\
  || hpc_fail "{host}: nvidia-smi failed: is the NVIDIA driver loaded?"
count=$(grep -c . <<<"$versions" || true)
if [ "$count" -ne {gpus} ]; then
  hpc_fail "{host}: the profile says {gpus} GPUs, nvidia-smi shows $count"
fi
branch=$(head -n1 <<<"$versions" | cut -d. -f1)
if [ "$branch" -lt {min_branch} ]; then
  hpc_fail "{host}: NVIDIA driver branch R$branch is older than R{min_branch} (the spec sheets' minimum)"
fi
for i in $(seq 0 $(({gpus} - 1))); do
  [ -c "/dev/nvidia$i" ] || hpc_fail "{host}: /dev/nvidia$i is missing"
done
echo "hpc: {host}: {gpus} GPUs, driver R$branch"
""",
        extra_headers={"min-driver-branch": str(min_branch)},
    )
    delete = no_undo(host, f"{host}-gpu-preflight")
    return RemoteScript(f"{host}-gpu-preflight", host, create, delete)


def drain(head: str, node: str, max_unavailable: int = 1, timeout_s: int = DRAIN_TIMEOUT_S) -> RemoteScript:
    """On the head: drain ``node`` before its container is replaced, and wait for its jobs.

    Rolling: at most ``max_unavailable`` nodes are drained by hpc-cluster at once, whatever the
    engine runs in parallel (the check and the drain happen under a lock on the head), so the
    graph gains no edge between sibling workers. Bounded: a node whose jobs outlast
    ``timeout_s`` is resumed and the step fails naming the jobs; its container stays as it is."""
    reason = sh_quote(DRAIN_REASON)
    ours = sh_quote("Reason=" + DRAIN_REASON)
    create = script(
        head,
        f"{node}-drain",
        f"""\
sc() {{ docker exec {HEAD_CONTAINER} scontrol "$@"; }}
in_slurm() {{ docker inspect {HEAD_CONTAINER} >/dev/null 2>&1 && sc show node {node} >/dev/null 2>&1; }}
draining() {{ grep -q 'State=[A-Z+]*DRAIN' <<<"$(sc show node {node})"; }}
drained() {{ grep -Eq 'State=(IDLE|DOWN)\\+DRAIN|State=[A-Z+]*DRAINED' <<<"$(sc show node {node})"; }}
ours() {{ grep -qF {ours} <<<"$(sc show node {node})"; }}
others() {{
  sc -o show nodes | awk -v me=NodeName={node} -v r={ours} 'index($0, r) && $1 != me {{ print substr($1, 10) }}' \\
    | paste -sd' '
}}
if ! in_slurm; then
  echo "hpc: {node} is not in Slurm yet: nothing to drain"
else
  exec 9>>/run/lock/hpc-cluster-drain.lock
  waited=0
  until draining; do
    flock 9
    busy=$(others)
    if [ "$(wc -w <<<"$busy")" -lt {max_unavailable} ]; then
      sc update nodename={node} state=drain reason={reason}
      hpc_changed "drained {node} (at most {max_unavailable} node(s) drained at once; others: ${{busy:-none}})"
    fi
    flock -u 9
    draining && break
    [ "$waited" -lt {timeout_s} ] || hpc_fail "waited {timeout_s}s to drain {node}: {max_unavailable} node(s) \
already drained for replacement ($busy); see hpc:slurm.maxUnavailable"
    sleep {DRAIN_POLL_S}
    waited=$((waited + {DRAIN_POLL_S}))
  done
  waited=0
  until drained; do
    if [ "$waited" -ge {timeout_s} ]; then
      jobs=$(docker exec {HEAD_CONTAINER} squeue -h -w {node} -o '%i(%u:%j)' | paste -sd' ')
      if ours; then sc update nodename={node} state=resume; fi
      hpc_fail "{node} still runs jobs after {timeout_s}s: $jobs; resumed it and left its container as it is. \
Run pulumi up again once they end, or raise hpc:slurm.drainTimeoutSeconds"
    fi
    sleep {DRAIN_POLL_S}
    waited=$((waited + {DRAIN_POLL_S}))
  done
fi
""",
        extra_headers={"runs-for": node},
    )
    delete = no_undo(head, f"{node}-drain")
    return RemoteScript(f"{node}-drain", head, create, delete)


def resume(head: str, node: str) -> RemoteScript:
    """On the head: resume ``node`` if this project drained it."""
    create = script(
        head,
        f"{node}-resume",
        f"""\
sc() {{ docker exec {HEAD_CONTAINER} scontrol "$@"; }}
ours() {{ grep -qF {sh_quote("Reason=" + DRAIN_REASON)} <<<"$(sc show node {node} 2>/dev/null)"; }}
if docker inspect {HEAD_CONTAINER} >/dev/null 2>&1 && ours; then
  sc update nodename={node} state=resume
  hpc_changed "resumed {node}"
fi
""",
        extra_headers={"runs-for": node},
    )
    delete = no_undo(head, f"{node}-resume")
    return RemoteScript(f"{node}-resume", head, create, delete)
