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
"""

from __future__ import annotations

import pytest

from components.storage import render_mount
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
    booted = lab.wait_booted("s1")
    print(f"s1 answered SSH and finished booting in {booted:.0f} s")
    lab.ssh("s1", f"mkdir -p /srv/bricks/{VOLUME} && gluster --mode=script volume create {VOLUME} "
                  f"{vm.address}:/srv/bricks/{VOLUME} force && gluster volume start {VOLUME}")  # fmt: skip
    lab.ssh("s1", MINI)
    return vm


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


def test_after_a_reboot_the_volume_is_mounted_before_docker_starts_the_container(lab, s1):
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


def test_with_the_volume_down_at_boot_docker_does_not_start_until_it_is_mounted(lab, s1):
    lab.ssh("s1", f"gluster --mode=script volume stop {VOLUME}")
    lab.reboot("s1")
    assert lab.ssh("s1", f"mountpoint -q {MOUNT}", check=False).returncode != 0
    state = lab.ssh("s1", "systemctl is-active docker", check=False).stdout.strip()
    assert state in {"inactive", "failed"}, state  # a container here would write to the bare disk
    assert lab.ssh("s1", f"test -e {MOUNT}/starts", check=False).returncode != 0  # nothing beside the volume
    # The way back: the volume up, the mount, Docker (its container with it).
    lab.ssh("s1", f"gluster volume start {VOLUME} && mount {MOUNT} && systemctl start docker")
    wait_until(lambda: starts(lab) == 3, "the writer's third start, on the volume", 120)
