"""The Slurm tier in real containers on real Docker engines, driven by the plan (Slurm 24.11).

Test hosts (network + mount + UTS namespaces with sshd): ``head``, ``w1``, ``w2`` and a spare
``w3``, each running its own ``dockerd`` (tests/integration/docker_lab.py). What runs comes from
the plan of a test stack:

* the images are built from the plan's recorded ``docker.Image`` inputs (context, Dockerfile,
  platform, image name), on a debootstrapped Debian 13 base registered under the Dockerfiles'
  pinned digest (test-only mapping), once, then loaded into each host's daemon;
* each host's recorded ``docker.Network`` (macvlan on the host's eth0, static addresses) and
  ``docker.Container`` (image, command, env, host entries, volumes, devices, capabilities,
  cgroup namespace, restart policy) are created through the Docker API;
* the SlurmHead's and GpuWorkers' recorded remote steps run over real SSH on the hosts: munge
  key, secrets, state dirs, slurm.conf/gres.conf/cgroup.conf (``docker exec``/``restart`` on the
  real head container), GPU preflight, drain/resume, and the head's backups (Debian's restic, a
  repository on the head's own /srv, the drills restoring the accounting DB and a user's file).

Stand-ins for what cannot run here: ``nvidia-smi`` in each worker host's /usr/local/bin (two
GPUs, driver 550 unless a test changes it) and fake /dev/nvidia0,1, nvidiactl and nvidia-uvm
char devices on the worker hosts, which Docker passes into the containers; each host's own /dev
with /dev/fuse 0666, as udev makes it on a real host (here it is 0600). The shared volume is a
directory bind-mounted at /srv/gfsv on every host (the storage suite proves the Gluster mount).
The worker ``sysctl`` step is not run: it would change this machine's kernel settings.

Test-only change to what the plan says, and why: ``SlurmdParameters=config_overrides`` is
appended to slurm.conf because the profiles describe 32-CPU / 256 GB nodes on a 2-core machine.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import math
import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.hardware import CATALOGUE
from components.inference import keys as api_keys
from components.scripts import wrap
from components.slurm import render as slurm_render
from components.slurm import steps as slurm_steps
from components.slurm.images import image_hash
from offline import plan
from offline.mocks import plain
from tests.integration import docker_lab, hostkeys, slurm_docs
from tests.integration import lab as labmod
from tests.integration.steps import Step, run_step, steps

pytestmark = pytest.mark.integration

NET = "10.79.0"
TOOLS = ("dockerd", "debootstrap", "/usr/sbin/sshd", "nsenter", "gcc")
HOSTS = ["head", "w1", "w2", "w3", "login", "c1"]
SSH_ADDR = {h: f"{NET}.{11 + i}" for i, h in enumerate(HOSTS)}  # the lab's own host addresses
CTR_ADDR = {h: f"{NET}.{41 + i}" for i, h in enumerate(HOSTS)}  # macvlan, inside containerRange
USERS = {"alice": 20001, "bob": 20002}  # researchers: hpc:users, keys from hostkeys (user-<name>)
OVERRIDE = "SlurmdParameters=config_overrides\n"
EPILOG_WAIT_S = 5  # the lab's jobs end in seconds; a leftover process is one still there after 5 s
JOBS = "/home/jobs"  # on the shared volume: every container sees it at the same path
PROD_CTLD = f"{NET}.60"  # the prod controller's stand-in address in the lab
# The head's steps that talk to its running daemons (sacctmgr, scontrol): after its container.
NODE_FILES = ("health-check", "gpu-prolog", "gpu-epilog")  # a slurmd node's steps that install programs
AFTER_THE_HEAD = ("head-slurm-accounting", "head-slurm-reservations")
SMOKE_TEST = "head-slurm-smoke-test"  # the plan's last Slurm step: after every node is back in service
BACKUP_REPO = "/srv/backup/hpc"  # on the head's own disk in the lab (a site names another host)

# Each host's own /dev: this machine's entries, but /dev/fuse 0666 as udev makes it on a real host
# (here it is 0600: no udev), and on GPU hosts (with "gpu") fake GPUs.
HOST_DEV = r"""set -e
mkdir -p "$1"
mount --rbind /dev "$1"
mount -t tmpfs -o mode=755,size=1m fakedev /dev
for e in "$1"/*; do [ "$e" = "$1/fuse" ] || ln -s "$e" "/dev/${e##*/}"; done
mknod -m 666 /dev/fuse c 10 229
[ "${2:-}" = gpu ] || exit 0
for i in 0 1; do mknod -m 666 "/dev/nvidia$i" c 195 "$i"; done
mknod -m 666 /dev/nvidiactl c 195 255
mknod -m 666 /dev/nvidia-uvm c 509 0
mknod -m 666 /dev/nvidia-uvm-tools c 509 1
"""

NVIDIA_SMI = r"""#!/bin/bash
# nvidia-smi stand-in (no GPU here; formats as NVIDIA documents them, not recorded): the GPUs are
# the rows of /srv/fake-nvidia/gpus.csv (index, pci.bus_id, name, uncorrected volatile ECC,
# retired pages pending; the index is also the device's minor number); the processes on them the
# rows of /srv/fake-nvidia/apps.csv (gpu_bus_id, pid, process_name, used_gpu_memory), whose memory
# is what memory.used shows; the driver version comes from /srv/fake-nvidia-driver if present.
d=/srv/fake-nvidia
v=$(cat /srv/fake-nvidia-driver 2>/dev/null || echo 550.54.15)
case "$1" in
  --query-gpu=driver_version) awk -v v="$v" 'NF {print v}' "$d/gpus.csv" ;;
  --query-gpu=index,pci.bus_id,name,*) cat "$d/gpus.csv" ;;
  --query-gpu=pci.bus_id,memory.used)
    awk -F', *' 'FILENAME == ARGV[1] {m[$1] += $4; next} NF {print $2 ", " m[$2] + 0}' "$d/apps.csv" "$d/gpus.csv" ;;
  --query-compute-apps=gpu_bus_id,pid,process_name,used_gpu_memory) cat "$d/apps.csv" ;;
  -q) awk -F', *' 'NF {printf "GPU %s\n    Product Name : %s\n    Minor Number : %s\n", $2, $3, $1}' "$d/gpus.csv" ;;
  -L) # as NVML enumerates: only the GPUs this process may open (a job's devices cgroup refuses the
      # others: EPERM; the lab's driverless fake devices answer ENXIO), numbered from 0
      n=0
      while IFS=, read -r i _ name _; do
        err=$({ : <>"/dev/nvidia$i"; } 2>&1) || true
        case $err in *"not permitted"*) continue ;; esac
        printf 'GPU %d: %s (UUID: GPU-00000000-0000-0000-0000-%012d)\n' "$n" "${name# }" "$i"
        n=$((n + 1))
      done <"$d/gpus.csv" ;;
  *) echo "nvidia-smi stand-in: unsupported: $*" >&2; exit 2 ;;
esac
"""
APPS = "/srv/fake-nvidia/apps.csv"  # what the nvidia-smi stand-in lists as processes on the GPUs
GPUS_CSV = "".join(f"{i}, 00000000:{0x17 + i:02X}:00.0, NVIDIA A100 80GB PCIe, 0, No\n" for i in range(2))
NVIDIA_RUNTIME = Path(__file__).with_name("stand_ins") / "nvidia-container-runtime"
LIBCUDA_C = Path(__file__).with_name("stand_ins") / "libcuda.c"


# The build notes' MPI program (shared/seeds), unchanged: pi by the midpoint rule, 10^7 intervals.
CALC_PI = """\
from mpi4py import MPI
from math   import pi as PI
from numpy  import array

def comp_pi(n, myrank=0, nprocs=1):
    h = 1.0 / n
    s = 0.0
    for i in range(myrank + 1, n + 1, nprocs):
        x = h * (i - 0.5)
        s += 4.0 / (1.0 + x**2)
    return s * h

def prn_pi(pi, PI):
    message = "pi is approximately %.16f, error is %.16f"
    print  (message % (pi, abs(pi - PI)))

comm = MPI.COMM_WORLD
nprocs = comm.Get_size()
myrank = comm.Get_rank()

n    = array(0, dtype=int)
pi   = array(0, dtype=float)
mypi = array(0, dtype=float)

if myrank == 0:
    _n = 10000000 # Enter the number of intervals -
    n.fill(_n)
comm.Bcast([n, MPI.INT], root=0)
_mypi = comp_pi(n, myrank, nprocs)
mypi.fill(_mypi)
comm.Reduce([mypi, MPI.DOUBLE], [pi, MPI.DOUBLE],
            op=MPI.SUM, root=0)
if myrank == 0:
    prn_pi(pi, PI)
"""
# The notes' submit script, unchanged but for the output file's name.
PI_JOB = """\
#!/bin/bash
#SBATCH --ntasks=8
#SBATCH -N2
#SBATCH -o pi-%j.out
cd $SLURM_SUBMIT_DIR
mpiexec -n 8 python3 calc.py
"""
HELLO_C = r"""#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size, len;
    char host[MPI_MAX_PROCESSOR_NAME];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    int sum = 0;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d on %s sum %d\n", rank, size, host, sum);
    MPI_Finalize();
    return 0;
}
"""


NVIDIA_CTK = """#!/bin/bash
# nvidia-ctk stand-in: the NVIDIA container toolkit cannot run without a GPU.
echo "NVIDIA Container Toolkit CLI version 1.17.0"
"""


def stack(workers: int, **slurm: Any) -> dict[str, Any]:
    hosts = [
        {
            "name": "head",
            "address": SSH_ADDR["head"],
            "sshUser": "root",
            "hostKey": hostkeys.public("head"),
            "profile": "epyc-7502p-256g",
            "roles": ["storage", "slurm-head"],
            "containerAddress": CTR_ADDR["head"],
        },
    ] + [
        {
            "name": f"w{i}",
            "address": SSH_ADDR[f"w{i}"],
            "sshUser": "root",
            "hostKey": hostkeys.public(f"w{i}"),
            "profile": "a100x2-80g",
            "roles": ["storage", "gpu-worker"] if i <= 2 else ["gpu-worker"],
            "containerAddress": CTR_ADDR[f"w{i}"],
        }
        for i in range(1, workers + 1)
    ] + [
        {  # a CPU-only compute node (the CPU-only profile; the notes' Pis in the dev stack)
            "name": "c1",
            "address": SSH_ADDR["c1"],
            "sshUser": "root",
            "hostKey": hostkeys.public("c1"),
            "profile": "epyc-7502p-256g",
            "roles": ["cpu-worker"],
            "containerAddress": CTR_ADDR["c1"],
        },
        {
            "name": "login",
            "address": SSH_ADDR["login"],
            "sshUser": "root",
            "hostKey": hostkeys.public("login"),
            "profile": "epyc-7502p-256g",
            "roles": ["login"],
            "containerAddress": CTR_ADDR["login"],
        }
    ]
    return {
        "hpc:environment": "prod",  # cgroup enforcement (ConstrainDevices) on, as in production
        "hpc:network": labmod.stack_network(NET),
        "hpc:hosts": hosts,
        "hpc:storage": {"replica": 3, "mountPoint": "/srv/gfsv"},
        "hpc:slurm": {
            "clusterName": "itest",
            "statePath": "/srv/hpc/state",
            "dbPath": "/srv/hpc/mariadb",
            "partitions": [{"name": "gpu", "default": True}, {"name": "cpu", "kind": "cpu"}],
            "health": {"epilogWaitSeconds": EPILOG_WAIT_S},
        }
        | slurm,
        "hpc:k3s": {"version": "v1.31.4+k3s1"},
        "hpc:backup": {"enabled": True, "target": BACKUP_REPO, "paths": ["home"], "exclude": ["*/.cache"]},
        "hpc:inference": {"models": []},
        "hpc:racks": None,
        "hpc:hfToken": None,
        "hpc:groups": [{"name": "ml", "gid": 30001}, {"name": "vision", "gid": 30002}],
        "hpc:users": [
            {
                "name": u,
                "uid": uid,
                "group": "ml",
                "groups": ["vision"] if u == "bob" else [],
                "sshKeys": [hostkeys.public(f"user-{u}")],
            }
            for u, uid in USERS.items()
        ],
    }


def _owner(record: plan.Record) -> str:
    return (record.parent or "").rsplit("::", 1)[-1]


class Planned:
    """The Slurm part of one plan: remote steps and container records."""

    def __init__(self, workers: int, config: dict[str, Any] | None = None, **slurm: Any):
        self.result = plan.run("dev", config or stack(workers, **slurm))
        parents = ("hpc:slurm:SlurmHead", "hpc:compute:GpuWorker", "hpc:compute:CpuWorker", "hpc:compute:JobChecks",
                   "hpc:host:HostPreflight",
                   "hpc:slurm:LoginNode", "hpc:people:People", "hpc:backup:Backups", "hpc:slurm:SmokeTest")  # fmt: skip
        self.steps = {s.name: s for s in steps(self.result, parents)}
        self.containers = {
            plain(r.inputs["hostname"]): r for r in self.result.of_type("docker:index/container:Container")
        }
        # a host's image and network are children of its component, which is named after the host
        self.images = {_owner(r): r for r in self.result.of_type("docker:index/image:Image")}
        self.networks = {_owner(r): r for r in self.result.of_type("docker:index/network:Network")}

    def head_steps(self) -> list[Step]:
        later = {"head-preflight-check", "head-accounts", "head-homes", SMOKE_TEST, *AFTER_THE_HEAD}
        return [s for s in self.steps.values() if s.name.startswith("head-") and s.name not in later]


class Cluster:
    """The lab's hosts with a Docker engine each, and the plan's containers running on them."""

    def __init__(
        self, lab: labmod.Lab, builder: docker_lab.Builder, hosts: list[str] = HOSTS, login: str = CTR_ADDR["login"]
    ):
        self.lab = lab
        self.hosts = hosts
        self.login_address = login  # the login container's address: where researchers SSH to
        self.builder = builder
        self.d = lab.dir / "slurm"
        self.d.mkdir(mode=0o755)
        self.shared = self.d / "shared"
        self.daemons: dict[str, docker_lab.Dockerd] = {}
        self.loaded: dict[str, set[str]] = {}
        self.smoke: subprocess.CompletedProcess[str] | None = None  # the smoke test's run at deployment

    def prepare(self) -> None:
        """Per host: private /etc/slurm; the shared volume at /srv/gfsv (home, as ClientMount
        makes it); fake GPUs and nvidia-smi on workers; a dockerd whose
        socket is the host's default (/run/docker.sock) and the test's."""
        (self.shared / "home" / "jobs").mkdir(parents=True)
        (self.shared / "home" / "jobs").chmod(0o777)
        # Docker's embedded DNS forwards what it cannot answer (slurmctld looks up every peer's
        # name) to the host's resolvers, which no lab host can reach: each lookup would outlast
        # Slurm's 10 s message timeout. The hosts' resolver is the lab's NXDOMAIN server.
        resolv = self.d / "resolv.conf"
        resolv.write_text(f"nameserver {self.lab.clients['cl']}\n")  # the client namespace: NXDOMAIN server
        for host in self.hosts:
            h = self.d / host
            (h / "etc-slurm").mkdir(parents=True)
            self.lab.on(host, ["bash", "-c", f"""set -e
mkdir -p /etc/slurm && mount --bind {h}/etc-slurm /etc/slurm
mount --bind {resolv} /etc/resolv.conf
mkdir -p /srv/gfsv && mount --bind {self.shared} /srv/gfsv
"""])  # fmt: skip
            gpu = host.startswith("w")
            self.lab.on(host, ["bash", "-c", HOST_DEV, "hostdev", str(h / "hostdev"), "gpu" if gpu else "cpu"])
            if gpu:
                for tool, text in (("nvidia-smi", NVIDIA_SMI), ("nvidia-ctk", NVIDIA_CTK)):
                    shim = self.lab.dir / host / "shim" / tool
                    shim.write_text(text)
                    shim.chmod(0o755)
                write_gpus = ('mkdir -p /srv/fake-nvidia && printf %s "$1" >/srv/fake-nvidia/gpus.csv && : >"$2" '
                              '&& cp "$3" /srv/fake-nvidia/libcuda.so.1')  # fmt: skip
                self.lab.on(host, ["bash", "-c", write_gpus, "gpus", GPUS_CSV, APPS, str(self.libcuda())])
            runtime = ["--add-runtime", f"nvidia={NVIDIA_RUNTIME}"] if host.startswith("w") else []
            daemon = docker_lab.Dockerd(h / "docker", holder=self.lab.hosts[host].holder,
                                        listen=["unix:///run/docker.sock"], extra=runtime)  # fmt: skip
            self.daemons[host] = daemon.start()
            self.loaded[host] = set()

    def libcuda(self) -> Path:
        """The libcuda.so.1 stand-in (tests/integration/stand_ins/libcuda.c), compiled once per lab."""
        out = self.d / "libcuda.so.1"
        if not out.exists():
            subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", str(out), str(LIBCUDA_C)],
                           check=True, capture_output=True, text=True)  # fmt: skip
        return out

    def deploy(self, planned: Planned, host: str, replace: bool = False) -> None:
        """What `pulumi up` does for a host's Docker resources: image, network, container."""
        daemon = self.daemons[host]
        image = planned.images[host]
        tag = plain(image.inputs)["imageName"]
        if tag not in self.loaded[host]:
            daemon.load_as(self.builder.image(image), tag)
            self.loaded[host].add(tag)
        if not daemon.api.networks(names=[plain(planned.networks[host].inputs)["name"]]):
            daemon.create_network(planned.networks[host])
        daemon.run_container(planned.containers[host], replace=replace)

    def in_head(self, cmd: str) -> tuple[int, str]:
        return self.daemons["head"].exec("slurm-head", cmd, workdir=JOBS)

    def in_worker(self, host: str, cmd: str) -> tuple[int, str]:
        return self.daemons[host].exec("slurm-worker", cmd)

    def idle(self) -> set[str]:
        rc, out = self.in_head("sinfo -h -N -t idle -o %N")
        return set(out.split()) if rc == 0 else set()

    def responding(self) -> set[str]:
        """Nodes in service whose slurmd answers (no '*' suffix, not down or drained)."""
        rc, out = self.in_head("sinfo -h -N -o '%N %t'")
        lines = [line.split() for line in out.splitlines()] if rc == 0 else []
        return {n for n, state in lines if state in ("idle", "mix", "alloc")}

    def slurmd_pid(self, host: str) -> str:
        return self.in_worker(host, "cat /run/slurmd.pid")[1].strip()

    def diagnostics(self) -> str:
        """The containers' logs and the controller's view, for a failed setup."""
        out = [self.in_head("sinfo -N; scontrol show nodes | grep -E 'NodeName|State|Reason'")[1]]
        for host, daemon in self.daemons.items():
            for c in daemon.api.containers(all=True):
                out.append(f"--- {host} {c['Names']} {c['Status']}\n" + daemon.api.logs(c["Id"], tail=25).decode())
        return "\n".join(out)

    def stop(self) -> None:
        for daemon in self.daemons.values():
            daemon.stop()


def run_head_steps(lab: labmod.Lab, planned: Planned) -> dict[str, str]:
    out = {}
    for s in planned.head_steps():
        stdin = s.stdin
        if s.name == "head-slurm-conf" and stdin is not None:
            stdin += OVERRIDE
        out[s.name] = lab.ssh(s.host, s.create, stdin=stdin, host_key=s.host_key).stdout
    return out


@contextlib.contextmanager
def running(c: Cluster, builder: docker_lab.Builder | None = None) -> Iterator[None]:
    """The lab up with the NXDOMAIN resolver its containers use; on a failure the cluster's
    diagnostics printed; whatever happened, everything this started (and ``builder``) stopped."""
    resolver = None
    try:
        c.lab.up()
        resolver = docker_lab.nxdomain_resolver(f"{c.lab.prefix}-cl")
        yield
    except Exception:
        print(c.diagnostics())
        raise
    finally:
        c.stop()
        if builder is not None:
            builder.stop()
        if resolver is not None:
            resolver.terminate()
            resolver.wait(10)
        c.lab.down()


@pytest.fixture(scope="module")
def planned() -> Planned:
    return Planned(workers=2)


@pytest.fixture(scope="module")
def builder(tmp_path_factory):
    b = docker_lab.Builder(tmp_path_factory.mktemp("builder"))
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="module")
def cluster(planned, builder):
    labmod.require(*TOOLS)
    lab = labmod.Lab(HOSTS, net=NET)
    c = Cluster(lab, builder)
    with running(c):
        c.prepare()
        for host in ("head", "w1", "w2", "c1", "login"):  # Docker on container hosts, NVIDIA toolkit on GPU hosts
            out = run_step(lab, planned.steps[f"{host}-preflight-check"]).stdout
            assert f"hpc: {host} is ready: Debian GNU/Linux 12 (bookworm), user root docker " in out, out
            run_step(lab, planned.steps[f"{host}-accounts"])  # the same users and ids on every host
        first = run_head_steps(lab, planned)
        assert all(o.rstrip().endswith("hpc: result=changed") for o in first.values()), first
        for w in ("w1", "w2"):
            run_step(lab, planned.steps[f"{w}-gpu-preflight"])
        for w in ("w1", "w2", "c1"):
            run_step(lab, planned.steps[f"{w}-munge-key-file"])
            for name in NODE_FILES:
                run_step(lab, planned.steps[f"{w}-{name}"])
        c.deploy(planned, "head")
        labmod.wait_until(lambda: c.in_head("scontrol ping")[1].count("is UP") == 1, "slurmctld", 120)
        for w in ("w1", "w2", "c1"):
            c.deploy(planned, w)
        labmod.wait_until(lambda: c.idle() == {"w1", "w2", "c1"}, "w1, w2 and c1 idle", 120)
        for name in ("head-homes", *AFTER_THE_HEAD, "login-munge-key-file"):
            run_step(lab, planned.steps[name])
        c.deploy(planned, "login")
        labmod.wait_until(lambda: c.daemons["login"].health("slurm-login") == "healthy", "the login node", 150)
        c.smoke = run_step(lab, planned.steps[SMOKE_TEST])
        yield c


def test_images_are_built_from_the_plan_records(cluster, planned, builder):
    for host in ("head", "w1", "w2"):
        tag = plain(planned.images[host].inputs)["imageName"]
        assert tag.endswith(":" + image_hash("head" if host == "head" else "worker"))
        size = cluster.daemons[host].image_size(tag)
        print(f"{tag}: {size / 2**20:.0f} MiB; built in {builder.timings.get(tag, 0):.0f} s (0: from the cache)")
    rc, out = cluster.in_head("slurmctld -V; sinfo -V")
    assert rc == 0 and out.split() == ["slurm-wlm", "24.11.5", "slurm-wlm", "24.11.5"], out


def test_head_steps_write_secrets_with_owner_and_mode(cluster):
    for host in ("head", "w1", "w2"):  # every Slurm host has the key on its own disk, none on the shared volume
        key = cluster.lab.ssh(host, "stat -c '%a %u:%g %s' /etc/hpc-cluster/munge/munge.key").stdout.split()
        assert key == ["400", "0:0", "1024"]  # root's: uid 991 may be another account on a site's host
        assert cluster.lab.ssh(host, "stat -c '%a %u:%g' /etc/hpc-cluster/munge").stdout.split() == ["700", "0:0"]
        as_991 = cluster.lab.ssh(host, "setpriv --reuid=991 --regid=991 --clear-groups head -c1 "
                                       "/etc/hpc-cluster/munge/munge.key", check=False)  # fmt: skip
        assert as_991.returncode != 0 and "Permission denied" in as_991.stderr, as_991
    assert not list(cluster.shared.rglob("munge.key"))
    assert cluster.lab.ssh("head", "stat -c '%a %u' /etc/slurm/slurmdbd.conf").stdout.split() == ["600", "64030"]
    rc, conf = cluster.in_head("cat /etc/slurm/slurmdbd.conf")
    assert rc == 0 and "StoragePass=" in conf and "@@" not in conf
    rc, ids = cluster.in_head("stat -c '%U %a' /etc/munge/munge.key")
    assert ids.strip() == "munge 400"  # the image's munge account owns the key the host wrote


def test_second_run_of_the_head_steps_changes_nothing(cluster, planned):
    for name, out in run_head_steps(cluster.lab, planned).items():
        assert out.rstrip().endswith("hpc: result=unchanged"), f"{name}:\n{out}"


def test_containers_bring_every_node_to_idle_configless(cluster):
    assert cluster.idle() == {"w1", "w2", "c1"}
    node = cluster.in_head("scontrol show node w1")[1]
    assert "CPUTot=32" in node and "RealMemory=253255" in node and "Gres=gpu:a100:2" in node
    assert f"NodeAddr={CTR_ADDR['w1']}" in node
    head_conf = cluster.in_head("cat /etc/slurm/slurm.conf")[1]
    for w in ("w1", "w2"):  # the workers have no slurm.conf of their own: they fetched it
        assert cluster.in_worker(w, "test -e /etc/slurm/slurm.conf")[0] != 0
        assert cluster.in_worker(w, "cat /var/spool/slurmd/conf-cache/slurm.conf")[1] == head_conf


def test_srun_runs_on_both_nodes(cluster):
    rc, out = cluster.in_head("srun -N2 hostname")
    assert rc == 0, out
    assert sorted(out.split()) == ["w1", "w2"]


def test_a_cpu_only_node_runs_jobs_in_its_own_partition(cluster):
    rc, out = cluster.in_head("srun -p cpu -N1 bash -c 'hostname; ls /dev | grep -c ^nvidia || true'")
    assert rc == 0 and out.split() == ["c1", "0"], out  # no GPU device in a CPU node's container
    node = cluster.in_head("scontrol show node c1")[1]
    assert "Gres=(null)" in node and "Partitions=cpu" in node
    assert cluster.in_head("sinfo -h -p gpu -o %N")[1].strip() == "w[1-2]"  # GPU jobs never land on it


def test_gpu_gres_is_allocated_and_confined(cluster):
    rc, both = cluster.in_head("srun -N1 --gres=gpu:a100:2 bash -c 'echo $CUDA_VISIBLE_DEVICES'")
    assert rc == 0, both
    assert both.strip() == "0,1"
    probe = "echo $CUDA_VISIBLE_DEVICES; head -c1 /dev/nvidia0 2>&1; head -c1 /dev/nvidia1 2>&1; true"
    rc, one = cluster.in_head(f"srun -N1 -w w2 --gres=gpu:a100:1 bash -c '{probe}'")
    assert rc == 0, one
    assert one.splitlines()[0] == "0"
    # nvidia0 is allowed (no driver behind it), nvidia1 is blocked by the devices cgroup
    assert "'/dev/nvidia0' for reading: No such device or address" in one
    assert "'/dev/nvidia1' for reading: Operation not permitted" in one


def test_gpus_are_roots_on_the_host_and_a_users_job_still_gets_its_own(cluster):
    """The GPU preflight made the device files 0660 root:root on the host (and NVreg_DeviceFileMode
    for the driver's next load): alice cannot open a GPU there; in the worker container her job
    opens the one Slurm gave it and not the other (the devices cgroup)."""
    for host in ("w1", "w2"):
        modes = cluster.lab.ssh(host, "stat -c '%a %U:%G' /dev/nvidia0 /dev/nvidia1 /dev/nvidiactl").stdout.split()
        assert modes == ["660", "root:root"] * 3, (host, modes)
        conf = cluster.lab.ssh(host, "cat /etc/modprobe.d/90-hpc-cluster-nvidia.conf").stdout
        assert "NVreg_DeviceFileUID=0 NVreg_DeviceFileGID=0 NVreg_DeviceFileMode=0660" in conf
    direct = cluster.lab.ssh("w1", "runuser -u alice -- head -c1 /dev/nvidia0", check=False)
    assert direct.returncode != 0 and "Permission denied" in direct.stderr, direct
    probe = "echo $CUDA_VISIBLE_DEVICES; id -un; head -c1 /dev/nvidia0 2>&1; head -c1 /dev/nvidia1 2>&1; true"
    job = f"sbatch --wait --parsable -w w1 --gres=gpu:a100:1 -o gpu-%j.out --wrap '{probe}'"
    sub = ssh_login(cluster, "alice", job)
    assert sub.returncode == 0, sub.stderr
    out = (cluster.shared / "home" / "alice" / f"gpu-{sub.stdout.strip()}.out").read_text()
    assert out.splitlines()[:2] == ["0", "alice"], out
    assert "'/dev/nvidia0' for reading: No such device or address" in out  # opened: no driver behind it
    assert "'/dev/nvidia1' for reading: Operation not permitted" in out  # not hers: the devices cgroup


def test_a_job_cannot_write_to_the_cgroup_tree(cluster):
    """slurmd keeps CAP_SYS_ADMIN and a writable cgroup tree; a job (run as its user) gets neither:
    it can neither raise its own memory limit nor touch another cgroup."""
    probe = (
        "cg=$(find /sys/fs/cgroup/memory -path \"*/job_$SLURM_JOB_ID/memory.limit_in_bytes\" | head -n1); "
        "echo found=$cg; echo 99999999999 > $cg 2>&1; echo 1 > /sys/fs/cgroup/memory/memory.swappiness 2>&1; "
        "grep CapEff /proc/self/status; true"
    )
    # submitted by a researcher (alice, from hpc:users), not by root
    rc, out = cluster.daemons["head"].exec("slurm-head", f"cd /tmp && srun -N1 -w w1 --mem=100M bash -c '{probe}'",
                                           user=str(USERS["alice"]))  # fmt: skip
    assert rc == 0, out
    assert "found=/sys/fs/cgroup/memory/" in out and out.count("Permission denied") == 2, out
    assert "CapEff:\t0000000000000000" in out, out  # no capability at all inside the job


def ssh_login(cluster, user: str, cmd: str, key_of: str | None = None, *opts: str):  # type: ignore[no-untyped-def]
    """SSH to the login node's container from the lab's client, as a researcher would."""
    key = hostkeys.key_file(f"user-{key_of or user}")
    argv = ["ip", "netns", "exec", f"{cluster.lab.prefix}-cl", "ssh", "-i", str(key), "-o", "IdentitiesOnly=yes",
            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
            "-o", "ConnectTimeout=10", *opts, f"{user}@{cluster.login_address}", cmd]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=180)


def test_a_researcher_logs_in_with_their_key_and_runs_a_job_as_themselves(cluster):
    who = ssh_login(cluster, "alice", "id -un; id -u; pwd")
    assert who.returncode == 0, who.stderr
    assert who.stdout.split() == ["alice", str(USERS["alice"]), "/home/alice"]
    sub = ssh_login(cluster, "alice", "sbatch --parsable -N1 -o job-%j.out --wrap 'id -un; id -u; hostname'")
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip()
    out = cluster.shared / "home" / "alice" / f"job-{job}.out"
    labmod.wait_until(lambda: out.exists() and out.read_text().count("\n") >= 3, "the job's output", 90)
    user, uid, node = out.read_text().split()
    assert (user, uid) == ("alice", str(USERS["alice"])) and node in {"w1", "w2"}
    assert (out.stat().st_uid, out.parent.stat().st_uid) == (USERS["alice"], USERS["alice"])
    assert oct(out.parent.stat().st_mode & 0o777) == "0o700"  # the home the stack made: private

    def accounted() -> bool:
        row = cluster.in_head(f"sacct -a -n -X -P -j {job} -o User,Account,State")[1].strip()
        return row == "alice|ml|COMPLETED"

    labmod.wait_until(accounted, "sacct to show alice's job in account ml", 60)
    other = ssh_login(cluster, "bob", f"cat /home/alice/job-{job}.out")
    assert other.returncode != 0 and "Permission denied" in other.stderr  # bob cannot read alice's output


def test_a_users_job_gets_half_the_nodes_ram_as_dev_shm_and_slurmds_locked_memory_limit(cluster, planned):
    """NCCL and PyTorch's DataLoader need a large /dev/shm and pinned memory (issue 29, point 4).
    The plan gives slurmd's container unlimited memlock; this machine withholds CAP_SYS_RESOURCE,
    so the lab clamps it to the machine's ceiling (docker_lab.lab_ulimit). The job must get
    slurmd's limit, not the submitting shell's (PropagateResourceLimitsExcept=MEMLOCK: here the
    user lowers her own to 1024 KB first), and Docker's 64 MB /dev/shm must be gone."""
    ceiling = docker_lab.memlock_ceiling()
    slurmd_limit = "unlimited" if ceiling < 0 else str(ceiling // 1024)
    memory_mib = {h["name"]: CATALOGUE[h["profile"]].memory_mib for h in stack(2)["hpc:hosts"]}
    in_job = "ulimit -l; df -m --output=size /dev/shm | tail -1; head -c 100M /dev/zero >/dev/shm/x && rm /dev/shm/x"
    in_job += " && echo wrote"
    job = "ulimit -S -l 1024 && ulimit -l && srun -N1 -w {node} -p {part} bash -c '" + in_job + "'"
    for node, part in (("w1", "gpu"), ("c1", "cpu")):
        recorded = plain(planned.containers[node].inputs)
        assert recorded["shmSize"] == memory_mib[node] // 2
        assert recorded["ulimits"] == [{"name": "memlock", "soft": -1, "hard": -1}]
        out = ssh_login(cluster, "alice", job.format(node=node, part=part))
        assert out.returncode == 0, out.stderr
        session, got, shm_mib, wrote = out.stdout.split()
        assert session == "1024"
        assert (got, int(shm_mib), wrote) == (slurmd_limit, memory_mib[node] // 2, "wrote"), out.stdout


def test_no_password_login_no_root_login_no_stranger(cluster):
    password = ssh_login(cluster, "alice", "true", None, "-o", "PreferredAuthentications=password,keyboard-interactive",
                         "-o", "PubkeyAuthentication=no")  # fmt: skip
    assert password.returncode == 255 and "Permission denied (publickey)" in password.stderr
    root = ssh_login(cluster, "root", "true", "alice")
    assert root.returncode == 255 and "Permission denied" in root.stderr
    wrong_key = ssh_login(cluster, "alice", "true", "bob")  # bob's key does not open alice's account
    assert wrong_key.returncode == 255 and "Permission denied" in wrong_key.stderr


def test_a_researchers_own_key_opens_no_host(cluster):
    """From the login node alice can put her key in her own authorized_keys (her home is on the
    shared volume, which every host mounts): no host lets her in, since host accounts have no
    shell and sshd denies the cluster's users; root still logs in, the login node still works."""
    ssh_dir = cluster.shared / "home" / "alice" / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    keys = ssh_dir / "authorized_keys"
    keys.write_text(hostkeys.key_file("user-alice").with_suffix(".pub").read_text())
    for path in (ssh_dir, keys):
        os.chown(path, USERS["alice"], USERS["alice"])
    key = hostkeys.key_file("user-alice")
    for host in ("head", "w1", "c1", "login"):
        assert cluster.lab.ssh(host, "getent passwd alice").stdout.strip().endswith(":/usr/sbin/nologin")
        argv = ["ip", "netns", "exec", f"{cluster.lab.prefix}-cl", "ssh", "-i", str(key), "-o", "IdentitiesOnly=yes",
                "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
                "-o", "ConnectTimeout=10", f"alice@{cluster.lab.hosts[host].address}", "id -un"]  # fmt: skip
        onto = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert onto.returncode == 255 and "Permission denied" in onto.stderr, (host, onto)
        assert "alice" not in onto.stdout
        assert cluster.lab.ssh(host, "id -un").stdout.strip() == "root"
    assert ssh_login(cluster, "alice", "id -un").stdout.strip() == "alice"


def test_each_user_finds_their_own_api_key_and_a_planted_link_redirects_nothing(cluster):
    """The inference tier's key delivery (components/inference/keys.py) on the real head: each
    key lands in its user's home, 0600 and theirs, and its user reads it on the login node while
    the other cannot; a link alice planted where her key goes (to a file only root may write) is
    replaced, never followed, since the step writes as the user; a second run changes nothing;
    the delete takes the keys away and leaves the homes."""
    holders = tuple(api_keys.KeyHolder(u, uid, 30001) for u, uid in USERS.items())
    step = api_keys.delivery("head", "/srv/gfsv/home", holders)
    secret = {u: f"k{uid}" + "x" * 34 for u, uid in USERS.items()}
    stdin = api_keys.stdin_lines(holders, [secret[h.name] for h in holders])
    lab = cluster.lab
    lab.ssh("head", "echo roots > /srv/planted-target && chmod 0644 /srv/planted-target")
    where = cluster.shared / "home" / "alice" / ".config" / "hpc-cluster"
    where.mkdir(parents=True, exist_ok=True)
    (where / "api-key").symlink_to("/srv/planted-target")
    for path in (where.parent, where, where / "api-key"):
        os.lchown(path, USERS["alice"], 30001)
    try:
        first = lab.ssh("head", wrap(step.create), stdin=stdin).stdout
        assert "the API key of alice in ~alice/.config/hpc-cluster/api-key" in first, first
        assert first.rstrip().endswith("hpc: result=changed"), first
        assert lab.ssh("head", "cat /srv/planted-target").stdout == "roots\n"  # the link was not followed
        for user, uid in USERS.items():
            path = f"/srv/gfsv/home/{user}/.config/hpc-cluster/api-key"
            assert lab.ssh("head", f"stat -c '%F %a %u' {path}").stdout.split() == ["regular", "file", "600", str(uid)]
            assert ssh_login(cluster, user, f"cat ~/{api_keys.HOME_KEY_FILE}").stdout.strip() == secret[user]
        other = ssh_login(cluster, "bob", f"cat ~alice/{api_keys.HOME_KEY_FILE}")
        assert other.returncode != 0 and secret["alice"] not in other.stdout, other
        again = lab.ssh("head", wrap(step.create), stdin=stdin).stdout
        assert again.rstrip().endswith("hpc: result=unchanged"), again
        assert step.delete is not None
        lab.ssh("head", wrap(step.delete))
        for user in USERS:
            gone = lab.ssh("head", f"test -e /srv/gfsv/home/{user}/{api_keys.HOME_KEY_FILE}", check=False)
            assert gone.returncode == 1
            assert lab.ssh("head", f"test -d /srv/gfsv/home/{user}", check=False).returncode == 0
    finally:
        lab.ssh("head", "rm -f /srv/planted-target")
        for user in USERS:
            lab.ssh("head", f"rm -rf /srv/gfsv/home/{user}/.config/hpc-cluster")


def test_a_sudo_deploy_user_needs_docker_of_its_own_on_docker_hosts(cluster):
    """Pulumi's Docker provider connects as the login user, without sudo: the preflight asks Docker
    as that user and stops naming the fix (the docker group, root-equivalent, or sshUser: root)."""
    from components.preflight import preflight
    from components.scripts import wrap

    grant = "echo 'ops ALL=(ALL) NOPASSWD:ALL' >/etc/sudoers.d/ops && chmod 0440 /etc/sudoers.d/ops"
    add = f"useradd -m -d /srv/home-ops -s /bin/bash ops && usermod -p '*' ops && {grant}"
    cluster.lab.on("c1", ["bash", "-c", add])
    try:
        check = wrap(preflight("c1", docker=True, nvidia=False).create)
        stopped = cluster.lab.ssh("c1", check, user="ops", check=False)
        assert stopped.returncode != 0
        last = stopped.stderr.strip().splitlines()[-1]
        assert last.startswith("hpc: error: c1: Docker answers root but not ops, the user Pulumi's Docker provider")
        assert "permission denied" in last and "add ops to the docker group (root-equivalent" in last, last
        cluster.lab.on("c1", ["usermod", "-aG", "docker", "ops"])
        ready = cluster.lab.ssh("c1", check, user="ops")
        assert "hpc: c1 is ready: Debian GNU/Linux 12 (bookworm), user ops docker " in ready.stdout
    finally:
        cluster.lab.on("c1", ["bash", "-c", "userdel -r ops 2>/dev/null; rm -f /etc/sudoers.d/ops"], check=False)


def test_a_worker_without_dev_fuse_is_stopped_and_a_closed_one_is_named(cluster, planned):
    """The worker preflight: no /dev/fuse stops it (its container would not start), a 0600 one
    (no udev) is a warning: Apptainer then unpacks each image per job."""
    check = planned.steps["c1-preflight-check"]
    cluster.lab.on("c1", ["mv", "/dev/fuse", "/dev/fuse.away"])  # the lab host's own /dev (HOST_DEV)
    try:
        missing = run_step(cluster.lab, check, check=False)
    finally:
        cluster.lab.on("c1", ["mv", "/dev/fuse.away", "/dev/fuse"])
    assert missing.returncode != 0
    assert missing.stderr.strip().splitlines()[-1] == (
        "hpc: error: c1: /dev/fuse is missing (the Slurm worker container passes it to users' Apptainer images): "
        "load the fuse module (modprobe fuse) and list it in /etc/modules-load.d"
    )
    cluster.lab.on("c1", ["chmod", "600", "/dev/fuse"])
    try:
        closed = run_step(cluster.lab, check)
    finally:
        cluster.lab.on("c1", ["chmod", "666", "/dev/fuse"])
    assert "hpc: warning: c1: /dev/fuse is mode 600, not 666 (udev's default)" in closed.stderr
    assert "docker " in closed.stdout and " fuse" in closed.stdout


def test_associations_come_from_the_stack_and_are_enforced(cluster, planned):
    stranger = cluster.daemons["head"].exec("slurm-head", "cd /tmp && sbatch --wrap true", user="65534")
    assert stranger[0] != 0 and "Invalid account or account/partition combination" in stranger[1], stranger
    again = run_step(cluster.lab, planned.steps["head-slurm-accounting"]).stdout
    assert again.rstrip().endswith("hpc: result=unchanged")
    without_bob = Planned(workers=2)
    users = [u for u in stack(2)["hpc:users"] if u["name"] != "bob"]
    without_bob.result = plan.run("dev", stack(2) | {"hpc:users": users})
    step = next(s for s in steps(without_bob.result, ("hpc:slurm:SlurmHead",)) if s.name == "head-slurm-accounting")
    out = run_step(cluster.lab, step).stdout
    assert "hpc: changed: removed bob from account ml" in out
    refused = ssh_login(cluster, "bob", "sbatch --wrap true")
    assert refused.returncode != 0 and "Invalid account" in refused.stderr
    restored = run_step(cluster.lab, planned.steps["head-slurm-accounting"]).stdout
    assert "hpc: changed: added bob to account ml" in restored


def test_sbatch_output_on_the_shared_volume_and_sacct_gpu_tres(cluster):
    rc, job = cluster.in_head(
        "sbatch --parsable -N1 --gres=gpu:a100:1 --mem=100M "
        "--wrap 'echo job-ran-on $(hostname) gpus=$CUDA_VISIBLE_DEVICES'"
    )
    assert rc == 0, job
    job = job.strip()
    out = cluster.shared / "home" / "jobs" / f"slurm-{job}.out"
    labmod.wait_until(lambda: out.exists() and "job-ran-on" in out.read_text(), "batch output", 60)
    assert re.match(r"job-ran-on w[12] gpus=0$", out.read_text().strip())

    def accounted() -> bool:
        rows = cluster.in_head(f"sacct -a -n -X -P -j {job} -o JobID,State,AllocTRES")[1]
        return "COMPLETED" in rows and "gres/gpu=1" in rows

    labmod.wait_until(accounted, "sacct to show the job with its GPU", 60)


def test_a_one_gpu_job_sees_exactly_its_gpu_through_nvidia_smi_and_cuda(cluster):
    """The worker image's CUDA device query (images/slurm/cuda-query.c, the driver API through
    libcuda.so.1, here the stand-in the lab's NVIDIA runtime mounts) and nvidia-smi see what the
    job's devices cgroup allows: one GPU of the node's two, or both."""
    show = "nvidia-smi -L; hpc-cuda-query"
    for gpus in (1, 2):
        out = ssh_login(cluster, "alice", f"srun -p gpu -N1 --gres=gpu:{gpus} bash -c '{show}'")
        assert out.returncode == 0, out.stdout + out.stderr
        listed = [line for line in out.stdout.splitlines() if line.startswith("GPU ")]
        assert [line.split(":")[0] for line in listed] == [f"GPU {i}" for i in range(gpus)], out.stdout
        assert f"cuda: driver 12040, {gpus} device(s)" in out.stdout, out.stdout
        assert out.stdout.count("cuda: device ") == gpus and "NVIDIA A100 80GB PCIe, 81920 MiB" in out.stdout


def _verdict(run: subprocess.CompletedProcess[str]) -> dict[str, dict[str, str]]:
    return dict(json.loads(run.stdout.strip().splitlines()[-1]))


def test_the_smoke_test_ran_a_real_job_per_partition_at_deployment(cluster):
    assert cluster.smoke is not None and cluster.smoke.stderr.rstrip().endswith("hpc: result=unchanged")
    verdict = _verdict(cluster.smoke)
    assert {p: (v["result"], v["node"][:1]) for p, v in verdict.items()} == {
        "gpu": ("ok", "w"), "cpu": ("ok", "c"), "mpi": ("ok", "w")}  # fmt: skip
    assert verdict["mpi"]["node"] == "w1,w2" and verdict["mpi"]["partition"] == "gpu"  # across both GPU nodes
    wanted = {  # job name, partition, node list as sacct writes it, whether it holds a GPU
        "gpu": ("hpc-smoke-test-gpu", "gpu", verdict["gpu"]["node"], True),
        "cpu": ("hpc-smoke-test-cpu", "cpu", verdict["cpu"]["node"], False),
        "mpi": ("hpc-smoke-test-mpi-gpu", "gpu", "w[1-2]", False),
    }
    for key, (name, part, nodes, gpu) in wanted.items():

        def accounted(job: str = verdict[key]["job"], want: tuple[str, ...] = (name, part, nodes), gpu: bool = gpu):
            row = cluster.in_head(f"sacct -n -X -P -j {job} -o JobName,Partition,NodeList,State,AllocTRES")[1]
            fields = row.strip().split("|")
            return fields[:4] == [*want, "COMPLETED"] and ("gres/gpu=1" in fields[4]) == gpu

        labmod.wait_until(accounted, f"sacct to show the {key} smoke job completed on {nodes}", 60)


def test_the_smoke_test_fails_naming_the_partition_and_node_and_a_busy_partition_is_not_a_failure(cluster, planned):
    libcuda = "/srv/fake-nvidia/libcuda.so.1"  # bind-mounted into the worker containers by the runtime
    for w in ("w1", "w2"):  # emptied in place (the mount keeps the inode): the driver's library is broken
        cluster.lab.on(w, ["bash", "-c", f"cp {libcuda} {libcuda}.keep && : >{libcuda}"])
    try:
        broken = run_step(cluster.lab, planned.steps[SMOKE_TEST], check=False)
    finally:
        for w in ("w1", "w2"):
            cluster.lab.on(w, ["bash", "-c", f"cat {libcuda}.keep >{libcuda} && rm {libcuda}.keep"])
    assert broken.returncode != 0
    last = broken.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"hpc: error: smoke test: partition gpu, node w[12]: job \d+ failed \(srun exit 1\): "
                        r"cuda: error: dlopen: \S*libcuda.so.1: file too short", last), last  # fmt: skip
    assert {p: v["result"] for p, v in _verdict(broken).items()} == {"gpu": "failed", "cpu": "ok", "mpi": "ok"}

    # An MPI job whose rank on w2 cannot start (mpi4py gone from that node) fails, naming w2.
    quick = wrap(slurm_steps.smoke_test("head", [("gpu", True), ("cpu", False)], "gpu", wait_s=6).create)
    mpi4py = "/usr/lib/python3/dist-packages/mpi4py"
    assert cluster.in_worker("w2", f"mv {mpi4py} {mpi4py}.away")[0] == 0
    try:
        no_mpi = cluster.lab.ssh("head", quick, check=False)
    finally:
        assert cluster.in_worker("w2", f"mv {mpi4py}.away {mpi4py}")[0] == 0
    assert no_mpi.returncode != 0
    last = no_mpi.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"hpc: error: smoke test: partition gpu \(MPI job\), node w2: job \d+ failed "
                        r"\(srun exit \d+\): ModuleNotFoundError: No module named 'mpi4py'", last), last  # fmt: skip
    assert {p: v["result"] for p, v in _verdict(no_mpi).items()} == {"gpu": "ok", "cpu": "ok", "mpi": "failed"}

    # With one GPU node drained the MPI job is skipped, not failed: the step passes.
    cluster.in_head("scontrol update nodename=w2 state=drain reason=smoke-test-maintenance")
    try:
        one_node = cluster.lab.ssh("head", quick)
    finally:
        cluster.in_head("scontrol update nodename=w2 state=resume")
    assert _verdict(one_node)["mpi"]["result"] == "skipped", one_node.stdout
    assert "hpc: partition gpu has 1 node in service: MPI across two nodes not checked" in one_node.stderr
    labmod.wait_until(lambda: "w2" in cluster.idle(), "w2 back in service", 60)

    # A busy partition is waited for (here 6 s), then reported, and the step passes.
    rc, job = cluster.in_head("sbatch --parsable -p cpu -w c1 --exclusive --wrap 'sleep 300'")
    assert rc == 0, job
    try:
        labmod.wait_until(lambda: cluster.in_head(f"squeue -h -j {job.strip()} -o %T")[1].strip() == "RUNNING",
                          "the job filling c1", 60)  # fmt: skip
        busy = cluster.lab.ssh("head", quick)
    finally:
        cluster.in_head(f"scancel {job.strip()}")
    assert {p: v["result"] for p, v in _verdict(busy).items()} == {"gpu": "ok", "cpu": "busy", "mpi": "ok"}
    assert "hpc: partition cpu is busy (Resources) after 6 s: not checked" in busy.stderr

    # A partition with no node in service fails, naming it.
    labmod.wait_until(lambda: "c1" in cluster.idle(), "c1 idle again", 60)
    cluster.in_head("scontrol update nodename=c1 state=drain reason=smoke-test-maintenance")
    try:
        drained = cluster.lab.ssh("head", quick, check=False)
    finally:
        cluster.in_head("scontrol update nodename=c1 state=resume")
    assert drained.returncode != 0
    assert drained.stderr.strip().splitlines()[-1] == (
        "hpc: error: smoke test: partition cpu, node none: no node in service (sinfo states: drain)"
    )
    labmod.wait_until(lambda: "c1" in cluster.idle(), "c1 back in service", 60)


def _put(cluster, user: str, path: str, text: str) -> None:  # type: ignore[no-untyped-def]
    """Write a file into a user's home as that user, from the login node (base64: no quoting)."""
    data = base64.b64encode(text.encode()).decode()
    out = ssh_login(cluster, user, f"mkdir -p $(dirname {path}) && echo {data} | base64 -d > {path}")
    assert out.returncode == 0, out.stderr


def test_the_build_notes_mpi_pi_job_runs_across_two_workers_from_the_login_node(cluster):
    _put(cluster, "alice", "mpi/calc.py", CALC_PI)
    _put(cluster, "alice", "mpi/pi.sh", PI_JOB)
    # Test-only: the lab's nodes claim a profile's 32 cores on a 2-core machine, so a job's cpuset
    # holds fewer cores than its tasks and OpenMPI refuses to bind 4 ranks to 2 ("binding more
    # processes than cpus"); on a real node the allocation's cores are all there.
    overload = "PRTE_MCA_hwloc_default_binding_policy=core:overload-allowed"
    sub = ssh_login(cluster, "alice", f"cd mpi && sbatch --parsable --export=ALL,{overload} pi.sh")
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip()
    out = cluster.shared / "home" / "alice" / "mpi" / f"pi-{job}.out"

    def finished() -> str:
        state = cluster.in_head(f"sacct -n -X -P -j {job} -o State,NodeList,NTasks")[1].strip()
        return state if state.split("|")[0] in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY") else ""

    state = labmod.wait_until(finished, "the MPI pi job to end", 240)
    text = out.read_text() if out.exists() else "(no output)"
    assert state.split("|")[:2] == ["COMPLETED", "w[1-2]"], f"{state}\n{text}"
    value, error = re.fullmatch(r"pi is approximately (\S+), error is (\S+)", text.strip()).groups()
    assert abs(float(value) - math.pi) < 1e-12 and float(error) < 1e-12, text


def test_srun_mpi_pmix_runs_a_program_compiled_on_the_login_node_across_both_workers(cluster):
    _put(cluster, "alice", "mpi/hello.c", HELLO_C)
    built = ssh_login(cluster, "alice", "cd mpi && mpicc -O2 -o hello hello.c && srun --mpi=list")
    assert built.returncode == 0, built.stderr
    assert "pmix" in built.stdout + built.stderr
    run = ssh_login(cluster, "alice", "srun --mpi=pmix -N2 -n4 mpi/hello")
    assert run.returncode == 0, run.stderr
    lines = sorted(run.stdout.splitlines())
    assert [line.split()[:4] for line in lines] == [["rank", str(r), "of", "4"] for r in range(4)], run.stdout
    assert {line.split()[5] for line in lines} == {"w1", "w2"} and all(line.endswith("sum 6") for line in lines)
    limits = ssh_login(cluster, "alice", "srun -N1 bash -c 'echo $SLURM_MPI_TYPE'")
    assert limits.stdout.strip() == "pmix"  # MpiDefault: a plain srun starts PMIx too


# A researcher's image, from a local root filesystem (no registry here): a shell, a few tools and
# a CUDA program (the node's device query) with the libraries they link, in the user's home.
ROOTFS = r"""set -euo pipefail
r=$1
rm -rf "$r" && mkdir -p "$r/etc"
for b in bash id cat touch hpc-cuda-query; do
  p=$(command -v "$b")
  mkdir -p "$r/bin" && cp "$p" "$r/bin/"
  for l in $(ldd "$p" | grep -o '/[^ ]*'); do mkdir -p "$r$(dirname "$l")" && cp -n "$l" "$r$l"; done
done
echo 'PRETTY_NAME="a researcher image"' >"$r/etc/os-release"
"""
EVIL_IMAGE = """set -e; rm -rf /tmp/evil; cp -a /home/alice/ctr/rootfs /tmp/evil
chown -R root:root /tmp/evil; install -m 4755 /tmp/evil/bin/bash /tmp/evil/bin/rootsh
apptainer -q build -F /home/jobs/evil.sif /tmp/evil; chmod 644 /home/jobs/evil.sif
"""  # root's image, made as root on a node: a setuid-root copy of bash in it
NO_EXTRACT = "Converting SIF file to temporary sandbox"  # Apptainer's words when it cannot mount the SIF


def test_a_users_apptainer_image_runs_as_them_on_its_gpu_and_writes_their_home(cluster):
    _put(cluster, "alice", "ctr/mkroot.sh", ROOTFS)
    build = "srun -p gpu -w w1 bash ctr/mkroot.sh ctr/rootfs && apptainer build ctr/tiny.sif ctr/rootfs"
    made = ssh_login(cluster, "alice", build)
    assert made.returncode == 0, made.stdout + made.stderr
    # In the job: the image's own files, the user's uid, one of the node's two GPUs (nvidia-smi and
    # CUDA, bound in by --nv from the node's driver), the user's home writable. Test-only: the
    # nvidia-smi stand-in reads its GPUs from /srv/fake-nvidia.
    inside = "id -u; cat /etc/os-release; nvidia-smi -L; hpc-cuda-query; echo from-container >$HOME/ctr/written"
    run = ssh_login(cluster, "alice", "srun -p gpu -N1 --gres=gpu:1 apptainer exec --nv -B /srv/fake-nvidia "
                    f"ctr/tiny.sif bash -c '{inside}'")  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[:2] == [str(USERS["alice"]), 'PRETTY_NAME="a researcher image"'], run.stdout
    assert [line.split(":")[0] for line in lines if line.startswith("GPU ")] == ["GPU 0"], run.stdout
    assert "cuda: driver 12040, 1 device(s)" in run.stdout, run.stdout
    assert NO_EXTRACT not in run.stderr, run.stderr  # squashfuse mounted it through /dev/fuse
    written = cluster.shared / "home" / "alice" / "ctr" / "written"
    assert written.read_text() == "from-container\n" and written.stat().st_uid == USERS["alice"]


def test_a_users_container_cannot_make_them_root(cluster):
    """An image with a setuid-root shell (made by root elsewhere), run by alice: she stays herself,
    and neither the setuid bit nor --fakeroot reads a root-only file bound into it (the munge key)."""
    rc, out = cluster.in_worker("w1", EVIL_IMAGE)
    assert rc == 0, out
    keys = "-B /etc/munge -B /etc/hpc-cluster/munge"
    run = f"srun -p gpu -w w1 apptainer exec {keys} /home/jobs/evil.sif /bin/rootsh -p -c"
    setuid = ssh_login(cluster, "alice", f"{run} 'id -u; cat /etc/munge/munge.key /etc/hpc-cluster/munge/munge.key'")
    assert setuid.returncode != 0 and setuid.stdout.split() == [str(USERS["alice"])], setuid.stdout + setuid.stderr
    assert setuid.stderr.count("Permission denied") == 2, setuid.stderr
    fake = ssh_login(cluster, "alice", f"srun -p gpu -w w1 apptainer exec --fakeroot {keys} /home/jobs/evil.sif "
                     "bash -c 'id -u; touch /home/alice/ctr/by-fakeroot; cat /etc/munge/munge.key'")  # fmt: skip
    assert fake.returncode != 0 and fake.stdout.split() == ["0"], fake.stdout + fake.stderr
    assert "Permission denied" in fake.stderr, fake.stderr
    assert (cluster.shared / "home" / "alice" / "ctr" / "by-fakeroot").stat().st_uid == USERS["alice"]


def test_preflight_refuses_an_old_driver_and_a_wrong_gpu_count(cluster, planned):
    step = planned.steps["w1-gpu-preflight"]
    cluster.lab.ssh("w1", "echo 535.104.05 > /srv/fake-nvidia-driver")
    try:
        old = run_step(cluster.lab, step, check=False)
        assert old.returncode != 0
        assert "w1: NVIDIA driver branch R535 is older than R550" in old.stderr
    finally:
        cluster.lab.ssh("w1", "rm -f /srv/fake-nvidia-driver")
    cluster.lab.ssh("w1", "mv /dev/nvidia1 /dev/nvidia1.away")
    try:
        missing = run_step(cluster.lab, step, check=False)
        assert missing.returncode != 0 and "/dev/nvidia1 is missing" in missing.stderr
    finally:
        cluster.lab.ssh("w1", "mv /dev/nvidia1.away /dev/nvidia1")


def test_drain_before_replacement_and_resume_after(cluster, planned):
    drain, resume = planned.steps["w1-drain"], planned.steps["w1-resume"]
    assert drain.host == resume.host == SSH_ADDR["head"]  # they run on the head
    before = cluster.daemons["w1"].api.inspect_container("slurm-worker")["Id"]
    assert "hpc: changed: drained w1" in run_step(cluster.lab, drain).stdout
    state = cluster.in_head("scontrol show node w1")[1]
    assert re.search(r"State=IDLE\+DRAIN", state) and "Reason=hpc-cluster: replacing" in state
    cluster.deploy(planned, "w1", replace=True)  # the container is replaced while drained
    assert cluster.daemons["w1"].api.inspect_container("slurm-worker")["Id"] != before
    assert "hpc: changed: resumed w1" in run_step(cluster.lab, resume).stdout
    labmod.wait_until(lambda: "w1" in cluster.idle(), "w1 idle again", 60)
    assert run_step(cluster.lab, resume).stdout.rstrip().endswith("hpc: result=unchanged")


def test_adding_a_worker_changes_only_the_head_config_and_the_new_worker(cluster, planned):
    bigger = Planned(workers=3)
    before = {r.urn: r for r in planned.result.resources}
    after = {r.urn: r for r in bigger.result.resources}
    changed = sorted(after[u].name for u in before.keys() & after.keys() if after[u].inputs != before[u].inputs)
    # the head's Slurm files; the storage allow-lists (Gluster auth.allow, Ganesha Clients: every host,
    # the export updated in place); Prometheus's targets (reloaded, not restarted); the smoke test
    # (it runs again once the new node is in service)
    assert changed == ["gv0-options", "head-gres-conf", "head-nfs-config", "head-prometheus", "head-slurm-conf",
                       SMOKE_TEST]  # fmt: skip
    added = {after[u].name for u in after.keys() - before.keys()}
    assert added == {"w3", "w3-container", "w3-drain", "w3-gpu-preflight", "w3-health-check",
                     "w3-job-checks", "w3-gpu-prolog", "w3-gpu-epilog",
                     "w3-image", "w3-macvlan", "w3-resume",
                     "w3-sysctl", "w3-docker", "w3-mount", "w3-mount-fstab", "w3-munge-key-file",
                     "w3-preflight", "w3-preflight-check", "w3-accounts", "w3-exporters"}  # fmt: skip
    pids = {w: cluster.slurmd_pid(w) for w in ("w1", "w2")}
    for name in ("head-slurm-conf", "head-gres-conf"):
        s = bigger.steps[name]
        stdin = (s.stdin or "") + (OVERRIDE if name == "head-slurm-conf" else "")
        out = cluster.lab.ssh(s.host, s.create, stdin=stdin, host_key=s.host_key).stdout
        assert "hpc: changed: scontrol reconfigure" in out
        assert "restarted" not in out  # Slurm 24.11 adds nodes on reconfigure
    run_step(cluster.lab, bigger.steps["w3-gpu-preflight"])
    run_step(cluster.lab, bigger.steps["w3-munge-key-file"])
    for name in NODE_FILES:
        run_step(cluster.lab, bigger.steps[f"w3-{name}"])
    run_step(cluster.lab, bigger.steps["w3-accounts"])
    cluster.deploy(bigger, "w3")
    labmod.wait_until(lambda: cluster.idle() == {"w1", "w2", "w3", "c1"}, "w3 to join", 120)
    assert {w: cluster.slurmd_pid(w) for w in ("w1", "w2")} == pids  # the other workers were not restarted
    for w in ("w1", "w2"):  # the running workers fetched the new node list (configless)
        assert "NodeName=w3" in cluster.in_worker(w, "cat /var/spool/slurmd/conf-cache/slurm.conf")[1]
    rc, out = cluster.in_head("srun -N3 hostname")
    assert rc == 0 and sorted(out.split()) == ["w1", "w2", "w3"], out
    verdict = _verdict(run_step(cluster.lab, bigger.steps[SMOKE_TEST]))
    assert {p: v["result"] for p, v in verdict.items()} == {"gpu": "ok", "cpu": "ok", "mpi": "ok"}


def test_replacements_roll_one_node_at_a_time_and_a_long_job_bounds_the_wait(cluster):
    """Three workers replaced at once (as pulumi up runs them in parallel) with maxUnavailable 1:
    drain, replace, resume, one node at a time; the node running a long job is resumed after
    drainTimeoutSeconds and its step fails naming the job, which keeps running."""
    timeout = 45
    rolling = Planned(workers=3, maxUnavailable=1, drainTimeoutSeconds=timeout)
    rc, job = cluster.in_head("sbatch --parsable -w w3 --wrap 'sleep 900'")
    assert rc == 0, job
    job = job.strip()
    labmod.wait_until(lambda: cluster.in_head(f"squeue -h -j {job} -o %T")[1].strip() == "RUNNING", "the job", 60)
    ours = rf"Reason={re.escape(slurm_steps.DRAIN_REASON)}"
    most, done = [0], threading.Event()

    def watch() -> None:
        while not done.is_set():
            out = cluster.in_head("scontrol -o show nodes")[1]
            most[0] = max(most[0], len(re.findall(ours, out)))
            time.sleep(0.3)

    results: dict[str, Any] = {}

    def replace(w: str) -> None:
        drained = run_step(cluster.lab, rolling.steps[f"{w}-drain"], check=False)
        results[w] = drained
        if drained.returncode == 0:
            cluster.deploy(rolling, w, replace=True)
            run_step(cluster.lab, rolling.steps[f"{w}-resume"])

    watcher = threading.Thread(target=watch)
    watcher.start()
    workers = [threading.Thread(target=replace, args=(w,)) for w in ("w1", "w2", "w3")]
    try:
        for t in workers:
            t.start()
        for t in workers:
            t.join(600)
    finally:
        done.set()
        watcher.join(10)
    assert most[0] == 1, f"{most[0]} nodes were drained at once"
    for w in ("w1", "w2"):
        assert results[w].returncode == 0 and f"hpc: changed: drained {w}" in results[w].stdout, results[w].stderr
    failed = results["w3"]
    assert failed.returncode != 0
    assert f"w3 still runs jobs after {timeout}s: {job}(root:wrap); resumed it" in failed.stderr, failed.stderr
    assert cluster.in_head(f"squeue -h -j {job} -o %T")[1].strip() == "RUNNING"  # the job was never touched
    assert "DRAIN" not in cluster.in_head("sinfo -h -N -n w3 -o %T")[1].upper()
    labmod.wait_until(lambda: {"w1", "w2"} <= cluster.idle(), "w1 and w2 back", 120)
    cluster.in_head(f"scancel {job}")
    labmod.wait_until(lambda: cluster.idle() == {"w1", "w2", "w3", "c1"}, "all idle", 120)


def test_a_head_replacement_keeps_running_jobs_and_a_racing_drain_waits_for_the_controller(cluster, planned):
    """The head container replaced (what a head image change does) while a job runs on w2: the job
    keeps running and completes (its state is on the head's disk, the job on the worker). A drain of
    w2 started while the controller is gone waits for it (never "not in Slurm yet: nothing to
    drain", which deleted busy workers), then drains w2 once the job is done; the resume works."""
    rc, job = cluster.in_head("sbatch --parsable -w w2 --wrap 'sleep 40'")
    assert rc == 0, job
    job = job.strip()
    labmod.wait_until(lambda: cluster.in_head(f"squeue -h -j {job} -o %T")[1].strip() == "RUNNING", "the job", 60)
    head = cluster.daemons["head"].api
    head.stop("slurm-head", timeout=None)  # the old container is gone first (delete before create)
    result: dict[str, Any] = {}
    racing = threading.Thread(target=lambda: result.update(drain=run_step(cluster.lab, planned.steps["w2-drain"],
                                                                          check=False)))  # fmt: skip
    racing.start()
    time.sleep(8)
    assert racing.is_alive(), result["drain"].stdout + result["drain"].stderr  # waiting, not deciding blind
    cluster.deploy(planned, "head", replace=True)  # the new container, on the same state directory
    racing.join(300)
    drained = result["drain"]
    assert drained.returncode == 0, drained.stderr
    assert "not in Slurm yet" not in drained.stdout and "hpc: changed: drained w2" in drained.stdout
    row = cluster.in_head(f"sacct -n -X -P -j {job} -o State,ExitCode")[1].strip()
    assert row == "COMPLETED|0:0", row  # the drain waited for it: the job ran to its end
    assert "hpc: changed: resumed w2" in run_step(cluster.lab, planned.steps["w2-resume"]).stdout
    labmod.wait_until(lambda: "w2" in cluster.idle(), "w2 idle again", 120)


def test_a_head_restart_keeps_the_controllers_latest_state(cluster):
    """docker restart (what a munge-key rotation or a directory change does) right after a change:
    the entrypoint stops slurmctld first, which saves its state, so the restarted controller
    knows the node was resumed (stopping every daemon at once lost that: a node came back drained)."""
    head = cluster.daemons["head"].api
    rc, out = cluster.in_head("scontrol update nodename=w2 state=drain reason=state-test && "
                              "scontrol update nodename=w2 state=resume")  # fmt: skip
    assert rc == 0, out
    since = int(time.time())
    stop_s = head.inspect_container("slurm-head")["Config"]["StopTimeout"]  # what `docker restart` waits
    assert stop_s >= 60, stop_s
    head.restart("slurm-head", timeout=stop_s)
    labmod.wait_until(lambda: cluster.in_head("scontrol ping")[1].count("is UP") == 1, "slurmctld back", 120)
    labmod.wait_until(lambda: "w2" in cluster.responding(), "w2 back", 120)
    assert "DRAIN" not in cluster.in_head("scontrol show node w2")[1]
    logs = head.logs("slurm-head", since=since).decode()
    order = [logs.index(f"hpc-entrypoint: stopped {d}") for d in ("slurmctld", "slurmdbd", "mariadbd", "munged")]
    assert order == sorted(order), logs[-2000:]


def _moved(**paths: Any) -> Planned:
    return Planned(workers=2, **paths)


def test_a_moved_state_path_is_refused_then_migrated_with_the_history(cluster, planned):
    """hpc:slurm.statePath/dbPath changed on a cluster with history: refused in words, nothing
    changed and the head still running; with migrate the head is stopped, the data copied and
    compared, the old directories kept, and the new head container on the new paths still knows
    the earlier job (accounting) and keeps numbering jobs after it (controller state)."""
    rc, job = cluster.in_head("sbatch --parsable -w w1 --wrap true")
    assert rc == 0, job
    job = job.strip()
    done = lambda: cluster.in_head(f"sacct -n -X -P -j {job} -o State")[1].strip() == "COMPLETED"  # noqa: E731
    labmod.wait_until(done, "the job in accounting", 60)
    paths = {"statePath": "/srv/hpc/state2", "dbPath": "/srv/hpc/mariadb2"}
    refused = run_step(cluster.lab, _moved(**paths).steps["head-slurm-state"], check=False)
    assert refused.returncode == 1, refused.stdout
    assert ("hpc: error: hpc:slurm.statePath moved from /srv/hpc/state to /srv/hpc/state2: /srv/hpc/state holds "
            "the cluster's history; set hpc:slurm.migrate: true") in refused.stderr, refused.stderr  # fmt: skip
    assert cluster.lab.on("head", ["test", "-e", "/srv/hpc/state2"], check=False).returncode == 1  # nothing changed
    head = cluster.daemons["head"].api
    assert head.inspect_container("slurm-head")["State"]["Running"]
    migrating = _moved(**paths, migrate=True)
    try:
        out = run_step(cluster.lab, migrating.steps["head-slurm-state"]).stdout
        assert "hpc: changed: stopped slurm-head to move its data" in out, out
        for old, new in (("state", "state2"), ("mariadb", "mariadb2")):
            assert re.search(rf"copied /srv/hpc/{old} to /srv/hpc/{new} \([1-9][0-9]* entries, compared\)", out), out
        assert "hpc: changed" not in run_step(cluster.lab, migrating.steps["head-slurm-state"]).stdout  # idempotent
        cluster.deploy(migrating, "head", replace=True)
        binds = {m["Destination"]: m["Source"] for m in head.inspect_container("slurm-head")["Mounts"]}
        assert "/srv/hpc/state2" in binds.values() and "/srv/hpc/mariadb2" in binds.values(), binds
        up = lambda: cluster.in_head("scontrol ping")[1].count("is UP") == 1  # noqa: E731
        labmod.wait_until(up, "slurmctld on the new path", 120)
        assert cluster.in_head(f"sacct -n -X -P -j {job} -o State")[1].strip() == "COMPLETED"  # the history moved
        labmod.wait_until(lambda: {"w1", "w2"} <= cluster.responding(), "the workers back", 120)
        rc, later = cluster.in_head("sbatch --parsable --wait -w w2 --wrap true")
        assert rc == 0 and int(later.strip()) > int(job), (job, later)  # the controller's job counter moved too
    finally:  # back to the suite's paths: the old copies are superseded by the moved ones
        cluster.lab.on("head", ["rm", "-rf", "/srv/hpc/state", "/srv/hpc/mariadb"])
        run_step(cluster.lab, Planned(workers=2, migrate=True).steps["head-slurm-state"])
        cluster.deploy(planned, "head", replace=True)
        labmod.wait_until(lambda: cluster.in_head("scontrol ping")[1].count("is UP") == 1, "slurmctld back", 120)
        labmod.wait_until(lambda: {"w1", "w2"} <= cluster.responding(), "the workers back", 120)


def test_rotating_the_munge_key_restarts_the_containers_and_the_cluster_works(cluster):
    """The day-2 recipe (README): a new key (pulumi up --replace on the RandomBytes) reaches every
    Slurm host's munge step at once; each restarts its containers, and the cluster works again."""
    bigger = Planned(workers=3)
    new = base64.b64encode(os.urandom(1024)).decode()
    hosts = ("head", "w1", "w2", "w3", "c1", "login")
    outs: dict[str, str] = {}

    def rotate(host: str) -> None:
        step = dataclasses.replace(bigger.steps[f"{host}-munge-key-file"], stdin=new)
        outs[host] = run_step(cluster.lab, step).stdout

    threads = [threading.Thread(target=rotate, args=(h,)) for h in hosts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert "restarted slurm-head with the new munge key" in outs["head"]
    assert all("restarted slurm-worker with the new munge key" in outs[w] for w in ("w1", "w2", "w3", "c1"))
    assert "restarted slurm-login with the new munge key" in outs["login"]
    nodes = {"w1", "w2", "w3", "c1"}
    try:  # responding again: idle, or mixed where a job requeued by the restart runs
        labmod.wait_until(lambda: cluster.responding() == nodes, "every node back with the new key", 180)
    except TimeoutError:
        print(cluster.diagnostics())
        print(cluster.daemons["head"].api.logs("slurm-head", tail=200).decode())
        raise AssertionError(cluster.in_head("sinfo -N -l; squeue")[1]) from None
    rc, out = cluster.in_head("srun -N3 -p gpu hostname")
    assert rc == 0 and sorted(out.split()) == ["w1", "w2", "w3"], out
    labmod.wait_until(lambda: ssh_login(cluster, "alice", "sinfo -h -o %P").returncode == 0, "the login node", 120)


def test_the_slurm_collector_reports_node_states_and_a_drain(cluster, tmp_path):
    """components/monitoring/collectors/slurm_metrics.sh against the real head container."""
    from components.monitoring.steps import COLLECTORS

    env = {**os.environ, "DOCKER_HOST": f"unix://{cluster.daemons['head'].sock}"}
    out = tmp_path / "slurm.prom"

    def collect() -> str:
        proc = subprocess.run(["bash", str(COLLECTORS / "slurm_metrics.sh"), "slurm-head", str(out)],
                              env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return out.read_text()

    text = collect()
    assert "hpc_slurm_up 1" in text and "hpc_slurmdbd_up 1" in text, text
    for node in ("w1", "w2", "c1"):
        assert f'hpc_slurm_node_down{{node="{node}",state="idle"}} 0' in text, text
        assert f'hpc_slurm_node_drained{{node="{node}"}} 0' in text
    assert 'hpc_slurm_node_gpus{node="w1"} 2' in text and 'hpc_slurm_node_gpus{node="c1"} 0' in text
    rc, msg = cluster.in_head("scontrol update nodename=c1 state=drain reason=collector-test")
    assert rc == 0, msg
    try:
        labmod.wait_until(lambda: 'hpc_slurm_node_drained{node="c1"} 1' in collect(), "c1 drained in the metrics", 30)
    finally:
        cluster.in_head("scontrol update nodename=c1 state=resume")
    labmod.wait_until(lambda: 'hpc_slurm_node_drained{node="c1"} 0' in collect(), "c1 back", 30)


def test_docker_reports_every_container_healthy(cluster):
    for host, name in (("head", "slurm-head"), ("w1", "slurm-worker"), ("w2", "slurm-worker")):
        labmod.wait_until(lambda h=host, n=name: cluster.daemons[h].health(n) == "healthy", f"{host} healthy", 90)


@pytest.mark.parametrize(("mode", "owner"), [(0o644, 0), (0o400, 991)], ids=["readable-by-all", "owned-by-uid-991"])
def test_entrypoint_refuses_a_host_munge_key_not_root_only(cluster, planned, mode, owner):
    bad = cluster.d / f"bad-munge-{mode:o}-{owner}"
    bad.mkdir()
    (bad / "munge.key").write_bytes(os.urandom(1024))
    (bad / "munge.key").chmod(mode)
    os.chown(bad / "munge.key", owner, owner)
    api = cluster.daemons["w3"].api
    tag = plain(planned.images["w1"].inputs)["imageName"]
    binds = {str(bad): {"bind": "/etc/hpc-cluster/munge", "mode": "ro"}}
    created = api.create_container(
        tag, command=["worker"], environment=["SLURM_CONF_SERVER=x:1"],
        host_config=api.create_host_config(binds=binds, network_mode="none"),
    )  # fmt: skip
    api.start(created["Id"])
    assert api.wait(created["Id"], timeout=60)["StatusCode"] != 0
    assert "must be owned by root, mode 0400" in api.logs(created["Id"]).decode()


def test_prod_slurm_conf_is_accepted_by_the_24_11_controller(cluster, planned):
    """The prod stack's rendered slurm.conf (ML-PROD-V4 nodes) in the head image, as head01, on
    the lab's network (nothing can reach the prod addresses: no route leaves the lab).

    Test-only rewrites: state and log paths, the controller's address (a lab one), and accounting
    off with the billing weights that need it (on a fresh state directory slurmctld will not start
    without a reachable slurmdbd; accounting is proven above, billing in test_scheduling)."""
    conf = next(
        plain(r.inputs["stdin"]) for r in plan.run("prod").of_type("command:remote:Command")
        if r.name == "head01-slurm-conf"
    )  # fmt: skip
    prod_hosts = yaml.safe_load((plan.ROOT / "Pulumi.prod.yaml").read_text())["config"]["hpc:hosts"]
    assert any(h["name"] == "head01" for h in prod_hosts)
    for key_, value in {"StateSaveLocation": "/tmp/state", "SlurmctldLogFile": "/tmp/slurmctld.log",
                        "AccountingStorageType": "accounting_storage/none"}.items():  # fmt: skip
        conf = re.sub(rf"^{key_}=.*$", f"{key_}={value}", conf, flags=re.M)
    # without slurmdbd, 24.11 refuses gres/gpu as a TRES ("slurmdbd is required to run with TRES
    # gres/gpu"), and the partitions' billing weights name it: both go with accounting (the weights
    # are proven on a real slurmdbd in test_scheduling)
    conf = re.sub(r"^AccountingStorage(Host|Port|TRES)=.*\n", "", conf, flags=re.M)
    conf, n = re.subn(r" TRESBillingWeights=\S+", "", conf)
    assert n == 2
    # the controller's own address: one of the lab's, on the head host's macvlan network
    conf, n = re.subn(r"^SlurmctldHost=head01\(.*\)$", f"SlurmctldHost=head01({PROD_CTLD})", conf, flags=re.M)
    assert n == 1
    d = cluster.d / "prod-ctld"
    d.mkdir()
    (d / "slurm.conf").write_text(conf)
    api = cluster.daemons["head"].api
    net = plain(planned.networks["head"].inputs)["name"]
    script = (
        "set -e; install -d -o slurm /tmp/state; dd if=/dev/urandom of=/tmp/k bs=1024 count=1 2>/dev/null;"
        " chown munge /tmp/k; chmod 400 /tmp/k; install -d -o munge /run/munge;"
        " runuser -u munge -- munged --key-file=/tmp/k; (slurmctld -D -f /conf/slurm.conf &>/tmp/ctld.out &);"
        " for i in $(seq 100); do grep -q 'Running as primary controller' /tmp/slurmctld.log 2>/dev/null && break;"
        " sleep 0.5; done;"
        " grep -c fatal /tmp/slurmctld.log || true; grep fatal /tmp/slurmctld.log || true;"
        " SLURM_CONF=/conf/slurm.conf scontrol -o show node gpu01"
    )
    created = api.create_container(
        plain(planned.images["head"].inputs)["imageName"], entrypoint=["bash", "-c", script], hostname="head01",
        host_config=api.create_host_config(binds={str(d): {"bind": "/conf", "mode": "ro"}}, network_mode=net),
        networking_config=api.create_networking_config({net: api.create_endpoint_config(ipv4_address=PROD_CTLD)}),
    )  # fmt: skip
    api.start(created["Id"])
    assert api.wait(created["Id"], timeout=120)["StatusCode"] == 0, api.logs(created["Id"]).decode()
    out = api.logs(created["Id"]).decode()
    assert out.splitlines()[0] == "0", out  # no fatal line in the controller's log
    assert "CPUTot=256" in out and "RealMemory=2033213" in out and "gpu:h100:8" in out, out


def test_every_rendered_option_is_documented_by_slurm_24_11(cluster, planned):
    """Every key and plugin of every file the renderers write (this cluster, dev and prod, cgroup
    enforcement on and off) is an entry of the 24.11 man pages in the head image, none of them
    documented as deprecated; and the running daemons logged no deprecation either."""
    files: dict[str, list[str]] = {"slurm.conf": [], "gres.conf": [], "cgroup.conf": [], "slurmdbd.conf": []}
    for result in (planned.result, plan.run("dev"), plan.run("prod")):
        for r in result.of_type("command:remote:Command"):
            for name in ("slurm.conf", "gres.conf", "cgroup.conf"):
                if r.name.endswith("-" + name.replace(".", "-")):
                    files[name].append(plain(r.inputs["stdin"]))
    files["slurmdbd.conf"].append(slurm_render.slurmdbd_conf("head"))
    assert all(len(v) >= 1 for v in files.values()) and len(files["slurm.conf"]) == 3
    for name, texts in files.items():
        rc, page = cluster.in_head(f"zcat /usr/share/man/man5/{name}.5.gz")
        assert rc == 0 and ".TH" in page, page[:200]
        for text in texts:
            assert slurm_docs.problems(text, page) == [], name
    for host, log in (("head", "slurmctld.log"), ("w1", "slurmd.log"), ("w2", "slurmd.log")):
        daemon = cluster.daemons[host]
        name = "slurm-head" if host == "head" else "slurm-worker"
        rc, text = daemon.exec(name, f"cat /var/log/slurm/{log}")
        assert rc == 0 and text.strip(), f"{host}: no {log}"
        assert not [line for line in text.splitlines() if slurm_docs.DEPRECATED.search(line)], text


# ---- node health (issue 24) -----------------------------------------------------------------
HEALTH_DIR = "/etc/hpc-cluster/health"
HEALTH = f"{HEALTH_DIR}/hpc-healthcheck"
SMI_QUERY = (
    "nvidia-smi --query-gpu=index,pci.bus_id,name,ecc.errors.uncorrected.volatile.total,retired_pages.pending "
    "--format=csv,noheader"
)


def node_state(cluster: Cluster, node: str) -> tuple[str, str]:
    out = cluster.in_head(f"scontrol -o show node {node}")[1]
    state = re.search(r" State=(\S+)", out)
    reason = re.search(r" Reason=(.*?) \[", out)
    assert state, out
    return state.group(1), reason.group(1) if reason else ""


def test_gpu_workers_run_on_the_nvidia_runtime_with_exactly_slurms_gpus(cluster):
    gres = cluster.in_head("cat /etc/slurm/gres.conf")[1]
    for w in ("w1", "w2"):
        info = cluster.daemons[w].api.inspect_container(slurm_steps.WORKER_CONTAINER)
        env = dict(e.split("=", 1) for e in info["Config"]["Env"])
        assert info["HostConfig"]["Runtime"] == "nvidia"
        assert (env["NVIDIA_VISIBLE_DEVICES"], env["NVIDIA_DRIVER_CAPABILITIES"]) == ("0,1", "compute,utility")
        assert f"NodeName={w} Name=gpu Type=a100 File=/dev/nvidia[0-1]" in gres  # the same GPUs, same order
        rc, out = cluster.in_worker(w, SMI_QUERY)  # the runtime (stand-in) put nvidia-smi in the container
        assert rc == 0 and out.count("NVIDIA A100") == 2, out
    c1 = cluster.daemons["c1"].api.inspect_container(slurm_steps.WORKER_CONTAINER)
    assert c1["HostConfig"]["Runtime"] == "runc"  # a CPU node asks for no GPU


def test_every_node_runs_the_health_check_and_is_healthy(cluster):
    conf = cluster.in_head("scontrol show config")[1]
    assert re.search(rf"^HealthCheckProgram\s*=\s*{HEALTH}$", conf, re.M), conf
    assert re.search(r"^HealthCheckNodeState\s*=\s*CYCLE,ANY$", conf, re.M), conf  # Slurm prints CYCLE first
    for w in ("w1", "w2", "c1"):  # the real kernel log (/dev/kmsg), munge, the shared volume, free space
        rc, out = cluster.in_worker(w, HEALTH)
        assert rc == 0, f"{w}: {out}"
    assert cluster.idle() >= {"w1", "w2", "c1"}


def test_a_lost_gpu_drains_the_node_holds_jobs_off_it_and_recovery_resumes_it(cluster):
    fixture = "/srv/fake-nvidia/gpus.csv"
    one_gpu = f"cp {fixture} {fixture}.all && head -n 1 {fixture}.all >{fixture}.one && mv {fixture}.one {fixture}"
    cluster.lab.ssh("w2", one_gpu)
    try:
        rc, out = cluster.in_worker("w2", HEALTH)
        assert rc == 1, out
        state, reason = node_state(cluster, "w2")
        assert "DRAIN" in state, state
        assert reason == "hpc-health: GPU count: the profile says 2, nvidia-smi shows 1 (00000000:17:00.0)"
        rc, job = cluster.in_head("sbatch --parsable -p gpu -w w2 --wrap hostname")
        assert rc == 0, job
        job = job.strip()
        labmod.wait_until(
            lambda: "ReqNodeNotAvail" in cluster.in_head(f"squeue -h -j {job} -o %r")[1], "the job held off w2", 60
        )
        assert cluster.in_head(f"squeue -h -j {job} -o %T")[1].strip() == "PENDING"
    finally:
        cluster.lab.ssh("w2", f"mv {fixture}.all {fixture}")
    rc, out = cluster.in_worker("w2", HEALTH)
    assert rc == 0 and "resumed (was: hpc-health: GPU count" in out, out
    labmod.wait_until(lambda: cluster.in_head(f"squeue -h -j {job}")[1].strip() == "", "the held job ran", 60)
    assert "DRAIN" not in node_state(cluster, "w2")[0]


def test_the_health_check_leaves_an_admins_drain_alone(cluster):
    rc, out = cluster.in_head("scontrol update nodename=w1 state=drain reason='fan replacement'")
    assert rc == 0, out
    try:
        assert cluster.in_worker("w1", HEALTH)[0] == 0
        state, reason = node_state(cluster, "w1")
        assert "DRAIN" in state and reason == "fan replacement"
    finally:
        cluster.in_head("scontrol update nodename=w1 state=resume")


def bus_of(index: int) -> str:
    return f"00000000:{0x17 + index:02X}:00.0"  # as GPUS_CSV numbers them


def test_every_node_checks_a_jobs_gpus_before_and_after_it(cluster):
    conf = cluster.in_head("scontrol show config")[1]
    for key, value in (("Prolog", f"{HEALTH_DIR}/prolog-hpc-gpu"), ("Epilog", f"{HEALTH_DIR}/epilog-hpc-gpu"),
                       ("PrologFlags", "Alloc"), ("SchedulerParameters", ".*nohold_on_prolog_fail.*")):  # fmt: skip
        # Slurm 24.11 prints the first program of a list as Prolog[0]
        assert re.search(rf"^{key}(\[0\])?\s*=\s*{value}$", conf, re.M), (key, conf)
    for w in ("w1", "w2", "c1"):  # a CPU node has them too: slurm.conf is the same everywhere
        rc, out = cluster.in_worker(w, f"test -x {HEALTH_DIR}/prolog-hpc-gpu -a -x {HEALTH_DIR}/epilog-hpc-gpu")
        assert rc == 0, f"{w}: {out}"


def test_a_busy_gpu_refuses_the_job_drains_the_node_and_the_job_runs_elsewhere(cluster):
    rc, blocker = cluster.in_head("sbatch --parsable -p gpu -w w1 --gres=gpu:a100:2 --wrap 'sleep 600'")
    assert rc == 0, blocker
    blocker = blocker.strip()
    job = ""
    try:
        labmod.wait_until(lambda: cluster.in_head(f"squeue -h -j {blocker} -o %T")[1].strip() == "RUNNING",
                          "w1 taken by a job holding both its GPUs", 60)  # fmt: skip
        cluster.lab.ssh("w2", f"echo '{bus_of(1)}, 4242, python3, 20480' >{APPS}")  # no job of Slurm's
        rc, job = cluster.in_head("sbatch --parsable -p gpu --gres=gpu:a100:2 --wrap 'echo ran-on $(hostname)'")
        assert rc == 0, job
        job = job.strip()
        labmod.wait_until(lambda: "DRAIN" in node_state(cluster, "w2")[0], "the prolog to drain w2", 90)
        assert (
            node_state(cluster, "w2")[1]
            == f"hpc-gpu: before job {job}: GPU 1 ({bus_of(1)}) runs pid 4242 python3 (20480 MiB)"
        )

        def requeued() -> str:
            view = cluster.in_head(f"scontrol -o show job {job}")[1]
            return view if " JobState=PENDING " in view else ""

        view = labmod.wait_until(requeued, "the refused job requeued", 60)
        assert " Restarts=1 " in view, view  # requeued, not lost
        assert "Held" not in view, view  # nohold_on_prolog_fail: waiting for a node, not for an admin
        cluster.in_head(f"scancel {blocker}")
        labmod.wait_until(lambda: "COMPLETED" in cluster.in_head(f"sacct -n -X -P -j {job} -o State")[1],
                          "the refused job to run on w1", 240)  # fmt: skip
        assert cluster.in_head(f"sacct -n -X -P -j {job} -o NodeList")[1].strip() == "w1"
        out = cluster.shared / "home" / "jobs" / f"slurm-{job}.out"
        assert out.read_text().strip() == "ran-on w1"
    finally:
        cluster.in_head(f"scancel {blocker} {job}")
        cluster.lab.ssh("w2", f": >{APPS}")
        cluster.in_head("scontrol update nodename=w2 state=resume")


def test_a_process_left_on_a_jobs_gpu_after_it_ended_drains_the_node(cluster):
    rc, job = cluster.in_head("sbatch --parsable -p gpu -w w1 --gres=gpu:a100:1 --wrap 'echo started; sleep 6'")
    assert rc == 0, job
    job = job.strip()
    try:
        out = cluster.shared / "home" / "jobs" / f"slurm-{job}.out"
        labmod.wait_until(lambda: out.exists() and "started" in out.read_text(), "the job to start", 60)
        detail = cluster.in_head(f"scontrol -d show job {job}")[1]
        index = re.search(r"gpu:a100:1\(IDX:(\d+)\)", detail)
        assert index, detail
        gpu = int(index.group(1))
        cluster.lab.ssh("w1", f"echo '{bus_of(gpu)}, 31337, stuck-worker, 1000' >{APPS}")  # outlives the job
        labmod.wait_until(lambda: "DRAIN" in node_state(cluster, "w1")[0], "the epilog to drain w1", 90)
        assert node_state(cluster, "w1")[1] == (
            f"hpc-gpu: after job {job}, for {EPILOG_WAIT_S}s: "
            f"GPU {gpu} ({bus_of(gpu)}) runs pid 31337 stuck-worker (1000 MiB)"
        )
        # the epilog exits 0: the job's record is its own, not an "Epilog error"
        labmod.wait_until(lambda: "COMPLETED" in cluster.in_head(f"sacct -n -X -P -j {job} -o State")[1],
                          "the job accounted as completed", 60)  # fmt: skip
    finally:
        cluster.lab.ssh("w1", f": >{APPS}")
        cluster.in_head("scontrol update nodename=w1 state=resume")


MONITORING_STEPS = ("head-monitoring-web", "head-alert-drain", "head-alertmanager")  # the plan's order
POST_ALERT = r"""set -euo pipefail
p=$(cat /etc/prometheus/hpc-web/password)
curl -fsS --cacert /etc/prometheus/hpc-web/cert.pem -K <(printf 'user = "admin:%s"\n' "$p") \
  -H 'Content-Type: application/json' --data-binary @- https://127.0.0.1:9093/api/v2/alerts
"""


def test_a_drain_alert_goes_from_alertmanager_to_the_receiver_that_drains_the_node(cluster, planned):
    """The real path of issue 24's drain alerts: the plan's Alertmanager (its own config, TLS and
    login) routes an alert labelled drain="true" to the plan's receiver on the head, which drains
    the node in the real controller; nothing resumes it."""
    monitoring = {s.name: s for s in steps(planned.result, ("hpc:monitoring:Monitoring",))}
    chosen = [monitoring[n] for n in MONITORING_STEPS]
    try:
        for s in chosen:
            run_step(cluster.lab, s)
        alert = [{
            "labels": {"alertname": "GpuXidError", "drain": "true", "host": "w1", "gpu": "0",
                       "severity": "critical"},  # as the rule labels it: the GPU host is the Slurm node
            "annotations": {"summary": "GPU 0 on w1 reported XID 79"},
        }]  # fmt: skip
        cluster.lab.ssh("head", POST_ALERT, stdin=json.dumps(alert))
        labmod.wait_until(lambda: "DRAIN" in node_state(cluster, "w1")[0], "Alertmanager's drain of w1", 60)
        assert node_state(cluster, "w1")[1] == "hpc-alert: GpuXidError GPU 0: GPU 0 on w1 reported XID 79"
        log = cluster.lab.ssh("head", "cat /run/hpc-alert-drain.log").stdout
        assert "w1: drained" in log, log
        assert cluster.in_worker("w1", HEALTH)[0] == 0  # a passing health check leaves the alert's drain alone
        assert "DRAIN" in node_state(cluster, "w1")[0]
    finally:
        for s in reversed(chosen):
            run_step(cluster.lab, s, delete=True, check=False)
        cluster.in_head("scontrol update nodename=w1 state=resume")


# ---- backups and restores (README "Backups and restores") --------------------------------------
def _backup(cluster: Cluster, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return cluster.lab.ssh("head", " ".join(["hpc-backup", *args]), check=check, timeout=300)


def _backup_metrics(cluster: Cluster) -> dict[str, float]:
    text = cluster.lab.on("head", ["cat", "/var/lib/prometheus/node-exporter/hpc_backup.prom"]).stdout
    return {k: float(v) for k, v in (line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))}


def test_the_backup_step_installs_a_timer_and_a_repository_that_holds_no_plaintext(cluster, planned):
    assert "hpc: result=unchanged" in run_step(cluster.lab, planned.steps["head-backup"]).stdout
    assert cluster.lab.on("head", ["test", "-f", f"{BACKUP_REPO}/config"], check=False).returncode == 0
    modes = cluster.lab.on("head", ["stat", "-c", "%a %U", "/etc/hpc-cluster/backup/password"]).stdout.split()
    assert modes == ["600", "root"], modes
    password = planned.steps["head-backup"].stdin
    assert password and password not in cluster.lab.on("head", ["cat", "/etc/hpc-cluster/backup/backup.conf"]).stdout
    found = cluster.lab.on("head", ["grep", "-rlF", password, BACKUP_REPO], check=False)
    assert found.returncode == 1 and not found.stdout  # the password is in no file of the repository


def test_drills_restore_the_accounting_db_and_a_users_file_as_of_a_named_time(cluster):
    """Run a job, back up, drop the accounting DB: sacct forgets the job; restore-db: sacct shows
    it again. A user's file changed after the first backup and then deleted comes back as it was
    at the named time. No file of the repository holds the file's text (restic encrypts)."""
    rc, job = cluster.in_head("sbatch --parsable -w w1 --wrap true")
    assert rc == 0, job
    job = job.strip()
    accounted = lambda: cluster.in_head(f"sacct -n -X -P -j {job} -o State")[1].strip() == "COMPLETED"  # noqa: E731
    labmod.wait_until(accounted, "the job in accounting", 60)
    notes = cluster.shared / "home" / "alice-drill" / "notes.txt"
    notes.parent.mkdir(exist_ok=True)
    notes.write_text("drill version one\n")
    (notes.parent / ".cache").mkdir(exist_ok=True)
    (notes.parent / ".cache" / "big").write_text("excluded\n")
    started = time.monotonic()
    first = _backup(cluster, "run")
    backup_s = time.monotonic() - started
    assert "hpc-backup: every backup succeeded" in first.stdout, first.stdout + first.stderr
    metrics = _backup_metrics(cluster)
    for kind in ("db", "state", "volume"):
        assert metrics[f'hpc_backup_last_run_success{{kind="{kind}"}}'] == 1, metrics
        assert metrics[f'hpc_backup_size_bytes{{kind="{kind}"}}'] > 0, metrics
    time.sleep(1.1)  # snapshot times have whole seconds: the named time falls between the two
    between = cluster.lab.on("head", ["date", "+%Y-%m-%d %H:%M:%S"]).stdout.strip()
    time.sleep(1.1)
    notes.write_text("drill version two\n")
    assert "every backup succeeded" in _backup(cluster, "run").stdout
    listed = _backup(cluster, "snapshots", "volume").stdout
    assert listed.count("volume") >= 2, listed

    rc, out = cluster.in_head("mariadb -e 'DROP DATABASE slurm_acct_db'")
    assert rc == 0, out
    assert not accounted()  # the history is gone
    started = time.monotonic()
    restored = _backup(cluster, "restore-db")
    assert "restored slurm_acct_db from" in restored.stdout, restored.stdout + restored.stderr
    labmod.wait_until(accounted, "sacct to show the job again after restore-db", 120)
    restore_db_s = time.monotonic() - started

    notes.unlink()
    started = time.monotonic()
    back = _backup(cluster, "restore-path", "home/alice-drill/notes.txt", f"'{between}'")
    restore_file_s = time.monotonic() - started
    assert "restored /srv/gfsv/home/alice-drill/notes.txt from snapshot" in back.stdout, back.stdout + back.stderr
    assert notes.read_text() == "drill version one\n"  # as it was at the named time, not the latest
    shown = cluster.lab.on("head", ["grep", "-rl", "drill version", BACKUP_REPO], check=False)
    assert shown.returncode == 1, shown.stdout  # encrypted: the text is in no file of the repository
    tree = _backup(cluster, "restore-state", "latest", "/srv/restored-state")
    assert "controller state of snapshot" in tree.stdout, tree.stdout + tree.stderr
    assert cluster.lab.on("head", ["test", "-s", "/srv/restored-state/srv/hpc/state/job_state"],
                          check=False).returncode == 0  # fmt: skip
    print(f"backup drill: first backup {backup_s:.1f} s, restore-db to sacct {restore_db_s:.1f} s, "
          f"restore-path {restore_file_s:.1f} s")  # fmt: skip


def test_a_full_or_unreachable_target_fails_loudly_and_raises_the_failure_metric(cluster):
    """A target out of space (the repository on a filesystem 512 KiB from full) and one that refuses the
    connection: the run fails quoting restic, the failed kinds read 0 (BackupFailing), and the
    last success time stays where it was (BackupStale counts from it)."""
    before = _backup_metrics(cluster)['hpc_backup_last_success_timestamp_seconds{kind="volume"}']
    big = cluster.shared / "home" / "alice-drill" / "big.bin"
    big.write_bytes(os.urandom(4 * 1024 * 1024))
    lab = cluster.lab
    # the repository as it is, on a filesystem with 512 KiB to spare
    lab.on("head", ["sh", "-c", f"s=$(du -sk {BACKUP_REPO} | cut -f1) && cp -a {BACKUP_REPO} /srv/backup-copy && "
                    f"mount -t tmpfs -o size=$((s + 512))k full {BACKUP_REPO} && "
                    f"cp -a /srv/backup-copy/. {BACKUP_REPO}/"])  # fmt: skip
    try:
        full = _backup(cluster, "run", check=False)
        assert full.returncode == 1, full.stdout
        assert "volume: backup failed" in full.stderr and "no space left on device" in full.stderr.lower(), full.stderr
        metrics = _backup_metrics(cluster)
        assert metrics['hpc_backup_last_run_success{kind="volume"}'] == 0
        assert metrics['hpc_backup_last_success_timestamp_seconds{kind="volume"}'] == before
    finally:
        lab.on("head", ["umount", BACKUP_REPO])
        lab.on("head", ["rm", "-rf", "/srv/backup-copy"])
        big.unlink()
    conf = "/etc/hpc-cluster/backup/backup.conf"
    lab.on("head", ["cp", conf, f"{conf}.drill"])
    try:
        lab.on("head", ["sh", "-c", f"printf '%s\\n' \"REPOSITORY=sftp:nobody@127.0.0.1:/nowhere\" "
                        f"\"SFTP_COMMAND='ssh -o BatchMode=yes -o ConnectTimeout=5 -p 1 nobody@127.0.0.1 -s sftp'\" "
                        f">>{conf}"])  # fmt: skip
        gone = _backup(cluster, "run", check=False)
        assert gone.returncode == 1 and "failed: db state volume" in gone.stderr, gone.stderr
        assert "connection refused" in gone.stderr.lower(), gone.stderr
        assert all(v == 0 for k, v in _backup_metrics(cluster).items() if "last_run_success" in k)
    finally:
        lab.on("head", ["mv", f"{conf}.drill", conf])
    assert "every backup succeeded" in _backup(cluster, "run").stdout  # the target back: the next run recovers
