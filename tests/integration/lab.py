"""Test hosts on one machine: each a network, mount and UTS namespace with its own sshd.

A ``Lab`` gives every host an address on a private bridge (inside a namespace of its own, nothing
in the root namespace), a hostname, private ``/run``, ``/srv`` (tmpfs), ``/etc`` (a copy) and the
state directories of glusterd and NFS-Ganesha, and a ``systemctl`` stand-in in
``/usr/local/bin`` (there is no systemd here; the production scripts stay unchanged). Scripts
reach the hosts over real SSH from a client namespace, exactly as ``remote.Command`` would.

Teardown stops only what runs inside the lab's own mount namespaces, by PID, then deletes the
namespaces. All traffic stays on the lab's addresses.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration import hostkeys

SHIM = r"""#!/bin/bash
# systemctl stand-in for test hosts without systemd: the few units the scripts manage.
set -euo pipefail
state=/run/hpc-shim
mkdir -p "$state/enabled"
now=0
args=()
for a in "$@"; do
  case $a in
    --quiet | -q) ;;
    --now) now=1 ;;
    *) args+=("$a") ;;
  esac
done
verb=${args[0]:-}
unit=${args[1]:-}
unit=${unit%.service}
pidfile() {
  case $1 in
    glusterd) echo /run/glusterd.pid ;;
    nfs-ganesha) echo /run/ganesha.pid ;;
    rpcbind) echo /run/rpcbind.pid ;;
    ssh) echo /run/sshd-lab.pid ;;
    *) echo "/run/$1.pid" ;;
  esac
}
alive() {
  local p
  case $1 in *.timer) [ -e "$state/active-$1" ]; return ;; esac
  p=$(cat "$(pidfile "$1")" 2>/dev/null) || return 1
  [ -d "/proc/$p" ] && [ "$(awk '{print $3}' "/proc/$p/stat")" != Z ]
}
launch() {
  case $1 in
    glusterd) glusterd -p /run/glusterd.pid ;;
    nfs-ganesha)
      ganesha.nfsd -L /var/log/ganesha/ganesha.log -f /etc/ganesha/ganesha.conf -p /run/ganesha.pid ;;
    rpcbind) rpcbind -w && pgrep -n -x rpcbind >/run/rpcbind.pid ;;
    prometheus-node-exporter)
      setsid prometheus-node-exporter --collector.textfile.directory=/var/lib/prometheus/node-exporter \
        </dev/null >/run/node-exporter.log 2>&1 & echo $! >/run/prometheus-node-exporter.pid ;;
    prometheus)
      # shellcheck disable=SC1091
      ARGS=""; . /etc/default/prometheus
      # shellcheck disable=SC2086
      setsid prometheus --config.file=/etc/prometheus/prometheus.yml \
        --storage.tsdb.path=/var/lib/prometheus/metrics2 $ARGS </dev/null >/run/prometheus.log 2>&1 &
      echo $! >/run/prometheus.pid ;;
    prometheus-alertmanager)
      # shellcheck disable=SC1091
      ARGS=""; [ ! -f /etc/default/prometheus-alertmanager ] || . /etc/default/prometheus-alertmanager
      # shellcheck disable=SC2086
      setsid prometheus-alertmanager --config.file=/etc/prometheus/alertmanager.yml \
        --storage.path=/var/lib/prometheus/alertmanager $ARGS \
        </dev/null >/run/alertmanager.log 2>&1 & echo $! >/run/prometheus-alertmanager.pid ;;
    *.timer) touch "$state/active-$1" ;;  # a timer: the test runs the collector itself
    *)
      # a unit the scripts wrote themselves: its own ExecStart
      [ -f "/etc/systemd/system/$1.service" ] || { echo "systemctl shim: unknown unit $1" >&2; exit 5; }
      cmd=$(sed -n 's/^ExecStart=//p' "/etc/systemd/system/$1.service")
      # shellcheck disable=SC2086
      setsid $cmd </dev/null >"/run/$1.log" 2>&1 &
      echo $! >"/run/$1.pid" ;;
  esac
}
start() {
  alive "$1" && return 0
  launch "$1"
  for _ in $(seq 100); do alive "$1" && return 0; sleep 0.1; done
  echo "systemctl shim: $1 did not start" >&2
  exit 1
}
stop() {
  alive "$1" || return 0
  case $1 in *.timer) rm -f "$state/active-$1"; return 0 ;; esac
  kill -TERM "$(cat "$(pidfile "$1")")"
  for _ in $(seq 300); do alive "$1" || return 0; sleep 0.1; done
  echo "systemctl shim: $1 did not stop" >&2
  exit 1
}
case $verb in
  is-active) alive "$unit" ;;
  is-enabled) [ -e "$state/enabled/$unit" ] ;;
  enable) touch "$state/enabled/$unit"; if [ $now = 1 ]; then start "$unit"; fi ;;
  disable) rm -f "$state/enabled/$unit"; if [ $now = 1 ]; then stop "$unit"; fi ;;
  start) start "$unit" ;;
  stop) stop "$unit" ;;
  restart) stop "$unit"; start "$unit" ;;
  reload) alive "$unit" && kill -HUP "$(cat "$(pidfile "$unit")")" ;;
  daemon-reload) ;;
  *) echo "systemctl shim: unsupported: $*" >&2; exit 2 ;;
esac
"""

HOST_INIT = r"""#!/bin/bash
# Becomes the namespace holder of one test host: private mounts, hostname, then sleep.
set -euo pipefail
name=$1 H=$2 LAB=$3
hostname "$name"
# A private /etc (a copy of this machine's): host scripts write fstab, config files, drop-ins and
# accounts there without touching the machine running the tests.
cp -a /etc/. "$H/etc/"
mount --bind "$H/etc" /etc
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /run/sshd /run/gluster /run/lock /run/munge
for pair in var-lib-glusterd:/var/lib/glusterd log-glusterfs:/var/log/glusterfs \
            var-lib-nfs:/var/lib/nfs log-ganesha:/var/log/ganesha etc-ganesha:/etc/ganesha \
            shim:/usr/local/bin var-lib-prometheus:/var/lib/prometheus libexec:/usr/local/libexec \
            sbin:/usr/local/sbin var-lib-hpc:/var/lib/hpc-cluster var-cache-hpc:/var/cache/hpc-cluster; do
  mkdir -p "${pair#*:}"
  mount --bind "$H/${pair%%:*}" "${pair#*:}"
done
cp "$LAB/hosts" /etc/hosts
printf '# test host fstab\n' >/etc/fstab
mount -t tmpfs -o size=512m tmpfs /srv
# The system bus every booted Debian host has: NFS-Ganesha's export manager answers on it.
mkdir -p /run/dbus
dbus-daemon --system --fork
echo $$ >"$H/holder.pid"
exec sleep infinity
"""

SSHD_CONFIG = """\
Include /etc/ssh/sshd_config.d/*.conf
Port 22
ListenAddress 0.0.0.0
PidFile /run/sshd-lab.pid
AuthorizedKeysFile {lab}/authorized_keys %h/.ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
UseDNS no
MaxStartups 100:30:200
MaxSessions 50
"""


@dataclass(frozen=True)
class Host:
    name: str
    address: str
    holder: int


class Lab:
    """Hosts in namespaces on a private /24, plus client namespaces for SSH and NFS clients."""

    _count = 0  # labs made by this process: each gets its own namespace names

    def __init__(
        self,
        names: list[str],
        net: str = "10.77.0",
        clients: dict[str, str] | None = None,
        extra_addresses: dict[str, list[str]] | None = None,
    ):
        Lab._count += 1
        self.prefix = f"hl{os.getpid() % 100000}x{Lab._count}"
        self.net = net
        self.names = names
        self.clients = clients or {"cl": f"{net}.2"}
        self.dir = Path(tempfile.mkdtemp(prefix="hpc-lab-"))
        self.dir.chmod(0o755)  # munge needs every directory up to its socket world-executable
        self.extra_addresses = extra_addresses or {}
        self.hosts: dict[str, Host] = {}
        self._netns: list[str] = []

    # ---- lifecycle -------------------------------------------------------------------------------
    def address(self, i: int) -> str:
        return f"{self.net}.{11 + i}"

    def up(self) -> Lab:
        d = self.dir
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "client_key")], check=True)
        shutil.copy(d / "client_key.pub", d / "authorized_keys")
        (d / "hosts").write_text(
            "127.0.0.1 localhost\n" + "".join(f"{self.address(i)} {n}\n" for i, n in enumerate(self.names))
        )
        (d / "sshd_config").write_text(SSHD_CONFIG.format(lab=d))
        (d / "host-init.sh").write_text(HOST_INIT)
        (d / "ssh_config").write_text(
            f"Host *\n  User root\n  IdentityFile {d}/client_key\n  IdentitiesOnly yes\n"
            "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
            "  BatchMode yes\n  ConnectTimeout 5\n"
        )
        sw = f"{self.prefix}-sw"
        self._ip("netns", "add", sw)
        self._netns.append(sw)
        self._ip("-n", sw, "link", "set", "lo", "up")
        self._ip("-n", sw, "link", "add", "br0", "type", "bridge")
        self._ip("-n", sw, "link", "set", "br0", "up")
        ports = [(n, self.address(i)) for i, n in enumerate(self.names)] + list(self.clients.items())
        for k, (name, addr) in enumerate(ports):
            ns = f"{self.prefix}-{name}"
            self._ip("netns", "add", ns)
            self._netns.append(ns)
            self._ip("link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", f"p{k}", "netns", sw)
            self._ip("-n", sw, "link", "set", f"p{k}", "master", "br0", "up")
            self._ip("-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
            for extra in self.extra_addresses.get(name, []):
                self._ip("-n", ns, "addr", "add", f"{extra}/24", "dev", "eth0")
            self._ip("-n", ns, "link", "set", "eth0", "up")
            self._ip("-n", ns, "link", "set", "lo", "up")
        for i, name in enumerate(self.names):
            self._start_host(i, name)
        for name in self.names:
            wait_until(lambda n=name: self.ssh(n, "true", check=False).returncode == 0, f"ssh to {name}")
        return self

    def _start_host(self, i: int, name: str) -> None:
        h = self.dir / name
        for sub in (
            "var-lib-glusterd",
            "log-glusterfs",
            "var-lib-nfs/ganesha",
            "log-ganesha",
            "etc-ganesha",
            "shim",
            "var-lib-prometheus/node-exporter",
            "var-lib-prometheus/metrics2",
            "var-lib-prometheus/alertmanager",
            "libexec",
            "sbin",
            "var-lib-hpc",
            "var-cache-hpc",
        ):
            (h / sub).mkdir(parents=True, exist_ok=True)
        for pkg_dir in ("groups", "hooks"):
            src = Path("/var/lib/glusterd") / pkg_dir
            if src.exists():
                shutil.copytree(src, h / "var-lib-glusterd" / pkg_dir, dirs_exist_ok=True)
        (h / "etc").mkdir(exist_ok=True)
        shim = h / "shim" / "systemctl"
        shim.write_text(SHIM)
        shim.chmod(0o755)
        with open(h / "holder.log", "w") as log:
            subprocess.Popen(
                [
                    "setsid",
                    "nsenter",
                    f"--net=/run/netns/{self.prefix}-{name}",
                    "--",
                    "unshare",
                    "--mount",
                    "--uts",
                    "--propagation",
                    "private",
                    "--",
                    "bash",
                    str(self.dir / "host-init.sh"),
                    name,
                    str(h),
                    str(self.dir),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_until(
            lambda: (h / "holder.pid").exists() and (h / "holder.pid").read_text().strip() != "",
            f"{name} holder",
        )
        holder = int((h / "holder.pid").read_text())
        self.hosts[name] = Host(name, self.address(i), holder)
        self.on(
            name,
            [
                "/usr/sbin/sshd",
                "-f",
                str(self.dir / "sshd_config"),
                "-h",
                str(hostkeys.key_file(name)),
                "-E",
                str(h / "sshd.log"),
            ],
        )

    def down(self) -> None:
        own_mnt = os.readlink("/proc/self/ns/mnt")
        for host in self.hosts.values():
            try:
                mnt = os.readlink(f"/proc/{host.holder}/ns/mnt")
            except OSError:
                continue
            if mnt == own_mnt:
                continue
            for sig, grace in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 5.0)):
                pids = self._pids_in(mnt, exclude=host.holder)
                for p in pids:
                    _kill(p, sig)
                deadline = time.monotonic() + grace
                while self._pids_in(mnt, exclude=host.holder) and time.monotonic() < deadline:
                    time.sleep(0.2)
            _kill(host.holder, signal.SIGTERM)
        for ns in reversed(self._netns):
            subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    @staticmethod
    def _pids_in(mnt: str, exclude: int) -> list[int]:
        out = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == exclude:
                continue
            try:
                if os.readlink(f"/proc/{entry}/ns/mnt") != mnt:
                    continue
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                out.append(int(entry))
        return out

    # ---- running things --------------------------------------------------------------------------
    def ssh(
        self,
        host: str,
        command: str,
        stdin: str | None = None,
        check: bool = True,
        timeout: float = 300,
        client: str = "cl",
        host_key: str | None = None,
        user: str = "root",
    ) -> subprocess.CompletedProcess[str]:
        """Run ``command`` on ``host`` over SSH from a client namespace. With ``host_key`` (a
        step's pinned key) the host must answer with exactly that key."""
        addr = self.hosts[host].address if host in self.hosts else host
        pin: list[str] = []
        if host_key:
            known = self.dir / f"known_hosts-{addr}"
            known.write_text(f"{addr} {host_key}\n")
            pin = ["-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known}"]
        ssh = ["ip", "netns", "exec", f"{self.prefix}-{client}", "ssh", "-F", str(self.dir / "ssh_config")]
        proc = subprocess.run(
            [*ssh, *pin, f"{user}@{addr}", command],
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{host}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def on(self, host: str, argv: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside a host's namespaces without SSH."""
        proc = subprocess.run(
            ["nsenter", "-t", str(self.hosts[host].holder), "-m", "-u", "-n", "--", *argv],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{host}: {argv}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def in_client(self, client: str, argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ip", "netns", "exec", f"{self.prefix}-{client}", *argv],
            capture_output=True,
            text=True,
            timeout=120,
            **kw,
        )  # type: ignore[call-overload]

    def _ip(self, *args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True)


def require(*tools: str) -> None:
    """Skip the calling fixture unless this is root with every tool a lab needs."""
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")
    if missing := missing_tools(*tools):
        pytest.skip(f"missing tools: {missing}")


def stack_network(net: str) -> dict[str, str]:
    """``hpc:network`` for a test stack on a lab's /24: the gateway at .254, containers in .32/27."""
    return {
        "subnet": f"{net}.0/24",
        "gateway": f"{net}.254",
        "parentInterface": "eth0",
        "containerRange": f"{net}.32/27",
    }


def wait_until(pred, what: str, timeout: float = 20):  # type: ignore[no-untyped-def]
    """Poll ``pred`` until it returns something truthy, and return that; a failing probe
    (OSError, a timed-out command) counts as false. The timeout names ``what`` and the last value."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = pred()
            if last:
                return last
        except (OSError, subprocess.TimeoutExpired) as e:
            last = e
        time.sleep(0.2)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def missing_tools(*tools: str) -> list[str]:
    return [t for t in tools if shutil.which(t) is None and not Path(t).exists()]
