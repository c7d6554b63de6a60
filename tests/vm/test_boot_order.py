"""Boot order on a real host (issue 28): a storage server that also runs Docker, rebooted.

One Debian 12 guest (systemd, cgroup v2) serves a one-brick Gluster volume (made by the fixture
with the gluster CLI: the volume steps are the storage suite's subject) and mounts it with the
plan's own mount step, which writes the fstab entry (``_netdev``, and on a server
``x-systemd.requires=glusterd.service``) and Docker's ``RequiresMountsFor`` drop-in. A container
(restart always) appends a line to a file on the volume each time it starts. After
``systemctl reboot``, with no step re-run, the volume is mounted again and the container's line
is on the volume: Docker started after the mount, not on the empty mount point. With the volume
stopped, the mount fails at boot and Docker does not start at all (nothing writes beside the
volume); starting the volume, mounting and starting Docker brings all back.

The same server is the NFS gateway: the plan's Ganesha install and config steps export the volume
(FSAL_GLUSTER, root squash, the stack's defaults), and a second guest, ``c1``, mounts the export
with the kernel's NFS client and the StorageClass's options, writes as a user and reads it back on
the server; root's write is squashed. Across the reboots Ganesha starts only once the volume is
up (with the volume down it waits, and serves the export when the volume comes back, with no step
re-run), and the client's mount recovers.
"""

from __future__ import annotations

from ipaddress import IPv4Network

import pytest

from components.scripts import RemoteScript
from components.storage import render_ganesha, render_mount
from components.storage.spec import ExportSpec
from stacks.cluster import NFS_MOUNT_VERSION
from stacks.config_parts import StorageConfig
from tests.integration.lab import wait_until
from tests.vm import vmlab

pytestmark = pytest.mark.vm

MOUNT = "/srv/gfsv"
VOLUME = "gv0"
IMAGE = "hpc-vm-mini"  # a tiny image imported from the guest's busybox (no registry here)
# The container: one line per start, on the volume, then it stays up.
WRITER = (
    f"docker run -d --name writer --restart always -v {MOUNT}:/data {IMAGE} "
    "sh -c 'date +%s >>/data/starts; exec sleep 1000000'"
)
DEFAULTS = StorageConfig()  # the stack's defaults: pseudo path, NFS versions, squash, grace
EXPORT = ExportSpec(
    volume=VOLUME,
    pseudo=DEFAULTS.export_pseudo,
    nfs_versions=tuple(DEFAULTS.nfs_versions),
    clients=(IPv4Network(f"{vmlab.NET}.0/24"),),
    squash=DEFAULTS.squash,
    grace=DEFAULTS.nfs_grace,
)
NFS_OPTIONS = f"nfsvers={NFS_MOUNT_VERSION}"  # the StorageClass's mountOptions (components/k8s/addons.py)
NFS_MOUNT = "/mnt/gv"
USER, UID = "alice", 20001
NOTE = f"{NFS_MOUNT}/{USER}/note"
MINI = f"""set -e
d=$(mktemp -d); mkdir -p "$d/bin"; cp /bin/busybox "$d/bin/"
for t in sh date sleep cat; do ln -s busybox "$d/bin/$t"; done
tar -C "$d" -c . | docker import - {IMAGE} >/dev/null; rm -rf "$d"
"""


@pytest.fixture(scope="module")
def lab():
    yield from vmlab.vm_lab()


@pytest.fixture(scope="module")
def s1(lab):
    vm = lab.start("s1")
    lab.start("c1")  # the NFS client, booting beside the server
    booted = lab.wait_booted("s1")
    print(f"s1 answered SSH and finished booting in {booted:.0f} s")
    lab.ssh("s1", f"mkdir -p /srv/bricks/{VOLUME} && gluster --mode=script volume create {VOLUME} "
                  f"{vm.address}:/srv/bricks/{VOLUME} force && gluster volume start {VOLUME}")  # fmt: skip
    lab.ssh("s1", MINI)
    return vm


@pytest.fixture(scope="module")
def c1(lab, s1):
    lab.wait_booted("c1")
    return lab.vms["c1"]


def ganesha_steps(vm: vmlab.Vm) -> tuple[RemoteScript, RemoteScript]:
    conf = render_ganesha.ganesha_conf(EXPORT, vm.address)
    return (render_ganesha.ganesha_install(vm.name, EXPORT.nfs_versions),
            render_ganesha.ganesha_config(vm.name, conf, VOLUME, EXPORT.nfs_versions))  # fmt: skip


def ganesha_step(lab, vm: vmlab.Vm) -> str:  # type: ignore[no-untyped-def]
    step = ganesha_steps(vm)[1]
    return str(lab.ssh(vm.name, step.create, stdin=step.file_content).stdout)


def reads_back(lab) -> bool:  # type: ignore[no-untyped-def]
    """The client reads the user's note through its NFS mount (a hard mount blocks while the
    server is away: each try is killed after 20 s)."""
    out = lab.ssh("c1", f"timeout -s KILL 20 cat {NOTE}", check=False, timeout=40)
    return out.returncode == 0 and out.stdout.strip() == "from c1"


def mount_step(vm: vmlab.Vm) -> str:
    return render_mount.client_mount(vm.name, [vm.address], VOLUME, MOUNT, (), address=vm.address).create


def starts(lab) -> int:  # type: ignore[no-untyped-def]
    out = lab.ssh("s1", f"cat {MOUNT}/starts 2>/dev/null | wc -l").stdout
    return int(out.strip())


def test_a_real_host_runs_systemd_with_cgroup_v2_and_docker_on_it(lab, s1):
    assert lab.ssh("s1", "systemctl is-system-running").stdout.strip() == "running"
    assert lab.ssh("s1", "stat -fc %T /sys/fs/cgroup").stdout.strip() == "cgroup2fs"
    info = lab.ssh("s1", "docker info --format '{{.CgroupVersion}} {{.CgroupDriver}}'").stdout.strip()
    assert info == "2 systemd"
    # a container gets its own cgroup v2 tree with the controllers Slurm's cgroup/v2 plugin needs
    ctl = lab.ssh("s1", f"docker run --rm {IMAGE} cat /sys/fs/cgroup/cgroup.controllers").stdout.split()
    assert {"cpuset", "cpu", "memory", "pids"} <= set(ctl), ctl


def test_the_mount_step_orders_the_mount_after_glusterd_and_docker_after_the_mount(lab, s1):
    out = lab.ssh("s1", mount_step(s1)).stdout
    assert "hpc: changed: fstab entry for /srv/gfsv" in out and "hpc: changed: mounted /srv/gfsv" in out
    line = lab.ssh("s1", f"awk '$2 == \"{MOUNT}\"' /etc/fstab").stdout.split()
    assert line[:3] == [f"{s1.address}:/{VOLUME}", MOUNT, "glusterfs"]
    assert "x-systemd.requires=glusterd.service" in line[3].split(",") and "_netdev" in line[3].split(",")
    # systemd's own view of the units the fstab line and the drop-in make
    unit = "srv-gfsv.mount"
    assert "glusterd.service" in lab.ssh("s1", f"systemctl show -p Requires --value {unit}").stdout
    assert unit in lab.ssh("s1", "systemctl show -p RequiresMountsFor -p Requires --value docker").stdout
    assert lab.ssh("s1", mount_step(s1)).stdout.rstrip().endswith("hpc: result=unchanged")
    lab.ssh("s1", WRITER)
    assert starts(lab) == 1


def test_the_kernel_nfs_client_mounts_the_ganesha_export_as_a_user_and_root_is_squashed(lab, s1, c1):
    install, _ = ganesha_steps(s1)
    lab.ssh("s1", install.create)
    assert ganesha_step(lab, s1).rstrip().endswith("hpc: result=changed")
    for vm in ("s1", "c1"):
        lab.ssh(vm, f"id -u {USER} >/dev/null 2>&1 || useradd -u {UID} -U -M {USER}")
    lab.ssh("s1", f"install -d -o {UID} -g {UID} -m 0755 {MOUNT}/{USER}")
    lab.ssh("c1", f"mkdir -p {NFS_MOUNT} && mount -t nfs4 -o {NFS_OPTIONS} {s1.address}:{EXPORT.pseudo} {NFS_MOUNT}")
    fs = lab.ssh("c1", f"findmnt -n -o FSTYPE,OPTIONS {NFS_MOUNT}").stdout.split()
    assert fs[0] == "nfs4" and "vers=4.1" in fs[1].split(","), fs
    lab.ssh("c1", f"runuser -u {USER} -- sh -c 'echo from c1 >{NOTE}'")
    # on the server, through the Gluster mount: the user's file, with the user's uid
    assert lab.ssh("s1", f"stat -c %u {MOUNT}/{USER}/note; cat {MOUNT}/{USER}/note").stdout.split("\n")[:2] == [
        str(UID), "from c1"]  # fmt: skip
    # root on the client is squashed: it may neither write in the user's directory nor read her
    # private file (root would on a local disk)
    denied = lab.ssh("c1", f"echo root >{NFS_MOUNT}/{USER}/by-root", check=False)
    assert denied.returncode != 0 and "Permission denied" in denied.stderr, denied
    lab.ssh("c1", f"runuser -u {USER} -- sh -c 'umask 077; echo private >{NFS_MOUNT}/{USER}/private'")
    read = lab.ssh("c1", f"cat {NFS_MOUNT}/{USER}/private", check=False)
    assert read.returncode != 0 and "Permission denied" in read.stderr, read
    assert lab.ssh("c1", f"runuser -u {USER} -- cat {NFS_MOUNT}/{USER}/private").stdout.strip() == "private"
    assert ganesha_step(lab, s1).rstrip().endswith("hpc: result=unchanged")


def test_after_a_reboot_the_volume_is_mounted_before_docker_starts_the_container(lab, s1, c1):
    took = lab.reboot("s1")
    print(f"s1 rebooted in {took:.0f} s")
    assert lab.ssh("s1", f"findmnt -n -o FSTYPE {MOUNT}").stdout.strip() == "fuse.glusterfs"
    running = "docker inspect -f '{{.State.Running}}' writer"
    wait_until(lambda: lab.ssh("s1", running, check=False).stdout.strip() == "true", "the writer running again", 120)
    assert starts(lab) == 2  # its second start wrote to the volume, not to the bare mount point
    when = "systemctl show -p ActiveEnterTimestampMonotonic --value srv-gfsv.mount docker"
    after = lab.ssh("s1", when).stdout.split()
    assert int(after[0]) < int(after[1]), after  # mounted, then Docker started
    assert lab.ssh("s1", mount_step(s1)).stdout.rstrip().endswith("hpc: result=unchanged")
    # Ganesha after glusterd; the client's mount recovers (after Ganesha's grace period)
    when = "systemctl show -p ActiveEnterTimestampMonotonic --value glusterd nfs-ganesha"
    after = lab.ssh("s1", when).stdout.split()
    assert int(after[0]) < int(after[1]), after
    wait_until(lambda: reads_back(lab), "the client reading the note again", 300)
    assert ganesha_step(lab, s1).rstrip().endswith("hpc: result=unchanged")


def unit_state(lab, unit: str) -> str:  # type: ignore[no-untyped-def]
    return str(lab.ssh("s1", f"systemctl show -p ActiveState,SubState --value {unit} | paste -sd/").stdout.strip())


def ganesha_starting_s(lab) -> float:  # type: ignore[no-untyped-def]
    """Seconds since systemd began starting Ganesha (its ExecStartPre: the wait for the volume)."""
    since = "systemctl show -p InactiveExitTimestampMonotonic --value nfs-ganesha; cut -d' ' -f1 /proc/uptime"
    began_us, uptime_s = lab.ssh("s1", since).stdout.split()
    return float(uptime_s) - int(began_us) / 1e6 if int(began_us) else 0.0  # 0: not begun yet


def test_with_the_volume_down_at_boot_docker_and_ganesha_wait_until_it_is_up(lab, s1, c1):
    lab.ssh("s1", f"gluster --mode=script volume stop {VOLUME}")
    lab.reboot("s1", settled=False)  # Ganesha's start waits for the volume: the boot does not settle
    wait_until(lambda: unit_state(lab, "srv-gfsv.mount") == "failed/failed", "the mount to fail", 240)
    wait_until(lambda: not lab.ssh("s1", "systemctl list-jobs docker.service --no-legend").stdout.strip(),
               "Docker's start job to end", 120)  # fmt: skip
    assert lab.ssh("s1", f"mountpoint -q {MOUNT}", check=False).returncode != 0
    state = lab.ssh("s1", "systemctl is-active docker", check=False).stdout.strip()
    assert state in {"inactive", "failed"}, state  # a container here would write to the bare disk
    assert lab.ssh("s1", f"test -e {MOUNT}/starts", check=False).returncode != 0  # nothing beside the volume
    # Ganesha is still waiting for the volume, past systemd's default 90 s start timeout, not
    # restarted: no NFS port
    wait_until(lambda: ganesha_starting_s(lab) > 100, "Ganesha's start to last 100 s", 240)
    assert unit_state(lab, "nfs-ganesha") == "activating/start-pre"
    assert lab.ssh("s1", "systemctl show -p NRestarts --value nfs-ganesha").stdout.strip() == "0"
    assert not lab.ssh("s1", "ss -Hltn 'sport = :2049'").stdout.strip()
    # The way back, with no step re-run: the volume up; Ganesha serves it, the mount, Docker.
    lab.ssh("s1", f"gluster volume start {VOLUME}")
    wait_until(lambda: unit_state(lab, "nfs-ganesha") == "active/running", "Ganesha serving", 120)
    lab.ssh("s1", f"mount {MOUNT} && systemctl start docker")
    wait_until(lambda: starts(lab) == 3, "the writer's third start, on the volume", 120)
    wait_until(lambda: reads_back(lab), "the client reading the note again", 300)
