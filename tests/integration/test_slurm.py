"""The Slurm tier on a real Slurm 22.05 cluster, driven by the plan.

Test hosts (network + mount + UTS namespaces with sshd): ``head``, ``w1``, ``w2`` and a spare
``w3``. Each holds its SSH address and its container address. What runs comes from the plan of a
test stack:

* the SlurmHead's and GpuWorkers' recorded remote steps run over real SSH: munge key, secrets,
  state dirs, slurm.conf/gres.conf/cgroup.conf, GPU preflight, drain/resume;
* each recorded ``docker.Container`` is emulated without Docker: its volumes become bind mounts
  in the host's mount namespace, its env and command are passed to the image's entrypoint
  (``images/slurm/entrypoint.sh``), which then starts munged, MariaDB, slurmdbd and slurmctld on
  the head and configless slurmd on the workers for real. The accounts are the image's (munge
  991, slurm 64030), through a per-host /etc/passwd.

Shims stand in for what cannot run here, in each host's /usr/local/bin: ``docker`` on the head
(``inspect``/``exec`` of the emulated container) and ``nvidia-smi`` on the workers (two GPUs,
driver 550 unless a test changes it); the workers get fake /dev/nvidia0,1 (char 195:N).
The worker ``sysctl`` step is not run: it would change this machine's kernel settings.

Test-only change to what the plan says, and why: ``SlurmdParameters=config_overrides`` is
appended to slurm.conf because the profiles describe 32-CPU / 256 GB nodes on a 2-core machine.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from stacks import plan
from stacks.mocks import plain
from tests.integration import lab as labmod
from tests.integration.steps import Step, run_step, steps

pytestmark = pytest.mark.integration

NET = "10.79.0"
TOOLS = (
    "munged",
    "slurmctld",
    "slurmd",
    "slurmdbd",
    "mariadbd",
    "mariadb-install-db",
    "srun",
    "sacct",
    "tini",
)
ENTRYPOINT = plan.ROOT / "images" / "slurm" / "entrypoint.sh"
HOSTS = ["head", "w1", "w2", "w3"]
SSH_ADDR = {h: f"{NET}.{101 + i}" for i, h in enumerate(HOSTS)}
CTR_ADDR = {h: f"{NET}.{11 + i}" for i, h in enumerate(HOSTS)}
OVERRIDE = "SlurmdParameters=config_overrides\n"

FAKE_DEV = r"""set -e
mkdir -p "$1"
mount --rbind /dev "$1"
mount -t tmpfs -o mode=755,size=1m fakedev /dev
for e in "$1"/*; do ln -s "$e" "/dev/${e##*/}"; done
for i in 0 1; do mknod -m 666 "/dev/nvidia$i" c 195 "$i"; done
mknod -m 666 /dev/nvidiactl c 195 255
"""

NVIDIA_SMI = r"""#!/bin/bash
# nvidia-smi stand-in: two GPUs; the driver version comes from /srv/fake-nvidia-driver if present.
v=$(cat /srv/fake-nvidia-driver 2>/dev/null || echo 550.54.15)
printf '%s\n%s\n' "$v" "$v"
"""

DOCKER = r"""#!/bin/bash
# docker stand-in on the head test host: the "container" slurm-head is emulated in this host.
set -euo pipefail
running() { [ -f /run/slurmctld.pid ] && kill -0 "$(cat /run/slurmctld.pid)" 2>/dev/null; }
case "$1" in
  inspect)
    [ "${*: -1}" = slurm-head ] || exit 1
    if [ "${2:-}" = -f ]; then if running; then echo true; else echo false; fi; else running; fi ;;
  restart)
    [ "$2" = slurm-head ] || exit 1
    pid=$(cat /run/hpc-container.pid)
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 600); do pgrep -g "$pid" >/dev/null || break; sleep 0.1; done
    setsid tini -s -g -- bash ENTRYPOINT head </dev/null >>/run/hpc-container.log 2>&1 &
    echo $! >/run/hpc-container.pid ;;
  exec)
    shift
    [ "$1" = slurm-head ] || { echo "no such container: $1" >&2; exit 1; }
    shift
    exec "$@" ;;
  *) echo "docker stand-in: unsupported: $*" >&2; exit 2 ;;
esac
"""


def stack(workers: int) -> dict[str, Any]:
    hosts = [
        {
            "name": "head",
            "address": SSH_ADDR["head"],
            "sshUser": "root",
            "profile": "epyc-7502p-256g",
            "roles": ["storage", "slurm-head"],
            "containerAddress": CTR_ADDR["head"],
        },
    ] + [
        {
            "name": f"w{i}",
            "address": SSH_ADDR[f"w{i}"],
            "sshUser": "root",
            "profile": "a100x2-80g",
            "roles": ["storage", "gpu-worker"] if i <= 2 else ["gpu-worker"],
            "containerAddress": CTR_ADDR[f"w{i}"],
        }
        for i in range(1, workers + 1)
    ]
    return {
        "hpc:environment": "prod",  # cgroup enforcement (ConstrainDevices) on, as in production
        "hpc:network": {
            "subnet": f"{NET}.0/24",
            "gateway": f"{NET}.254",
            "parentInterface": "eth0",
            "containerRange": f"{NET}.0/26",
        },
        "hpc:hosts": hosts,
        "hpc:storage": {"replica": 3, "mountPoint": "/srv/gfsv"},
        "hpc:slurm": {
            "clusterName": "itest",
            "statePath": "/srv/hpc/state",
            "dbPath": "/srv/hpc/mariadb",
            "partitions": [{"name": "gpu", "default": True}],
        },
        "hpc:k3s": {"version": "v1.31.4+k3s1"},
        "hpc:inference": {"models": []},
        "hpc:racks": None,
        "hpc:hfToken": None,
    }


class Planned:
    """The Slurm part of one plan: remote steps and container records."""

    def __init__(self, workers: int):
        self.result = plan.run("dev", stack(workers))
        self.steps = {s.name: s for s in steps(self.result, ("hpc:slurm:SlurmHead", "hpc:compute:GpuWorker"))}
        self.containers = {
            plain(r.inputs["hostname"]): r for r in self.result.of_type("docker:index/container:Container")
        }

    def head_steps(self) -> list[Step]:
        return [s for s in self.steps.values() if s.name.startswith("head-")]


class Cluster:
    """Test hosts prepared as the images and hosts would be, plus what runs in them."""

    def __init__(self, lab: labmod.Lab):
        self.lab = lab
        self.d = lab.dir / "slurm"
        self.d.mkdir(mode=0o755)
        self.shared = self.d / "shared"

    def prepare(self) -> None:
        """Per host: private /var/spool, /var/log/slurm, /etc/slurm, /var/lib/mysql; the image's
        accounts; the shared volume at /srv/gfsv (munge 0700 991:991, as ClientMount makes it)."""
        (self.shared / "munge").mkdir(parents=True)
        os.chown(self.shared / "munge", 991, 991)
        (self.shared / "munge").chmod(0o700)
        (self.shared / "home").mkdir()
        passwd = re.sub(r"^munge:x:\d+:\d+:", "munge:x:991:991:", Path("/etc/passwd").read_text(), flags=re.M)
        group = re.sub(r"^munge:x:\d+:", "munge:x:991:", Path("/etc/group").read_text(), flags=re.M)
        for host in HOSTS:
            h = self.d / host
            for sub in ("etc-slurm", "log-slurm", "mysql"):
                (h / sub).mkdir(parents=True)
            (h / "passwd").write_text(passwd)
            (h / "group").write_text(group)
            self.lab.on(
                host,
                [
                    "bash",
                    "-c",
                    f"""set -e
mount -t tmpfs -o mode=755 spool /var/spool
mount --bind {h}/etc-slurm /etc/slurm
mount --bind {h}/log-slurm /var/log/slurm
mount --bind {h}/mysql /var/lib/mysql
mount --bind {h}/passwd /etc/passwd
mount --bind {h}/group /etc/group
mkdir -p /srv/gfsv && mount --bind {self.shared} /srv/gfsv
""",
                ],
            )
            shim = self.lab.dir / host / "shim"
            if host == "head":
                (shim / "docker").write_text(DOCKER.replace("ENTRYPOINT", str(ENTRYPOINT)))
                (shim / "docker").chmod(0o755)
            else:
                (shim / "nvidia-smi").write_text(NVIDIA_SMI)
                (shim / "nvidia-smi").chmod(0o755)
                self.lab.on(host, ["bash", "-c", FAKE_DEV, "fakedev", str(self.d / host / "hostdev")])

    def run_container(self, record: plan.Record, rewrite_conf: bool = False) -> None:
        """Emulate a recorded docker.Container: its volumes, env and command, the image's entrypoint."""
        host = plain(record.inputs["hostname"])
        binds = []
        for v in plain(record.inputs.get("volumes") or []):
            src, dst = v["hostPath"], v["containerPath"]
            if src == dst:
                continue
            binds.append(
                f"if [ -f {src} ]; then mkdir -p {os.path.dirname(dst)}; touch {dst}; "
                f"else mkdir -p {dst}; fi; mount --bind {src} {dst}"
            )
        self.lab.on(host, ["bash", "-c", "set -e\n" + "\n".join(binds)])
        env = dict(os.environ)
        env.update(e.split("=", 1) for e in plain(record.inputs.get("envs") or []))
        env.pop("SLURM_CONF", None)
        log = open(self.d / f"{host}-entrypoint.log", "w")  # noqa: SIM115 (the lab's teardown ends the process)
        proc = subprocess.Popen(
            [
                "nsenter",
                "-t",
                str(self.lab.hosts[host].holder),
                "-m",
                "-u",
                "-n",
                "--",
                "tini",
                "-s",
                "-g",
                "--",
                "bash",
                str(ENTRYPOINT),
                *plain(record.inputs["command"]),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        self.sh(host, f"echo {proc.pid} >/run/hpc-container.pid")

    def sh(self, host: str, command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                "nsenter",
                "-t",
                str(self.lab.hosts[host].holder),
                "-m",
                "-u",
                "-n",
                f"--wd={self.d / 'jobs'}",
                "--",
                "bash",
                "-c",
                command,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def idle(self) -> set[str]:
        out = self.sh("head", "sinfo -h -N -t idle -o %N", timeout=30)
        return set(out.stdout.split()) if out.returncode == 0 else set()

    def slurmd_pid(self, host: str) -> str:
        return self.sh(host, "cat /run/slurmd.pid").stdout.strip()


def run_head_steps(lab: labmod.Lab, planned: Planned) -> dict[str, str]:
    out = {}
    for s in planned.head_steps():
        stdin = s.stdin
        if s.name == "head-slurm-conf" and stdin is not None:
            stdin += OVERRIDE
        out[s.name] = lab.ssh(s.host, s.create, stdin=stdin).stdout
    return out


@pytest.fixture(scope="module")
def planned() -> Planned:
    return Planned(workers=2)


@pytest.fixture(scope="module")
def cluster(planned):
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")
    if missing := labmod.missing_tools(*TOOLS):
        pytest.skip(f"missing tools: {missing}")
    lab = labmod.Lab(HOSTS, net=NET, extra_addresses={h: [SSH_ADDR[h]] for h in HOSTS})
    try:
        lab.up()
        c = Cluster(lab)
        (c.d / "jobs").mkdir(mode=0o777)
        c.prepare()
        first = run_head_steps(lab, planned)
        assert all(o.rstrip().endswith("hpc: result=changed") for o in first.values()), first
        for w in ("w1", "w2"):
            run_step(lab, planned.steps[f"{w}-gpu-preflight"])
        c.run_container(planned.containers["head"])
        labmod.wait_until(lambda: c.sh("head", "scontrol ping").stdout.count("is UP") == 1, "slurmctld", 90)
        for w in ("w1", "w2"):
            c.run_container(planned.containers[w])
        labmod.wait_until(lambda: c.idle() == {"w1", "w2"}, "w1 and w2 idle", 90)
        yield c
    finally:
        lab.down()


def test_head_steps_write_secrets_with_owner_and_mode(cluster):
    key = cluster.sh("head", "stat -c '%a %u:%g %s' /srv/gfsv/munge/munge.key").stdout.split()
    assert key == ["400", "991:991", "1024"]
    assert cluster.sh("head", "stat -c '%a %u' /etc/slurm/slurmdbd.conf").stdout.split() == ["600", "64030"]
    conf = cluster.sh("head", "cat /etc/slurm/slurmdbd.conf").stdout
    assert "StoragePass=" in conf and "@@" not in conf


def test_second_run_of_the_head_steps_changes_nothing(cluster, planned):
    for name, out in run_head_steps(cluster.lab, planned).items():
        assert out.rstrip().endswith("hpc: result=unchanged"), f"{name}:\n{out}"


def test_entrypoints_bring_every_node_to_idle_configless(cluster):
    assert cluster.idle() == {"w1", "w2"}
    node = cluster.sh("head", "scontrol show node w1").stdout
    assert "CPUTot=32" in node and "RealMemory=253255" in node and "Gres=gpu:a100:2" in node
    head_conf = cluster.sh("head", "cat /etc/slurm/slurm.conf").stdout
    for w in ("w1", "w2"):  # the workers have no slurm.conf of their own: they fetched it
        assert cluster.sh(w, "test -e /etc/slurm/slurm.conf").returncode != 0
        assert cluster.sh(w, "cat /var/spool/slurmd/conf-cache/slurm.conf").stdout == head_conf
    for h in ("head", "w1", "w2"):
        assert cluster.sh(h, f"bash {ENTRYPOINT} health").returncode == 0, h


def test_srun_runs_on_both_nodes(cluster):
    out = cluster.sh("head", "srun -N2 hostname")
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split()) == ["w1", "w2"]


def test_gpu_gres_is_allocated_and_confined(cluster):
    both = cluster.sh("head", "srun -N1 --gres=gpu:a100:2 bash -c 'echo $CUDA_VISIBLE_DEVICES'")
    assert both.returncode == 0, both.stderr
    assert both.stdout.strip() == "0,1"
    probe = "echo $CUDA_VISIBLE_DEVICES; head -c1 /dev/nvidia0; head -c1 /dev/nvidia1; true"
    one = cluster.sh("head", f"srun -N1 -w w2 --gres=gpu:a100:1 bash -c '{probe}'")
    assert one.returncode == 0, one.stderr
    assert one.stdout.splitlines()[0] == "0"
    # nvidia0 is allowed (no driver behind it), nvidia1 is blocked by the devices cgroup
    assert "'/dev/nvidia0' for reading: No such device or address" in one.stderr
    assert "'/dev/nvidia1' for reading: Operation not permitted" in one.stderr


def test_sbatch_output_and_sacct_gpu_tres(cluster):
    sub = cluster.sh(
        "head",
        "sbatch --parsable -N1 --gres=gpu:a100:1 --mem=100M "
        "--wrap 'echo job-ran-on $(hostname) gpus=$CUDA_VISIBLE_DEVICES'",
    )
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip()
    out = cluster.d / "jobs" / f"slurm-{job}.out"
    labmod.wait_until(lambda: out.exists() and "job-ran-on" in out.read_text(), "batch output", 60)
    assert re.match(r"job-ran-on w[12] gpus=0$", out.read_text().strip())

    def accounted() -> bool:
        rows = cluster.sh("head", f"sacct -a -n -X -P -j {job} -o JobID,State,AllocTRES").stdout
        return "COMPLETED" in rows and "gres/gpu=1" in rows

    labmod.wait_until(accounted, "sacct to show the job with its GPU", 60)


def test_preflight_refuses_an_old_driver_and_a_wrong_gpu_count(cluster, planned):
    step = planned.steps["w1-gpu-preflight"]
    cluster.sh("w1", "echo 535.104.05 > /srv/fake-nvidia-driver")
    try:
        old = run_step(cluster.lab, step, check=False)
        assert old.returncode != 0
        assert "w1: NVIDIA driver branch R535 is older than R550" in old.stderr
    finally:
        cluster.sh("w1", "rm -f /srv/fake-nvidia-driver")
    cluster.sh("w1", "umount /dev/nvidia1 2>/dev/null; rm -f /dev/nvidia1")
    try:
        missing = run_step(cluster.lab, step, check=False)
        assert missing.returncode != 0 and "/dev/nvidia1 is missing" in missing.stderr
    finally:
        cluster.sh("w1", "mknod -m 666 /dev/nvidia1 c 195 1")


def test_drain_before_replacement_and_resume_after(cluster, planned):
    drain, resume = planned.steps["w1-drain"], planned.steps["w1-resume"]
    assert drain.host == resume.host == SSH_ADDR["head"]  # they run on the head
    out = run_step(cluster.lab, drain).stdout
    assert "hpc: changed: drained w1" in out
    state = cluster.sh("head", "scontrol show node w1").stdout
    assert re.search(r"State=IDLE\+DRAIN", state) and "Reason=hpc-cluster: replacing" in state
    assert "hpc: changed: resumed w1" in run_step(cluster.lab, resume).stdout
    labmod.wait_until(lambda: "w1" in cluster.idle(), "w1 idle again", 30)
    assert run_step(cluster.lab, resume).stdout.rstrip().endswith("hpc: result=unchanged")


def test_adding_a_worker_changes_only_the_head_config_and_the_new_worker(cluster, planned):
    bigger = Planned(workers=3)
    before = {r.urn: r for r in planned.result.resources}
    after = {r.urn: r for r in bigger.result.resources}
    changed = sorted(after[u].name for u in before.keys() & after.keys() if after[u].inputs != before[u].inputs)
    assert changed == ["head-gres-conf", "head-slurm-conf"]
    assert before.keys() <= after.keys()
    added = {after[u].name for u in after.keys() - before.keys()}
    assert added == {
        "w3",
        "w3-container",
        "w3-drain",
        "w3-gpu-preflight",
        "w3-image",
        "w3-macvlan",
        "w3-resume",
        "w3-sysctl",
        "w3-docker",
        "w3-mount",
        "w3-mount-fstab",
    }
    pids = {w: cluster.slurmd_pid(w) for w in ("w1", "w2")}
    ctld = cluster.sh("head", "cat /run/slurmctld.pid").stdout
    # w3 is prepared like the others (done for every lab host in prepare()); run the changed steps
    for name in ("head-slurm-conf", "head-gres-conf"):
        s = bigger.steps[name]
        stdin = (s.stdin or "") + (OVERRIDE if name == "head-slurm-conf" else "")
        out = cluster.lab.ssh(s.host, s.create, stdin=stdin).stdout
        assert "hpc: changed: scontrol reconfigure" in out
        # Slurm 22.05 cannot add a node by reconfigure alone: the controller restarts, once
        restarted = "hpc: changed: restarted slurmctld (the node list changed)" in out
        assert restarted is (name == "head-slurm-conf")
    run_step(cluster.lab, bigger.steps["w3-gpu-preflight"])
    cluster.run_container(bigger.containers["w3"])
    labmod.wait_until(lambda: cluster.idle() == {"w1", "w2", "w3"}, "w3 to join", 90)
    assert {w: cluster.slurmd_pid(w) for w in ("w1", "w2")} == pids  # the other workers were not restarted
    assert cluster.sh("head", "cat /run/slurmctld.pid").stdout != ctld  # the controller was
    for w in ("w1", "w2"):  # the running workers fetched the new node list (configless)
        assert "NodeName=w3" in cluster.sh(w, "cat /var/spool/slurmd/conf-cache/slurm.conf").stdout
    out = cluster.sh("head", "srun -N3 hostname")
    assert sorted(out.stdout.split()) == ["w1", "w2", "w3"], out.stderr


def test_entrypoint_refuses_a_munge_key_with_wrong_mode(cluster, tmp_path_factory):
    bad = cluster.d / "bad-munge"
    bad.mkdir()
    (bad / "munge.key").write_bytes(os.urandom(1024))
    (bad / "munge.key").chmod(0o644)
    proc = cluster.sh("w3", f"MUNGE_KEY={bad}/munge.key SLURM_CONF_SERVER=x:1 bash {ENTRYPOINT} worker")
    assert proc.returncode != 0
    assert "must be owned by munge, mode 0400" in proc.stderr


def test_prod_slurm_conf_is_accepted_by_slurmctld(tmp_path_factory):
    """The prod stack's rendered slurm.conf (ML-PROD-V4 nodes) on a controller named head01.

    Test-only rewrites: state and log paths, and accounting off (on a fresh state directory
    slurmctld will not start without a reachable slurmdbd; accounting is proven above)."""
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")
    result = plan.run("prod")
    conf = next(
        plain(r.inputs["stdin"]) for r in result.of_type("command:remote:Command") if r.name == "head01-slurm-conf"
    )
    head = next(
        h
        for h in yaml.safe_load((plan.ROOT / "Pulumi.prod.yaml").read_text())["config"]["hpc:hosts"]
        if h["name"] == "head01"
    )
    lab = labmod.Lab(["head01"], net="10.40.0", extra_addresses={"head01": [head["containerAddress"]]})
    try:
        lab.up()
        d = lab.dir / "ctld"
        d.mkdir(mode=0o755)
        (d / "state").mkdir()
        os.chown(d / "state", 64030, 64030)
        (d / "log").mkdir()
        os.chown(d / "log", 64030, 64030)
        rewrites = {
            "StateSaveLocation": f"{d}/state",
            "SlurmctldLogFile": f"{d}/log/slurmctld.log",
            "AccountingStorageType": "accounting_storage/none",
        }
        for key_, value in rewrites.items():
            conf = re.sub(rf"^{key_}=.*$", f"{key_}={value}", conf, flags=re.M)
        conf = re.sub(r"^AccountingStorage(Host|Port|TRES)=.*\n", "", conf, flags=re.M)
        (d / "slurm.conf").write_text(conf)
        key = d / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        holder = str(lab.hosts["head01"].holder)
        subprocess.Popen(
            [
                "nsenter",
                "-t",
                holder,
                "-m",
                "-u",
                "-n",
                "--",
                "munged",
                "-F",
                f"--key-file={key}",
                f"--seed-file={d}/seed",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(0.5)
        subprocess.Popen(
            ["nsenter", "-t", holder, "-m", "-u", "-n", "--", "slurmctld", "-D", "-f", str(d / "slurm.conf")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        log = d / "log" / "slurmctld.log"
        labmod.wait_until(
            lambda: log.exists() and "Running as primary controller" in log.read_text(),
            "slurmctld to accept the prod config",
            60,
        )
        text = log.read_text()
        assert "fatal" not in text
        out = subprocess.run(
            ["nsenter", "-t", holder, "-m", "-u", "-n", "--", "scontrol", "-o", "show", "node", "gpu01"],
            capture_output=True,
            text=True,
            env=os.environ | {"SLURM_CONF": str(d / "slurm.conf")},
            timeout=60,
        )
        assert "CPUTot=256" in out.stdout and "RealMemory=2033213" in out.stdout and "gpu:h100:8" in out.stdout
    finally:
        lab.down()
