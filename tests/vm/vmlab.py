"""Real hosts for tests: Debian 12 virtual machines under qemu's software emulation (TCG).

What the namespace labs cannot show runs here: systemd as PID 1, cgroup v2, reboots, boot order
(``../shared/notes/vm-lab.md`` measured the recipe; KVM does not work on these machines).

* **The image** is built once per user with ``debootstrap`` from the Debian mirror apt uses
  (kernel, systemd, sshd, and the daemons the scenarios run: Docker with AppArmor, glusterd and
  the Gluster client, NFS-Ganesha with its Gluster FSAL, the kernel NFS client's tools), cached
  in ``~/.cache/hpc-cluster/vm/<key>`` keyed by every input (suite, package list, this module's
  customisation script, the mirror). The guests have no route to any
  mirror, so what the plan's steps would ``apt-get install`` is preinstalled: the installs are not
  what these tests are about.
* **Each VM** boots from a qcow2 overlay of the image (the image stays untouched) with its own
  address, hostname and machine-id, on a bridge inside a network namespace the lab creates, with
  no route anywhere else. Tests reach the guests over real SSH with the lab's own key.
* **Layers** (``layer``): what a scenario's guests need and is slow to put there under TCG (the
  real Docker images the plan builds: a ``docker load`` takes minutes), put there once on a guest
  of its own and kept as a qcow2 layer over the image, keyed by the image and its inputs.
  ``docker(name)`` forwards a guest's Docker socket over SSH, for the Docker API the other
  suites use.
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hpc-cluster" / "vm"
SUITE = "bookworm"
PACKAGES = (
    "linux-image-amd64,systemd-sysv,udev,dbus,kmod,openssh-server,iproute2,iputils-ping,procps,"
    "ca-certificates,netbase,apparmor,docker.io,glusterfs-server,glusterfs-client,busybox-static,util-linux,"
    "nfs-ganesha,nfs-ganesha-gluster,nfs-common,"  # the gateway (its install step finds it) and the kernel client
    "python3"  # the NVIDIA runtime stand-in (tests/integration/stand_ins) is a Python runc wrapper
)
CPU = "qemu64"  # what every guest's CPU is emulated as (TCG)
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
        _prune(keep={final.name})
        progress(f"vm image {final.name}: {(final / 'done').read_text().strip()}")
        return Image(final)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def _prune(keep: set[str], label: str | None = None) -> None:
    """Remove the cache's entries built from older inputs (never one being built): after an
    image, every other image and layer; after a layer, the other layers of its label."""
    for old in CACHE.iterdir():
        if old.name in keep or old.name.startswith("build-"):
            continue
        if label is None or old.name.split("-", 1)[-1].startswith(f"{label}-"):
            shutil.rmtree(old, ignore_errors=True)


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
        self.forwards: dict[str, subprocess.Popen[bytes]] = {}
        subprocess.run(["ip", "netns", "add", self.ns], check=True)
        self._ip("link", "set", "lo", "up")
        self._ip("link", "add", "br0", "type", "bridge")
        self._ip("addr", "add", f"{NET}.1/24", "dev", "br0")
        self._ip("link", "set", "br0", "up")

    def _ip(self, *args: str) -> None:
        subprocess.run(["ip", "-n", self.ns, *args], check=True)

    def start(
        self,
        name: str,
        memory_mb: int = 1536,
        cpus: int = 1,
        threads: int = 1,
        index: int | None = None,
        layer: Path | None = None,
    ) -> Vm:
        """Boot a guest at ``NET.(10 + index)`` (the next free index by default) from an overlay
        of the image, or of a ``layer`` over it; ``cpus`` in one socket, ``threads`` per core."""
        i = index or max((v.index for v in self.vms.values()), default=0) + 1
        vm = Vm(name, f"{NET}.{10 + i}", i, self.dir / f"{name}.pid", self.dir / f"{name}-serial.log")
        overlay = self.dir / f"{name}.qcow2"
        backing = ["-b", str(layer), "-F", "qcow2"] if layer else ["-b", str(self.img.disk), "-F", "raw"]
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", *backing, str(overlay)], check=True)
        self._ip("tuntap", "add", f"tap{i}", "mode", "tap")
        self._ip("link", "set", f"tap{i}", "master", "br0", "up")
        cmdline = (
            "root=/dev/vda rw console=ttyS0 net.ifnames=0 quiet mitigations=off "
            f"ip={vm.address}::{NET}.1:255.255.255.0:{name}:eth0:off systemd.hostname={name}"
        )
        qemu = [
            "ip", "netns", "exec", self.ns, "qemu-system-x86_64", "-name", name,
            "-accel", "tcg,tb-size=256", "-cpu", CPU, "-m", str(memory_mb),
            "-smp", f"{cpus},sockets=1,cores={cpus // threads},threads={threads}",
            "-kernel", str(self.img.dir / "vmlinuz"), "-initrd", str(self.img.dir / "initrd.img"),
            "-append", cmdline, "-drive", f"file={overlay},if=virtio,format=qcow2",
            "-netdev", f"tap,id=n0,ifname=tap{i},script=no,downscript=no",
            "-device", f"virtio-net-pci,netdev=n0,mac=52:54:00:85:00:{10 + i:02x}",
            "-display", "none", "-serial", f"file:{vm.serial}", "-daemonize", "-pidfile", str(vm.pidfile),
        ]  # fmt: skip
        subprocess.run(qemu, check=True)
        self.vms[name] = vm
        return vm

    def _ssh_argv(self, name: str, *options: str) -> list[str]:
        """SSH to the guest as root with the lab's key, from inside the lab's namespace."""
        return [
            "ip", "netns", "exec", self.ns, "ssh", "-i", str(self.img.key), "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
            *options, f"root@{self.vms[name].address}",
        ]  # fmt: skip

    def ssh(self, name: str, command: str, check: bool = True, timeout: float = 300,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
        ssh = [*self._ssh_argv(name, "-o", "ConnectTimeout=5"), command]
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

    def wait_booted(self, name: str, other_than: str | None = None, settled: bool = True) -> float:
        """Wait until the guest answers SSH (with a boot id other than ``other_than``: after a
        reboot) and, when ``settled``, systemd has finished starting up; return the seconds."""
        started = time.monotonic()
        deadline = started + BOOT_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.vms[name].pid() and not _alive(self.vms[name].pid()):
                raise AssertionError(f"{name}: qemu exited; serial console:\n{self.console(name)}")
            bid = self.boot_id(name)
            if bid and bid != other_than:
                if settled:
                    self.ssh(name, "systemctl is-system-running --wait || true", timeout=BOOT_TIMEOUT_S)
                return time.monotonic() - started
            time.sleep(2)
        raise AssertionError(f"{name} did not boot in {BOOT_TIMEOUT_S} s; serial console:\n{self.console(name)}")

    def reboot(self, name: str, settled: bool = True) -> float:
        """``systemctl reboot`` in the guest; the seconds until it is up again."""
        before = self.boot_id(name)
        self.ssh(name, "systemctl reboot", check=False, timeout=30)
        return self.wait_booted(name, other_than=before, settled=settled)

    def docker(self, name: str) -> Path:
        """The guest's Docker socket, forwarded over SSH to ``<lab dir>/<name>-docker/docker.sock``
        (``docker_lab.Dockerd(<that dir>)`` is its API client); stopped with the lab."""
        sock = self.dir / f"{name}-docker" / "docker.sock"
        if name in self.forwards and self.forwards[name].poll() is None:
            return sock
        sock.parent.mkdir(exist_ok=True)
        sock.unlink(missing_ok=True)
        ssh = self._ssh_argv(name, "-o", "ExitOnForwardFailure=yes", "-o", "ServerAliveInterval=10", "-N",
                             "-L", f"{sock}:/run/docker.sock")  # fmt: skip
        self.forwards[name] = proc = subprocess.Popen(ssh, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not sock.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{name}: the SSH forward of Docker's socket did not come up ({proc.poll()=})")
            time.sleep(0.2)
        return sock

    def poweroff(self, name: str) -> None:
        """Power the guest off and wait for its qemu (SIGKILL after 30 s)."""
        self._unforward(name)
        vm = self.vms[name]
        pid = vm.pid()
        if not pid or not _alive(pid):
            return
        with contextlib.suppress(subprocess.TimeoutExpired, AssertionError):
            self.ssh(name, "systemctl poweroff", check=False, timeout=20)
        deadline = time.monotonic() + 30
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.1)

    def remove(self, name: str) -> Path:
        """Power the guest off and forget it (its tap device deleted); return its overlay."""
        self.poweroff(name)
        vm = self.vms.pop(name)
        subprocess.run(["ip", "-n", self.ns, "link", "del", f"tap{vm.index}"], check=False)
        return self.dir / f"{name}.qcow2"

    def _unforward(self, name: str) -> None:
        proc = self.forwards.pop(name, None)
        if proc is not None and proc.poll() is None:
            proc.terminate()
            proc.wait(10)

    def console(self, name: str) -> str:
        with contextlib.suppress(FileNotFoundError):
            return "\n".join(self.vms[name].serial.read_text(errors="replace").splitlines()[-40:])
        return ""

    def stop(self) -> None:
        for name in reversed(list(self.vms)):  # clients before their servers (an NFS mount would wait)
            self.poweroff(name)
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


LAYER_INDEX = 99  # the guest that builds a layer: NET.109, apart from every scenario's guests


def layer(lab: VmLab, label: str, inputs: list[str], prepare: Callable[[str], None], progress=print) -> Path:  # type: ignore[no-untyped-def]
    """A qcow2 layer over the lab's image holding what ``prepare(guest)`` put there (e.g. Docker
    images: a ``docker load`` under TCG takes minutes), cached beside the image, keyed by the
    image, ``label`` and ``inputs``; built on a miss on a guest of its own that is then powered
    off cleanly. Each guest that boots from it still makes its own machine-id."""
    key = hashlib.sha256("\n".join([lab.img.dir.name, label, *inputs]).encode()).hexdigest()[:12]
    final = CACHE / f"{lab.img.dir.name}-{label}-{key}"
    if (final / "done").exists():
        return final / "layer.qcow2"
    started = time.monotonic()
    name = f"{label}-layer"
    lab.start(name, memory_mb=2048, cpus=2, index=LAYER_INDEX)
    try:
        lab.wait_booted(name)
        prepare(name)
        lab.ssh(name, "if mountpoint -q /etc/machine-id; then umount /etc/machine-id; fi; : >/etc/machine-id; sync")
    finally:
        overlay = lab.remove(name)
    work = Path(tempfile.mkdtemp(prefix="build-", dir=CACHE))
    try:
        shutil.move(overlay, work / "layer.qcow2")
        (work / "done").write_text(f"built in {time.monotonic() - started:.0f} s\n")
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(final)
        work.rename(final)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    _prune(keep={lab.img.dir.name, final.name}, label=label)
    progress(f"vm layer {final.name}: {(final / 'done').read_text().strip()}")
    return final / "layer.qcow2"


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
