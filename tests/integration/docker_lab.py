"""Real Docker engines for the lab, and the plan's docker records applied through the Docker API.

* One ``dockerd`` per test host, started inside that host's namespaces (``nsenter``, not
  ``ip netns exec``, which remounts /sys and hides the cgroup mounts dockerd needs), with no
  bridge and no iptables rules: the hosts' containers use the plan's macvlan network only.
* A builder ``dockerd`` on this machine, also without bridge or iptables, builds the images with
  the host's network (the test hosts have no route to the Debian mirror; pulumi would build on
  each host). Built images move to the host daemons with ``docker save``/``load``.
* The base images: stand-ins made with debootstrap (minbase) from the Debian mirror apt uses,
  registered under the Dockerfiles' pinned ``<image>:<tag>@sha256:<digest>`` (a test-only
  mapping in the daemon's repositories.json: no registry is reachable here). ``STAND_INS`` says
  which suite and packages stand in for which base: ``debian:trixie-slim`` is trixie itself;
  ``python:3.11-slim-bookworm`` is bookworm with its Python 3.11 and pip (the official image
  builds Python 3.11 into /usr/local instead). Stand-ins trust this machine's CA bundle, so
  a build can reach PyPI through this site's TLS-inspecting egress. The Dockerfiles are built
  unchanged.
* Builds are cached per user (``~/.cache/hpc-cluster/images``) by image name, which carries the
  build context's hash, and the base by suite: a warm run loads tarballs instead of building.

Every daemon is stopped by PID; ``net.ipv4.ip_forward``, which dockerd sets, is restored.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
from docker import types as dtypes

from offline.mocks import plain
from offline.plan import ROOT, Record

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hpc-cluster" / "images"
DEBIAN_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 60
STALL_S = 120  # a starting service that neither prints nor uses CPU for this long is stuck
POLL_S = 0.5
IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")

# Test-only stand-ins for the pinned bases: image name -> (Debian suite, packages added to minbase).
STAND_INS: dict[str, tuple[str, tuple[str, ...]]] = {
    "debian:trixie-slim": ("trixie", ()),
    "python:3.11-slim-bookworm": ("bookworm", ("python3", "python3-pip", "ca-certificates")),
}


def memlock_ceiling() -> int:
    """The hard locked-memory limit no process here may raise (bytes; -1: none). These machines
    withhold CAP_SYS_RESOURCE, so Docker cannot give a container more than this one has."""
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    return -1 if hard == resource.RLIM_INFINITY else hard


def lab_ulimit(u: dict[str, Any]) -> dtypes.Ulimit:
    """A recorded ulimit as Docker applies it; test-only: a memlock above this machine's ceiling
    (the plan's unlimited) is clamped to it, or runc refuses the container ("error setting
    rlimits ... operation not permitted")."""
    soft, hard, ceiling = int(u["soft"]), int(u["hard"]), memlock_ceiling()
    if u["name"] == "memlock" and ceiling >= 0:
        soft, hard = (ceiling if v < 0 or v > ceiling else v for v in (soft, hard))
    return dtypes.Ulimit(name=u["name"], soft=soft, hard=hard)


def mirror() -> str:
    """The Debian mirror apt uses on this machine."""
    match = re.search(r"^URIs:\s*(\S+)", DEBIAN_SOURCES.read_text(), re.M)
    assert match, f"no URIs in {DEBIAN_SOURCES}"
    return match.group(1)


def pinned_bases(dockerfile: Path) -> list[str]:
    return re.findall(r"^FROM\s+(\S+@sha256:[0-9a-f]{64})", dockerfile.read_text(), re.M)


class Dockerd:
    """One Docker daemon; inside a test host's namespaces when ``holder`` (its PID) is given."""

    def __init__(
        self, root: Path, holder: int | None = None, listen: list[str] | None = None, extra: list[str] | None = None
    ):
        self.root = root
        self.holder = holder
        self.listen = listen or []  # more sockets, e.g. the host's default for its docker CLI
        self.extra = extra or []  # more dockerd flags, e.g. --insecure-registry for the lab's registry
        self.sock = root / "docker.sock"
        self.proc: subprocess.Popen[bytes] | None = None
        root.mkdir(parents=True, exist_ok=True)

    @property
    def api(self) -> docker.APIClient:
        return docker.APIClient(base_url=f"unix://{self.sock}", version="auto", timeout=600)

    def start(self) -> Dockerd:
        argv = [
            "dockerd", "-H", f"unix://{self.sock}", "--data-root", str(self.root / "data"),
            "--exec-root", str(self.root / "exec"), "--pidfile", str(self.root / "dockerd.pid"),
            "--storage-driver=overlay2", "--bridge=none", "--iptables=false", "--ip6tables=false",
            *(f"-H{s}" for s in self.listen), *self.extra,
        ]  # fmt: skip
        if self.holder is not None:
            argv = ["nsenter", "-t", str(self.holder), "-m", "-u", "-n", "--", *argv]
        with open(self.root / "dockerd.log", "ab") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dockerd exited: {self.log_tail()}")
            try:
                if self.sock.exists() and self.api.ping():
                    return self
            except docker.errors.DockerException:
                pass
            time.sleep(0.3)
        raise TimeoutError(f"dockerd did not answer in {START_TIMEOUT_S}s: {self.log_tail()}")

    def stop(self) -> None:
        """Stop the daemon by PID (it stops its containers first; live-restore is off)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def log_tail(self, lines: int = 15) -> str:
        path = self.root / "dockerd.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    # ---- images --------------------------------------------------------------------------------
    def map_base(self, rootfs_tar: Path, pinned: str) -> None:
        """Import the debootstrapped rootfs as ``repo:tag`` and register it under ``pinned``'s
        digest too (restarts the daemon: it reads repositories.json only at start)."""
        name, digest = pinned.split("@", 1)
        repo, tag = name.rsplit(":", 1)
        with open(rootfs_tar, "rb") as f:
            self.api.import_image_from_data(f.read(), repository=repo, tag=tag)
        self.stop()
        path = self.root / "data" / "image" / "overlay2" / "repositories.json"
        data = json.loads(path.read_text())
        refs = data["Repositories"][repo]
        refs[f"{repo}@{digest}"] = refs[name]
        path.write_text(json.dumps(data))
        self.start()

    def build(self, record: Record, tag: str | None = None, progress: Callable[[str], None] | None = None) -> str:
        """Build a recorded docker.Image: its context, Dockerfile, platform (and image name).
        ``progress`` gets every line of the build's output as it comes."""
        inputs = plain(record.inputs)
        build, tag = inputs["build"], tag or inputs["imageName"]
        context = ROOT / build["context"]
        dockerfile = os.path.relpath(ROOT / build["dockerfile"], context)
        log = []
        for chunk in self.api.build(path=str(context), dockerfile=dockerfile, tag=tag, platform=build.get("platform"),
                                    network_mode="host", rm=True, forcerm=True, decode=True):
            log.append(chunk.get("stream", "") or chunk.get("error", ""))
            if progress is not None and log[-1].strip():
                progress(log[-1].rstrip())
            if "error" in chunk:
                raise RuntimeError(f"build of {tag} failed: {chunk['error']}\n{''.join(log[-20:])}")
        return tag

    def save(self, tag: str, out: Path) -> None:
        tmp = out.with_suffix(".part")
        with open(tmp, "wb") as f:
            for chunk in self.api.get_image(tag):
                f.write(chunk)
        tmp.rename(out)

    def load(self, tar: Path) -> None:
        with open(tar, "rb") as f:
            for _ in self.api.load_image(f):
                pass

    def load_as(self, tar: Path, tag: str) -> None:
        """Load a cached tarball (tagged ``hpc-cluster/<name>:<hash>``) and name it ``tag``."""
        self.load(tar)
        local = "hpc-cluster/" + tag.rsplit("/", 1)[-1]
        if local != tag:
            repo, version = tag.rsplit(":", 1)
            self.api.tag(local, repo, version)

    def image_size(self, tag: str) -> int:
        return int(self.api.inspect_image(tag)["Size"])

    # ---- the plan's network and container records ----------------------------------------------
    def create_network(self, record: Record) -> str:
        inputs = plain(record.inputs)
        pools = [
            dtypes.IPAMPool(subnet=c["subnet"], gateway=c.get("gateway"), iprange=c.get("ipRange"))
            for c in inputs.get("ipamConfigs", [])
        ]
        net = self.api.create_network(
            inputs["name"], driver=inputs.get("driver"), options=inputs.get("options"),
            ipam=dtypes.IPAMConfig(pool_configs=pools),
        )  # fmt: skip
        return str(net["Id"])

    def run_container(self, record: Record, replace: bool = False) -> str:
        """Create and start a recorded docker.Container with every input the program sets."""
        spec = plain(record.inputs)
        known = {"name", "image", "hostname", "command", "envs", "hosts", "networksAdvanced", "devices", "volumes",
                 "cgroupnsMode", "capabilities", "restart", "mustRun", "stopTimeout", "runtime", "shmSize", "ulimits"}
        assert set(spec) <= known, f"inputs the test does not apply: {sorted(set(spec) - known)}"
        if replace:
            self.remove_container(spec["name"])
        binds = {
            v["hostPath"]: {"bind": v["containerPath"], "mode": "ro" if v.get("readOnly") else "rw"}
            for v in spec.get("volumes", [])
        }
        host_config = self.api.create_host_config(
            binds=binds,
            devices=[
                f"{d['hostPath']}:{d['containerPath']}:{d.get('permissions', 'rwm')}" for d in spec.get("devices", [])
            ],
            extra_hosts={h["host"]: h["ip"] for h in spec.get("hosts", [])},
            cap_add=(spec.get("capabilities") or {}).get("adds"),
            restart_policy={"Name": spec["restart"]} if spec.get("restart") else None,
            cgroupns=spec.get("cgroupnsMode"),
            runtime=spec.get("runtime"),
            shm_size=f"{int(spec['shmSize'])}m" if "shmSize" in spec else None,  # the provider's unit: MiB
            ulimits=[lab_ulimit(u) for u in spec.get("ulimits", [])],
        )
        nets = spec.get("networksAdvanced", [])
        networking = None
        if nets:
            networking = self.api.create_networking_config(
                {n["name"]: self.api.create_endpoint_config(ipv4_address=n.get("ipv4Address")) for n in nets}
            )
            host_config["NetworkMode"] = nets[0]["name"]
        created = self.api.create_container(
            spec["image"], command=spec.get("command"), name=spec["name"], hostname=spec.get("hostname"),
            environment=spec.get("envs"), host_config=host_config, networking_config=networking,
            stop_timeout=int(spec["stopTimeout"]) if "stopTimeout" in spec else None,
        )  # fmt: skip
        if spec.get("mustRun", True):
            self.api.start(created["Id"])
        return str(created["Id"])

    def remove_container(self, name: str) -> None:
        with contextlib.suppress(docker.errors.NotFound):
            self.api.remove_container(name, force=True)

    def health(self, name: str) -> str:
        state = self.api.inspect_container(name)["State"]
        return str((state.get("Health") or {}).get("Status", "none"))

    def tail(self, name: str, lines: int = 30) -> str:
        """A container's state, last output lines and last health-check outputs: why it is not ready."""
        info = self.api.inspect_container(name)
        state = info["State"]
        health = [h.get("Output", "").strip() for h in (state.get("Health") or {}).get("Log", [])[-2:]]
        logs = self.api.logs(name, tail=lines).decode(errors="replace")
        return (f"{name}: {state['Status']} (exit code {state['ExitCode']}); health checks: {health}\n"
                f"--- its last {lines} lines:\n{logs}")

    def wait_ready(self, name: str, ready: Callable[[], object], what: str, stall_s: float = STALL_S) -> object:
        """Poll ``ready`` while the container ``name`` makes progress, and return its first truthy
        value. No wall-clock guess: it fails at once when the container exits, and when neither
        its output nor its CPU time has moved for ``stall_s``; either failure carries the
        container's own last lines. (The test's own time limit still bounds the whole wait.)"""
        seen: tuple[int, int] | None = None
        moved = time.monotonic()
        while True:
            try:
                if value := ready():
                    return value
            except (OSError, subprocess.TimeoutExpired):
                pass
            state = self.api.inspect_container(name)["State"]
            if not state["Running"]:
                raise AssertionError(f"{what}: the container stopped\n{self.tail(name)}")
            cpu = self.api.stats(name, stream=False, one_shot=True)["cpu_stats"]["cpu_usage"]["total_usage"]
            mark = (len(self.api.logs(name)), int(cpu))
            if mark != seen:
                seen, moved = mark, time.monotonic()
            elif time.monotonic() - moved > stall_s:
                raise TimeoutError(f"{what}: no output and no CPU time for {stall_s:.0f}s\n{self.tail(name)}")
            time.sleep(POLL_S)

    def exec(self, name: str, cmd: str, user: str = "", workdir: str | None = None) -> tuple[int, str]:
        e = self.api.exec_create(name, ["bash", "-c", cmd], user=user, workdir=workdir)
        out = self.api.exec_start(e["Id"]).decode(errors="replace")
        return int(self.api.exec_inspect(e["Id"])["ExitCode"]), out


# ---- a resolver for the lab -------------------------------------------------------------------------
NXDOMAIN_SERVER = r"""
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 53))
while True:
    q, peer = s.recvfrom(4096)
    if len(q) < 17:
        continue
    end = 12
    while end < len(q) and q[end] != 0:
        end += q[end] + 1
    question = q[12:end + 5]
    # same id, QR + RD + RA, RCODE 3 (NXDOMAIN), one question, no records
    s.sendto(q[:2] + b"\x81\x83" + b"\x00\x01" + b"\x00" * 6 + question, peer)
"""


def nxdomain_resolver(netns: str) -> subprocess.Popen[bytes]:
    """A resolver that answers every query at once with NXDOMAIN, as a site resolver without
    records for the lab answers (port-unreachable replies are rate-limited by the kernel, so a
    silent address makes glibc wait 5 s per try). Stop it by PID."""
    return subprocess.Popen(["ip", "netns", "exec", netns, "python3", "-c", NXDOMAIN_SERVER],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# ---- the base image ---------------------------------------------------------------------------------
def base_rootfs(suite: str, packages: tuple[str, ...] = ()) -> Path:
    """A minbase rootfs of ``suite`` (plus ``packages``) as a tarball, cached per user; apt inside
    points at the same mirror (suite, -updates, -security), pip may install system-wide (as in
    the official Python images) and TLS trusts this machine's CA bundle."""
    out = CACHE / ("-".join(["debian", suite, "minbase", *packages]) + ".tar")
    if out.exists():
        return out
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="hpc-rootfs-"))
    rootfs = work / "rootfs"
    include = [f"--include={','.join(packages)}"] if packages else []
    try:
        subprocess.run(["debootstrap", "--variant=minbase", *include, suite, str(rootfs), mirror()], check=True,
                       capture_output=True, timeout=900)
        (rootfs / "etc/apt/sources.list").unlink(missing_ok=True)
        security = mirror().replace("/debian", "/debian-security")
        (rootfs / "etc/apt/sources.list.d/debian.sources").write_text(
            f"Types: deb\nURIs: {mirror()}\nSuites: {suite} {suite}-updates\nComponents: main\n"
            "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
            f"Types: deb\nURIs: {security}\nSuites: {suite}-security\nComponents: main\n"
            "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        )
        for marker in rootfs.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
            marker.unlink()
        if HOST_CA_BUNDLE.exists():
            (rootfs / "etc/ssl/certs").mkdir(parents=True, exist_ok=True)
            shutil.copy(HOST_CA_BUNDLE, rootfs / "etc/ssl/certs/ca-certificates.crt")
        for sub in ("var/lib/apt/lists", "var/cache/apt"):
            shutil.rmtree(rootfs / sub, ignore_errors=True)
            (rootfs / sub).mkdir(parents=True)
        tmp = out.with_suffix(".part")
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tmp), "."], check=True)
        tmp.rename(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def local_name(record: Record) -> str:
    """The name a recorded image is built and cached under: ``hpc-cluster/<name>:<hash>``."""
    return "hpc-cluster/" + plain(record.inputs)["imageName"].rsplit("/", 1)[-1]


def cached_tar(record: Record) -> Path:
    """Where the tarball of a recorded image is cached (it may not exist yet)."""
    return CACHE / (re.sub(r"[^A-Za-z0-9._-]", "_", local_name(record)) + ".tar")


class Builder:
    """The builder daemon: builds each distinct recorded image once, caches it as a tarball."""

    def __init__(self, root: Path, progress: Callable[[str], None] | None = None):
        self.root = root
        self.progress = progress  # every build line, as it comes (the images phase prints them)
        self.daemon: Dockerd | None = None
        self.forward = IP_FORWARD.read_text()
        self.timings: dict[str, float] = {}

    def image(self, record: Record) -> Path:
        """The tarball of a recorded image, built on a cache miss. Cached by the image's last path
        component (name and context hash), whatever registry the record names: the same context
        is the same image. ``Dockerd.load_as`` gives it the record's name on a host."""
        tag = plain(record.inputs)["imageName"]
        local = local_name(record)
        out = cached_tar(record)
        if out.exists():
            return out
        daemon = self._daemon(record)
        started = time.monotonic()
        daemon.build(record, tag=local, progress=self.progress)
        self.timings[tag] = time.monotonic() - started
        daemon.save(local, out)
        # Keep one tarball per image repository: older contexts are never loaded again.
        stem = out.name.rsplit("_", 1)[0] + "_"
        for old in CACHE.glob(stem + "*.tar"):
            if old != out:
                old.unlink()
        return out

    def _daemon(self, record: Record) -> Dockerd:
        if self.daemon is None:
            self.daemon = Dockerd(self.root).start()
        dockerfile = ROOT / plain(record.inputs)["build"]["dockerfile"]
        for pinned in pinned_bases(dockerfile):
            tagged = pinned.split("@", 1)[0]
            if not self.daemon.api.images(name=tagged):
                assert tagged in STAND_INS, f"no test stand-in for the base {tagged} (docker_lab.STAND_INS)"
                if self.progress is not None:
                    self.progress(f"base {tagged}: the debootstrapped {STAND_INS[tagged][0]} stand-in")
                self.daemon.map_base(base_rootfs(*STAND_INS[tagged]), pinned)
        return self.daemon

    def stop(self) -> None:
        """Stop the daemon by PID, unmount what it left on this machine (it runs in the root
        mount namespace: its exec root keeps a bind mount of the network namespace), restore
        ip_forward."""
        if self.daemon is not None:
            self.daemon.stop()
            root = str(self.root.resolve())
            mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
            for point in sorted((m for m in mounts if m.startswith(root + "/")), reverse=True):
                subprocess.run(["umount", "-l", point], check=False, capture_output=True)
            # Only a builder that started dockerd (which sets it) restores it: another lane's
            # builder may be running beside this one.
            IP_FORWARD.write_text(self.forward)
