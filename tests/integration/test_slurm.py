"""The rendered Slurm files on a real Slurm 22.05 cluster: munge, MariaDB, slurmdbd, slurmctld and
two configless slurmd, each daemon in its own test host (network + mount + UTS namespace).

The files come from the renderers fed by a test stack. The test rewrites only what a shared test
machine forces, and says so:

* paths (StateSaveLocation, SlurmdSpoolDir, pid and log files) move into the lab directory;
* ``SlurmdParameters=config_overrides`` is added: the profiles describe 32-CPU / 256 GB nodes on
  a 2-core machine, and without it slurmd marks such nodes INVAL;
* the DB password placeholder is replaced, as the head's secret step does on a real host.

Host names and addresses are the stack's own: the test hosts get exactly the container addresses
the stack assigns. Each worker sees two fake GPUs (/dev/nvidia0,1, char 195:N) in its own /dev.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess

import pytest

from components.slurm import render
from stacks import config as cfgmod
from stacks import slurm_spec
from tests.integration import lab as labmod

pytestmark = pytest.mark.integration

NET = "10.79.0"
TOOLS = ("munged", "slurmctld", "slurmd", "slurmdbd", "mariadbd", "mariadb-install-db", "srun", "sacct")
FAKE_DEV = r"""set -e
mkdir -p "$1"
mount --rbind /dev "$1"
mount -t tmpfs -o mode=755,size=1m fakedev /dev
for e in "$1"/*; do ln -s "$e" "/dev/${e##*/}"; done
mknod -m 666 /dev/nvidia0 c 195 0
mknod -m 666 /dev/nvidia1 c 195 1
mknod -m 666 /dev/nvidiactl c 195 255
"""


def slurm_stack(workers: int = 2) -> cfgmod.ClusterConfig:
    hosts = [
        {
            "name": "head",
            "address": f"{NET}.101",
            "sshUser": "root",
            "profile": "epyc-7502p-256g",
            "roles": ["storage", "slurm-head"],
            "containerAddress": f"{NET}.11",
        },
    ] + [
        {
            "name": f"w{i}",
            "address": f"{NET}.{101 + i}",
            "sshUser": "root",
            "profile": "a100x2-80g",
            "roles": ["storage", "gpu-worker"],
            "containerAddress": f"{NET}.{11 + i}",
        }
        for i in range(1, workers + 1)
    ]
    return cfgmod.parse(
        {
            "environment": "prod",  # cgroup enforcement (ConstrainDevices) on, as in production
            "network": {
                "subnet": f"{NET}.0/24",
                "gateway": f"{NET}.254",
                "parentInterface": "eth0",
                "containerRange": f"{NET}.0/26",
            },
            "hosts": hosts,
            "storage": {"replica": 3},
            "slurm": {"clusterName": "itest"},
            "k3s": {"version": "v1.31.4+k3s1"},
        }
    )


def rewrite(conf: str, lab_dir: str) -> str:
    """The test-only changes listed in the module docstring."""
    subs = {
        "StateSaveLocation": f"{lab_dir}/state",
        "SlurmdSpoolDir": "/srv/slurmd",  # each test host has a private /srv (tmpfs)
        "SlurmctldPidFile": f"{lab_dir}/run/slurmctld.pid",
        "SlurmdPidFile": f"{lab_dir}/run/slurmd-%n.pid",
        "SlurmctldLogFile": f"{lab_dir}/log/slurmctld.log",
        "SlurmdLogFile": f"{lab_dir}/log/slurmd-%n.log",
        "LogFile": f"{lab_dir}/log/slurmdbd.log",
        "PidFile": f"{lab_dir}/run/slurmdbd.pid",
    }
    for key, value in subs.items():
        conf = re.sub(rf"^{key}=.*$", f"{key}={value}", conf, flags=re.M)
    return conf


class SlurmLab:
    def __init__(self, lab: labmod.Lab, spec: render.ClusterSpec):
        self.lab, self.spec = lab, spec
        self.d = lab.dir / "slurm"
        self.etc = self.d / "etc"
        self.password = secrets.token_hex(16)

    def start(self, host: str, name: str, argv: list[str]) -> None:
        log = open(self.d / "log" / f"{name}.out", "w")  # noqa: SIM115 (closed by the lab's teardown)
        subprocess.Popen(
            ["nsenter", "-t", str(self.lab.hosts[host].holder), "-m", "-u", "-n", "--", *argv],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=os.environ | {"SLURM_CONF": str(self.etc / "slurm.conf")},
        )

    def head(self, argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
        holder = str(self.lab.hosts["head"].holder)
        # nsenter -m would start in "/": --wd keeps batch output in the lab's jobs directory
        return subprocess.run(
            ["nsenter", "-t", holder, "-m", "-u", "-n", f"--wd={self.d / 'jobs'}", "--", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.d / "jobs",
            env=os.environ | {"SLURM_CONF": str(self.etc / "slurm.conf")},
        )

    def up(self) -> None:
        d = self.d
        for sub in ("etc", "state", "spool", "log", "run", "jobs", "munge", "db"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(d, 0o755)
        for sub in ("state", "log", "run", "jobs"):
            os.chown(d / sub, 64030, 64030)
        (d / "jobs").chmod(0o777)
        (self.etc / "slurm.conf").write_text(
            rewrite(render.slurm_conf(self.spec), str(d)) + "SlurmdParameters=config_overrides\n"
        )
        (self.etc / "gres.conf").write_text(render.gres_conf(self.spec.nodes))
        (self.etc / "cgroup.conf").write_text(render.cgroup_conf(self.spec.cgroup))
        dbd = rewrite(render.slurmdbd_conf("head"), str(d)).replace(
            render.DB_PASSWORD_PLACEHOLDER, self.password
        )
        (self.etc / "slurmdbd.conf").write_text(dbd)
        os.chmod(self.etc / "slurmdbd.conf", 0o600)
        os.chown(self.etc / "slurmdbd.conf", 64030, 64030)
        key = d / "munge" / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        for host in self.lab.hosts:
            self.start(
                host,
                f"munged-{host}",
                [
                    "munged",
                    "-F",
                    f"--key-file={key}",
                    f"--seed-file={d}/munge/seed-{host}",
                    f"--log-file={d}/log/munged-{host}.log",
                ],
            )
        for w in (n.name for n in self.spec.nodes):
            self.lab.on(w, ["bash", "-c", FAKE_DEV, "fakedev", str(d / f"hostdev-{w}")])
        subprocess.run(
            [
                "mariadb-install-db",
                "--no-defaults",
                f"--datadir={d}/db/data",
                "--user=root",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        self.start(
            "head",
            "mariadbd",
            [
                "mariadbd",
                "--no-defaults",
                f"--datadir={d}/db/data",
                "--user=root",
                f"--socket={d}/db/sock",
                "--port=3306",
                "--bind-address=127.0.0.1",
                f"--pid-file={d}/db/pid",
                f"--log-error={d}/log/mariadb.err",
                "--skip-log-bin",
                "--innodb-buffer-pool-size=128M",
            ],
        )
        labmod.wait_until(
            lambda: (
                self.head(["mariadb-admin", "--no-defaults", f"--socket={d}/db/sock", "ping"]).returncode == 0
            ),
            "mariadb",
            timeout=60,
        )
        sql = (
            f"CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '{self.password}';"
            f"GRANT ALL ON {render.ACCOUNTING_DB}.* TO 'slurm'@'127.0.0.1';"
        )
        assert self.head(["mariadb", "--no-defaults", f"--socket={d}/db/sock", "-e", sql]).returncode == 0
        self.start("head", "slurmdbd", ["slurmdbd", "-D"])
        labmod.wait_until(
            lambda: (
                "slurmdbd version" in (d / "log" / "slurmdbd.log").read_text()
                if (d / "log" / "slurmdbd.log").exists()
                else False
            ),
            "slurmdbd",
            timeout=60,
        )
        self.start("head", "slurmctld", ["slurmctld", "-D", "-i"])
        for n in self.spec.nodes:
            self.start_slurmd(n.name)

    def start_slurmd(self, name: str) -> None:
        self.lab.on(name, ["mkdir", "-p", "/srv/slurmd"])
        self.start(
            name,
            f"slurmd-{name}",
            [
                "env",
                "-u",
                "SLURM_CONF",
                "slurmd",
                "-D",
                "--conf-server",
                f"{self.spec.head_address}:{render.SLURMCTLD_PORT}",
            ],
        )

    def idle(self) -> set[str]:
        out = self.head(["sinfo", "-h", "-N", "-t", "idle", "-o", "%N"], timeout=30)
        return set(out.stdout.split()) if out.returncode == 0 else set()


@pytest.fixture(scope="module")
def slurm():
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")
    if missing := labmod.missing_tools(*TOOLS):
        pytest.skip(f"missing tools: {missing}")
    spec = slurm_spec.cluster_spec(slurm_stack())
    lab = labmod.Lab(["head", "w1", "w2"], net=NET)
    try:
        lab.up()
        s = SlurmLab(lab, spec)
        s.up()
        labmod.wait_until(lambda: s.idle() == {"w1", "w2"}, "both nodes idle", timeout=90)
        yield s
    finally:
        lab.down()


def test_every_node_reaches_idle_from_configless_slurmd(slurm):
    assert slurm.idle() == {"w1", "w2"}
    node = slurm.head(["scontrol", "show", "node", "w1"]).stdout
    assert "CPUTot=32" in node and "RealMemory=253255" in node and "Gres=gpu:a100:2" in node
    # the workers have no slurm.conf of their own: they fetched it from the controller
    for w in ("w1", "w2"):
        cached = slurm.lab.on(w, ["cat", "/srv/slurmd/conf-cache/slurm.conf"]).stdout
        assert cached == (slurm.etc / "slurm.conf").read_text()


def test_srun_runs_on_both_nodes(slurm):
    out = slurm.head(["srun", "-N2", "hostname"])
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split()) == ["w1", "w2"]


def test_gpu_gres_is_allocated_and_confined(slurm):
    both = slurm.head(["srun", "-N1", "--gres=gpu:a100:2", "bash", "-c", "echo $CUDA_VISIBLE_DEVICES"])
    assert both.returncode == 0, both.stderr
    assert both.stdout.strip() == "0,1"
    probe = "echo $CUDA_VISIBLE_DEVICES; head -c1 /dev/nvidia0; head -c1 /dev/nvidia1; true"
    one = slurm.head(["srun", "-N1", "-w", "w2", "--gres=gpu:a100:1", "bash", "-c", probe])
    assert one.returncode == 0, one.stderr
    assert one.stdout.splitlines()[0] == "0"
    # nvidia0 is allowed (no driver behind it), nvidia1 is blocked by the devices cgroup
    assert "'/dev/nvidia0' for reading: No such device or address" in one.stderr
    assert "'/dev/nvidia1' for reading: Operation not permitted" in one.stderr


def test_sbatch_output_and_sacct_gpu_tres(slurm):
    sub = slurm.head(
        [
            "sbatch",
            "--parsable",
            "-N1",
            "--gres=gpu:a100:1",
            "--mem=100M",
            "--wrap",
            "echo job-ran-on $(hostname) gpus=$CUDA_VISIBLE_DEVICES",
        ]
    )
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip()
    out = slurm.d / "jobs" / f"slurm-{job}.out"
    try:
        labmod.wait_until(
            lambda: out.exists() and "job-ran-on" in out.read_text(), "batch output", timeout=60
        )
    except TimeoutError:
        raise AssertionError(slurm.head(["scontrol", "show", "job", job]).stdout) from None
    assert re.match(r"job-ran-on w[12] gpus=0$", out.read_text().strip())

    def accounted() -> bool:
        rows = slurm.head(["sacct", "-a", "-n", "-X", "-P", "-j", job, "-o", "JobID,State,AllocTRES"]).stdout
        return "COMPLETED" in rows and "gres/gpu=1" in rows

    labmod.wait_until(accounted, "sacct to show the job with its GPU", timeout=60)
