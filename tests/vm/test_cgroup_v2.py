"""slurmd's confinement under cgroup v2, in its container, on real hosts (issue 28, point 3).

Two Debian 12 guests (systemd, cgroup v2, Docker 20.10 with its systemd cgroup driver) run what
the plan records for them, as the Slurm suite runs it on namespaces: ``head`` (roles storage and
slurm-head) the head's steps and the head container (slurmctld, slurmdbd, MariaDB); ``w1``
(storage and gpu-worker, 2 cores of 2 threads) its accounts, munge key, sysctl, GPU preflight, health check,
prolog and epilog steps and the GPU worker container, on the plan's macvlan network. The images
are the plan's own (``docker_lab.Builder``'s cache), loaded once into a cached disk layer
(``vmlab.layer``); containers are created from the plan's records through each guest's Docker
API (forwarded over SSH). The stack's third storage host, ``w2``, is never booted: this is
about Slurm, and each guest's /srv/gfsv is a local directory (the storage tier's own scenario
mounts the volume).

Stand-ins for what cannot run here, as in the Slurm suite: fake /dev/nvidia* character devices
on w1 (no driver behind them: opening an allowed one gives ENXIO, a refused one EPERM), the
``nvidia-smi`` and ``nvidia-ctk`` stand-ins and the NVIDIA runtime stand-in registered in w1's
Docker. Test-only change to the plan: ``SlurmdParameters=config_overrides`` (the profiles
describe 32-core nodes).
"""

from __future__ import annotations

import base64
import re
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from offline.mocks import plain
from tests.integration import docker_lab, hostkeys
from tests.integration import lab as labmod
from tests.integration import test_slurm as ts
from tests.integration.steps import Step
from tests.vm import vmlab

pytestmark = [pytest.mark.vm, pytest.mark.timeout(1800)]

NET = vmlab.NET
ADDR = {"head": f"{NET}.11", "w1": f"{NET}.12", "w2": f"{NET}.13"}  # the guests' addresses (start order)
ALICE = str(ts.USERS["alice"])
HEAD_FIRST = ("head-preflight-check", "head-accounts")
W1_STEPS = ("w1-preflight-check", "w1-accounts", "w1-munge-key-file", "w1-sysctl", "w1-gpu-preflight",
            "w1-health-check", "w1-gpu-prolog", "w1-gpu-epilog")  # fmt: skip
HEAD_AFTER = ("head-homes", *ts.AFTER_THE_HEAD)
# w1's GPU stand-ins: two fake GPUs (NVIDIA's major 195), the tools, the runtime in Docker.
W1_GPUS = r"""set -euo pipefail
for i in 0 1; do [ -e /dev/nvidia$i ] || mknod -m 666 /dev/nvidia$i c 195 $i; done
[ -e /dev/nvidiactl ] || mknod -m 666 /dev/nvidiactl c 195 255
[ -e /dev/nvidia-uvm ] || mknod -m 666 /dev/nvidia-uvm c 509 0
[ -e /dev/nvidia-uvm-tools ] || mknod -m 666 /dev/nvidia-uvm-tools c 509 1
mkdir -p /srv/fake-nvidia
printf '{"runtimes": {"nvidia": {"path": "/usr/local/bin/nvidia-container-runtime"}}}\n' >/etc/docker/daemon.json
systemctl reload docker
"""


def stack() -> dict:  # type: ignore[type-arg]
    """The Slurm suite's stack, on the VM lab's bridge: a head, one GPU worker, one user."""
    config = ts.stack(0)
    roles = {"head": ["storage", "slurm-head"], "w1": ["storage", "gpu-worker"], "w2": ["storage"]}
    config["hpc:hosts"] = [
        {
            "name": name,
            "address": ADDR[name],
            "sshUser": "root",
            "hostKey": hostkeys.public(name),
            "profile": "epyc-7502p-256g" if name == "head" else "a100x2-80g",
            "roles": roles[name],
            "containerAddress": f"{NET}.{41 + i}",
        }
        for i, name in enumerate(roles)
    ]
    config["hpc:network"] = labmod.stack_network(NET)
    config["hpc:backup"] = {"enabled": False}
    config["hpc:users"] = [u for u in config["hpc:users"] if u["name"] == "alice"]
    config["hpc:slurm"]["partitions"] = [{"name": "gpu", "default": True}]
    return config


class Guests:
    """The two guests, each with its Docker API (over SSH) and the plan's records."""

    def __init__(self, lab: vmlab.VmLab, planned: ts.Planned):
        self.lab, self.planned = lab, planned
        self.daemons: dict[str, docker_lab.Dockerd] = {}

    def run(self, step: Step) -> subprocess.CompletedProcess[str]:
        name = next(n for n, a in ADDR.items() if a == step.host)
        stdin = step.stdin
        if step.name == "head-slurm-conf" and stdin is not None:
            stdin += ts.OVERRIDE
        return self.lab.ssh(name, step.create, stdin=stdin, timeout=600)

    def run_all(self, steps: list[Step], before: Callable[[], None] | None = None) -> dict[str, str]:
        """``before()``, then the steps in order; each step's output by name."""
        if before is not None:
            before()
        return {s.name: self.run(s).stdout for s in steps}

    def deploy(self, host: str) -> None:
        daemon = self.daemons[host]
        daemon.create_network(self.planned.networks[host])
        daemon.run_container(self.planned.containers[host])

    def in_head(self, cmd: str, user: str = "") -> tuple[int, str]:
        return self.daemons["head"].exec("slurm-head", cmd, user=user, workdir="/tmp")

    def in_worker(self, cmd: str) -> tuple[int, str]:
        return self.daemons["w1"].exec("slurm-worker", cmd)

    def sbatch(self, *args: str) -> str:
        """Submit as alice and wait for the job to end; its id."""
        rc, out = self.in_head(f"sbatch --wait --parsable -w w1 -o /tmp/job-%j.out {' '.join(args)}", user=ALICE)
        job = out.strip().splitlines()[-1] if out.strip() else ""
        assert re.fullmatch(r"\d+", job), f"sbatch exited {rc}: {out}"
        return job

    def diagnostics(self) -> str:
        out = []
        for host, daemon in self.daemons.items():
            for c in daemon.api.containers(all=True):
                out.append(f"--- {host} {c['Names']} {c['Status']}\n" + daemon.api.logs(c["Id"], tail=30).decode())
        return "\n".join(out)


def images(planned: ts.Planned, builder: docker_lab.Builder) -> dict[str, Path]:
    """Every image the two guests run: its recorded name -> the cached tarball."""
    return {plain(planned.images[h].inputs)["imageName"]: builder.image(planned.images[h]) for h in ("head", "w1")}


@pytest.fixture(scope="module")
def guests(tmp_path_factory):
    planned = ts.Planned(0, config=stack())
    builder = docker_lab.Builder(tmp_path_factory.mktemp("builder"))
    try:
        tars = images(planned, builder)
    finally:
        builder.stop()
    lab_iter = vmlab.vm_lab()
    lab = next(lab_iter)
    resolver = docker_lab.nxdomain_resolver(lab.ns)  # Docker's DNS forwards to it: no lookup waits
    g = Guests(lab, planned)
    try:

        def load(guest: str) -> None:
            daemon = docker_lab.Dockerd(lab.docker(guest).parent)
            for tag, tar in sorted(tars.items()):
                daemon.load_as(tar, tag)

        inputs = [f"{tag} {tar.name} {tar.stat().st_size}" for tag, tar in sorted(tars.items())]
        layer = vmlab.layer(lab, "slurm", inputs, load)
        started = time.monotonic()
        lab.start("head", memory_mb=1536, layer=layer)
        lab.start("w1", memory_mb=2048, cpus=4, threads=2, layer=layer)  # 2 cores of 2 threads, as the profile's
        booted = {name: lab.wait_booted(name) for name in ("head", "w1")}
        print(f"booted in {time.monotonic() - started:.0f} s ({booted})")
        for name in ("head", "w1"):
            lab.ssh(name, f"echo 'nameserver {NET}.1' >/etc/resolv.conf")
            g.daemons[name] = docker_lab.Dockerd(lab.docker(name).parent)
        libcuda = tmp_path_factory.mktemp("libcuda")
        # Each host's steps in the plan's order, the two hosts side by side (as the engine runs them)
        head_steps = [planned.steps[n] for n in HEAD_FIRST] + planned.head_steps()
        w1_steps = [planned.steps[n] for n in W1_STEPS]
        with ThreadPoolExecutor(2) as pool:
            outs = [*pool.map(g.run_all, [head_steps, w1_steps], [None, lambda: put_gpu_stand_ins(lab, libcuda)])]
        for out in outs:
            for name, text in out.items():
                if name.endswith("-preflight-check"):  # the plan's own check of a real Debian 12 host
                    assert "is ready: Debian GNU/Linux 12 (bookworm), user root docker " in text, text
        print(f"steps done {time.monotonic() - started:.0f} s after the first boot")
        # Neither container depends on the other in the plan: the engine starts both at once.
        g.deploy("head")
        g.deploy("w1")
        labmod.wait_until(lambda: g.in_head("sinfo -h -N -t idle -o %N")[1].split() == ["w1"], "w1 idle", 420)
        print(f"w1 idle {time.monotonic() - started:.0f} s after the first boot")
        for name in HEAD_AFTER:
            g.run(planned.steps[name])
        print(f"cluster up {time.monotonic() - started:.0f} s after the first boot")
        yield g
    except Exception:
        print(g.diagnostics() if g.daemons else "")
        raise
    finally:
        resolver.terminate()
        resolver.wait(10)
        next(lab_iter, None)


def put_gpu_stand_ins(lab: vmlab.VmLab, tmp: Path) -> None:
    """w1's fake GPUs, nvidia-smi, nvidia-ctk, libcuda.so.1 and the NVIDIA runtime stand-in."""
    libcuda = tmp / "libcuda.so.1"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", str(libcuda), str(ts.LIBCUDA_C)],
                   check=True, capture_output=True, text=True)  # fmt: skip
    for path, text in (("/usr/local/bin/nvidia-smi", ts.NVIDIA_SMI), ("/usr/local/bin/nvidia-ctk", ts.NVIDIA_CTK),
                       ("/usr/local/bin/nvidia-container-runtime", ts.NVIDIA_RUNTIME.read_text())):  # fmt: skip
        lab.ssh("w1", f"install -D -m 0755 /dev/stdin {path}", stdin=text)
    lab.ssh("w1", W1_GPUS)
    lab.ssh("w1", f"cat >/srv/fake-nvidia/gpus.csv && : >{ts.APPS}", stdin=ts.GPUS_CSV)
    lab.ssh("w1", "base64 -d >/srv/fake-nvidia/libcuda.so.1", stdin=base64.b64encode(libcuda.read_bytes()).decode())


def container_id(g: Guests) -> str:
    return str(g.daemons["w1"].api.inspect_container("slurm-worker")["Id"])


def test_slurmd_uses_cgroup_v2_in_its_containers_own_tree(guests):
    """slurmd's scope and every job's cgroup are inside the container's cgroup (so Docker's
    limits hold them), with the controllers delegated; nothing in the host's own system.slice."""
    lab = guests.lab
    assert lab.ssh("w1", "stat -fc %T /sys/fs/cgroup").stdout.strip() == "cgroup2fs"
    rc, out = guests.in_worker("cat /proc/$(cat /run/slurmd.pid)/cgroup; stat -fc %T /sys/fs/cgroup")
    assert rc == 0 and out.split() == ["0::/system.slice/w1_slurmstepd.scope/slurmd", "cgroup2fs"], out
    rc, out = guests.in_worker("cat /sys/fs/cgroup/system.slice/w1_slurmstepd.scope/cgroup.controllers")
    assert {"cpuset", "cpu", "memory"} <= set(out.split()), out  # what ConstrainCores/RAMSpace use
    rc, out = guests.in_head("sbatch --parsable -w w1 -o /dev/null --wrap 'sleep 120'", user=ALICE)
    job = out.strip()
    assert rc == 0 and job.isdigit(), out
    try:
        scope = f"/sys/fs/cgroup/system.slice/docker-{container_id(guests)}.scope/system.slice/w1_slurmstepd.scope"
        found = labmod.wait_until(
            lambda: lab.ssh("w1", f"ls -d {scope}/job_{job} 2>/dev/null", check=False).stdout.strip(),
            "the job's cgroup",
            120,
        )
        assert found == f"{scope}/job_{job}"
        assert lab.ssh("w1", "ls -d /sys/fs/cgroup/system.slice/*slurmstepd* 2>&1", check=False).returncode != 0
    finally:
        guests.in_head(f"scancel {job}")


def test_a_job_over_its_memory_is_killed_by_the_oom_killer_and_slurmd_lives(guests):
    pid = guests.in_worker("cat /run/slurmd.pid")[1].strip()
    # 300 MB, every page written (a fresh bytearray's pages are not resident until then)
    hog = "python3 -c 'b = bytearray(300 << 20); b[::4096] = bytes(len(b[::4096])); print(len(b))'"
    job = guests.sbatch("--mem=100M -c1", f'--wrap "{hog}"')
    state = labmod.wait_until(
        lambda: guests.in_head(f"sacct -n -X -P -j {job} -o State")[1].strip(), "sacct's record", 60
    )
    assert state == "OUT_OF_MEMORY", state
    assert str(300 << 20) not in guests.in_worker(f"cat /tmp/job-{job}.out")[1]  # it never got that far
    assert guests.in_worker("cat /run/slurmd.pid")[1].strip() == pid  # slurmd was not the one killed
    assert guests.daemons["w1"].api.inspect_container("slurm-worker")["State"]["Running"]


def test_a_job_sees_only_its_cores(guests):
    """-c1 on a node of 2 threads per core is one core: its 2 threads, of the host's 4."""
    assert guests.in_worker("nproc")[1].strip() == "4"
    probe = "nproc; echo $SLURM_CPUS_ON_NODE; cat /sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)/cpuset.cpus.effective"
    job = guests.sbatch("-c1", f"--wrap '{probe}'")
    out = guests.in_worker(f"cat /tmp/job-{job}.out")[1].split()
    assert out[:2] == ["2", "2"], out
    cpus = out[2]  # the job step's cpuset: one core's two threads, e.g. 0,2 or 0-1
    assert len([c for part in cpus.split(",") for c in _expand(part)]) == 2, out


def _expand(part: str) -> list[int]:
    lo, _, hi = part.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def test_a_job_opens_only_the_gpu_it_was_given(guests):
    """The cgroup v2 devices controller (an eBPF program Slurm attaches to the job's cgroup)."""
    probe = "head -c1 /dev/nvidia0 2>&1; head -c1 /dev/nvidia1 2>&1; echo CUDA=$CUDA_VISIBLE_DEVICES; true"
    job = guests.sbatch("--gres=gpu:1", f"--wrap '{probe}'")
    out = guests.in_worker(f"cat /tmp/job-{job}.out")[1]
    assert "CUDA=0" in out, out
    assert "'/dev/nvidia0' for reading: No such device or address" in out, out  # allowed: no driver behind it
    assert "'/dev/nvidia1' for reading: Operation not permitted" in out, out  # not given: refused
