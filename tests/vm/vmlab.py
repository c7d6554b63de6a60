"""Real hosts for tests: Debian 12 virtual machines under qemu's software emulation (TCG).

What the namespace labs cannot show runs here: systemd as PID 1, cgroup v2, reboots, boot order
(``../shared/notes/vm-lab.md`` measured the recipe; KVM does not work on these machines).

* **The image** is built once per user with ``debootstrap`` from the Debian mirror apt uses
  (kernel, systemd, sshd, and the daemons the scenarios run: Docker with AppArmor, glusterd and
  the Gluster client), cached in ``~/.cache/hpc-cluster/vm/<key>`` keyed by every input (suite,
  package list, this module's customisation script, the mirror). The guests have no route to any
  mirror, so what the plan's steps would ``apt-get install`` is preinstalled: the installs are not
  what these tests are about.
* **Each VM** boots from a qcow2 overlay of the image (the image stays untouched) with its own
  address, hostname and machine-id, on a bridge inside a network namespace the lab creates, with
  no route anywhere else. Tests reach the guests over real SSH with the lab's own key.
* **Teardown** powers each guest off, waits for its qemu (by the PID qemu wrote), kills it if it
  does not exit, deletes the namespace and the overlays. Nothing else is touched.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hpc-cluster" / "vm"
SUITE = "bookworm"
PACKAGES = (
    "linux-image-amd64,systemd-sysv,udev,dbus,kmod,openssh-server,iproute2,iputils-ping,procps,"
    "ca-certificates,netbase,apparmor,docker.io,glusterfs-server,glusterfs-client,busybox-static,util-linux"
)
NET = "10.85.0"  # the lab's bridge (10.85.0.1) and guests (10.85.0.11 ...): inside the namespace only
TOOLS = ("qemu-system-x86_64", "qemu-img", "debootstrap", "mkfs.ext4", "ssh", "ssh-keygen")
BOOT_TIMEOUT_S = 300  # a guest answers SSH in 30-80 s under TCG; a loaded 2-core CI machine is slower

# Run in the debootstrapped root (chroot) once: the lab's SSH key, a static fallback network, no
# timers that would compete for the emulated CPU, an empty machine-id (each VM makes its own),
# Docker and glusterd enabled; the mount step's own checks (hpc_install) find the client installed.
CUSTOMIZE = r"""set -euo pipefail
R=$1 PUB=$2
install -d -m700 "$R/root/.ssh"
install -m600 "$PUB" "$R/root/.ssh/authorized_keys"
echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' >"$R/etc/fstab"
printf '[Match]\nName=eth0\n[Network]\nDHCP=no\n' >"$R/etc/systemd/network/95-eth0-static.network"
: >"$R/etc/resolv.conf"
chroot "$R" systemctl enable systemd-networkd systemd-network-generator docker glusterd
chroot "$R" systemctl disable apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer \
  dpkg-db-backup.timer 2>/dev/null || true
: >"$R/etc/machine-id"
rm -f "$R/var/lib/dbus/machine-id"
ln -s /etc/machine-id "$R/var/lib/dbus/machine-id"
chroot "$R" apt-get clean
rm -rf "$R/var/lib/apt/lists/"*
"""


def mirror() -> str:
    """The Debian mirror this machine's apt uses (the guests' packages come from it)."""
    for line in Path("/etc/apt/sources.list.d/debian.sources").read_text().splitlines():
        if line.startswith("URIs:"):
            return line.split()[1]
    raise RuntimeError("no URIs: line in /etc/apt/sources.list.d/debian.sources")


def image_key() -> str:
    inputs = "\n".join([SUITE, PACKAGES, CUSTOMIZE, mirror()])
    return hashlib.sha256(inputs.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Image:
    dir: Path

    @property
    def disk(self) -> Path:
        return self.dir / "base.img"

    @property
    def key(self) -> Path:
        return self.dir / "id_ed25519"


def image(progress=print) -> Image:  # type: ignore[no-untyped-def]
    """The cached guest image, built on a miss (about 2-3 min: debootstrap, then mkfs)."""
    final = CACHE / image_key()
    if (final / "done").exists():
        return Image(final)
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="build-", dir=CACHE))
    try:
        started = time.monotonic()
        root = work / "root"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(work / "id_ed25519")], check=True)
        debootstrap = ["debootstrap", "--variant=minbase", f"--include={PACKAGES}", SUITE, str(root), mirror()]
        out = subprocess.run(debootstrap, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"debootstrap failed: {(out.stdout + out.stderr).strip().splitlines()[-3:]}")
        subprocess.run(["bash", "-c", CUSTOMIZE, "customize", str(root), str(work / "id_ed25519.pub")], check=True)
        for name in ("vmlinuz", "initrd.img"):
            shutil.copy(next((root / "boot").glob(f"{name}-*")), work / name)
        subprocess.run(["truncate", "-s", "6G", str(work / "base.img")], check=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "vmroot", "-d", str(root), str(work / "base.img")], check=True)
        shutil.rmtree(root)
        (work / "done").write_text(f"built in {time.monotonic() - started:.0f} s\n")
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(final)
        work.rename(final)
        progress(f"vm image {final.name}: {(final / 'done').read_text().strip()}")
        return Image(final)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


@dataclass
class Vm:
    name: str
    address: str
    index: int
    pidfile: Path
    serial: Path

    def pid(self) -> int | None:
        with contextlib.suppress(FileNotFoundError, ValueError):
            return int(self.pidfile.read_text().strip())
        return None


class VmLab:
    """Guests on one private bridge; ``ssh`` runs a command on one of them as root."""

    def __init__(self, img: Image, work: Path):
        self.img, self.dir = img, work
        self.ns = f"hpcvm{os.getpid()}"
        self.vms: dict[str, Vm] = {}
        subprocess.run(["ip", "netns", "add", self.ns], check=True)
        self._ip("link", "set", "lo", "up")
        self._ip("link", "add", "br0", "type", "bridge")
        self._ip("addr", "add", f"{NET}.1/24", "dev", "br0")
        self._ip("link", "set", "br0", "up")

    def _ip(self, *args: str) -> None:
        subprocess.run(["ip", "-n", self.ns, *args], check=True)

    def start(self, name: str, memory_mb: int = 1536) -> Vm:
        i = len(self.vms) + 1
        vm = Vm(name, f"{NET}.{10 + i}", i, self.dir / f"{name}.pid", self.dir / f"{name}-serial.log")
        overlay = self.dir / f"{name}.qcow2"
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(self.img.disk), "-F", "raw",
                        str(overlay)], check=True)  # fmt: skip
        self._ip("tuntap", "add", f"tap{i}", "mode", "tap")
        self._ip("link", "set", f"tap{i}", "master", "br0", "up")
        cmdline = (
            "root=/dev/vda rw console=ttyS0 net.ifnames=0 quiet mitigations=off "
            f"ip={vm.address}::{NET}.1:255.255.255.0:{name}:eth0:off systemd.hostname={name}"
        )
        qemu = [
            "ip", "netns", "exec", self.ns, "qemu-system-x86_64", "-name", name,
            "-accel", "tcg,tb-size=256", "-cpu", "qemu64", "-m", str(memory_mb), "-smp", "1",
            "-kernel", str(self.img.dir / "vmlinuz"), "-initrd", str(self.img.dir / "initrd.img"),
            "-append", cmdline, "-drive", f"file={overlay},if=virtio,format=qcow2",
            "-netdev", f"tap,id=n0,ifname=tap{i},script=no,downscript=no",
            "-device", f"virtio-net-pci,netdev=n0,mac=52:54:00:85:00:{10 + i:02x}",
            "-display", "none", "-serial", f"file:{vm.serial}", "-daemonize", "-pidfile", str(vm.pidfile),
        ]  # fmt: skip
        subprocess.run(qemu, check=True)
        self.vms[name] = vm
        return vm

    def ssh(self, name: str, command: str, check: bool = True, timeout: float = 300,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
        ssh = [
            "ip", "netns", "exec", self.ns, "ssh", "-i", str(self.img.key), "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
            "-o", "LogLevel=ERROR", f"root@{self.vms[name].address}", command,
        ]  # fmt: skip
        out = subprocess.run(ssh, capture_output=True, text=True, timeout=timeout, input=stdin)
        if check and out.returncode != 0:
            raise AssertionError(f"{name}: {command[:200]!r} exited {out.returncode}:\n{out.stdout}\n{out.stderr}")
        return out

    def boot_id(self, name: str) -> str | None:
        """The guest's boot id, or None while it does not answer."""
        try:
            out = self.ssh(name, "cat /proc/sys/kernel/random/boot_id", check=False, timeout=20)
        except subprocess.TimeoutExpired:
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    def wait_booted(self, name: str, other_than: str | None = None) -> float:
        """Wait until the guest answers SSH (with a boot id other than ``other_than``: after a
        reboot) and systemd has finished starting up; return the seconds it took."""
        started = time.monotonic()
        deadline = started + BOOT_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.vms[name].pid() and not _alive(self.vms[name].pid()):
                raise AssertionError(f"{name}: qemu exited; serial console:\n{self.console(name)}")
            bid = self.boot_id(name)
            if bid and bid != other_than:
                self.ssh(name, "systemctl is-system-running --wait || true", timeout=BOOT_TIMEOUT_S)
                return time.monotonic() - started
            time.sleep(2)
        raise AssertionError(f"{name} did not boot in {BOOT_TIMEOUT_S} s; serial console:\n{self.console(name)}")

    def reboot(self, name: str) -> float:
        """``systemctl reboot`` in the guest; the seconds until it is up again."""
        before = self.boot_id(name)
        self.ssh(name, "systemctl reboot", check=False, timeout=30)
        return self.wait_booted(name, other_than=before)

    def console(self, name: str) -> str:
        with contextlib.suppress(FileNotFoundError):
            return "\n".join(self.vms[name].serial.read_text(errors="replace").splitlines()[-40:])
        return ""

    def stop(self) -> None:
        for vm in self.vms.values():
            pid = vm.pid()
            if not pid or not _alive(pid):
                continue
            with contextlib.suppress(subprocess.TimeoutExpired, AssertionError):
                self.ssh(vm.name, "systemctl poweroff", check=False, timeout=20)
            deadline = time.monotonic() + 30
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.5)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
                while _alive(pid):
                    time.sleep(0.1)
        subprocess.run(["ip", "netns", "del", self.ns], check=False)


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(FileNotFoundError):
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    return False


def vm_lab() -> Iterator[VmLab]:
    """Body of a module fixture: the image (built on a miss), a lab, torn down after (or skipped)."""
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces and tap devices")
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        pytest.skip(f"missing tools: {', '.join(missing)} (apt-get install qemu-system-x86 qemu-utils debootstrap)")
    img = image()
    work = Path(tempfile.mkdtemp(prefix="hpc-vmlab-"))
    lab = VmLab(img, work)
    try:
        yield lab
    finally:
        lab.stop()
        shutil.rmtree(work, ignore_errors=True)
