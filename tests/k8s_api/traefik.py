"""k3s's ingress controller, real, in front of the applied objects: Traefik (built by ``make
k8s-api`` from its published module) reading Ingresses, Middlewares and Secrets from the test's
control plane, in a network namespace of its own.

Inside that namespace the pod network is a local route, so Traefik's connections to the pods'
addresses (kwok's) end at the stand-in backends (backends.py) and never leave the machine; the
API server is reached through a Unix socket (bridge.py). Traefik listens on the namespace's
ports 80 (``web``) and 443 (``websecure``, TLS), as k3s's chart configures it; ``curl`` runs
there too. Everything started here is stopped by PID, the namespace deleted.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .cluster import K8S, POD_CIDR, ControlPlane, stop_process

BINARY = K8S / "traefik" / "traefik"
HERE = Path(__file__).parent
API_PORT = 6443
_count = 0


def binary_missing() -> str | None:
    return None if BINARY.exists() else f"{BINARY} is missing: run `make k8s-api`"


class Traefik:
    """``start`` (namespace, bridges, Traefik), ``backends`` (the stand-ins), ``curl``, ``stop``."""

    def __init__(self, cp: ControlPlane) -> None:
        global _count
        _count += 1
        self.cp = cp
        self.ns = f"hl{os.getpid() % 100000}t{_count}"
        self.dir = Path(tempfile.mkdtemp(prefix="hpc-traefik-"))
        self.procs: dict[str, subprocess.Popen[str]] = {}

    def _spawn(self, name: str, argv: list[str], netns: bool = True, ready: str | None = None) -> None:
        log = open(self.dir / f"{name}.log", "w")  # noqa: SIM115 (kept open for the process's life)
        wrap = ["ip", "netns", "exec", self.ns] if netns else []
        out = subprocess.PIPE if ready else log
        p = subprocess.Popen([*wrap, *argv], stdout=out, stderr=log, text=True, start_new_session=True)
        self.procs[name] = p
        if ready and p.stdout is not None:
            line = p.stdout.readline()
            assert line.strip() == ready, f"{name} did not start: {line!r}\n{self.log(name)}"

    def log(self, name: str) -> str:
        path = self.dir / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def start(self) -> Traefik:
        subprocess.run(["ip", "netns", "add", self.ns], check=True)
        subprocess.run(["ip", "-n", self.ns, "link", "set", "lo", "up"], check=True)
        # every pod address is this namespace's own: Traefik's connections to pods end here
        subprocess.run(["ip", "-n", self.ns, "route", "add", "local", POD_CIDR, "dev", "lo"], check=True)
        sock = self.dir / "api.sock"
        py = [sys.executable, str(HERE / "bridge.py")]
        self._spawn("bridge-root", [*py, f"unix:{sock}", f"tcp:127.0.0.1:{self.cp.port}"], netns=False, ready="ready")
        self._spawn("bridge-ns", [*py, f"tcp:127.0.0.1:{API_PORT}", f"unix:{sock}"], ready="ready")
        providers = []
        for p in ("kubernetesingress", "kubernetescrd"):
            providers += [
                f"--providers.{p}.endpoint=https://127.0.0.1:{API_PORT}",
                f"--providers.{p}.token={self.cp.token}",
                f"--providers.{p}.certauthfilepath={self.cp.api.ca_file}",
            ]
        self._spawn(
            "traefik",
            [
                str(BINARY),
                "--entryPoints.web.address=:80",
                "--entryPoints.websecure.address=:443",
                "--entryPoints.websecure.http.tls=true",
                "--log.level=INFO",
                *providers,
            ],
        )
        return self

    def backends(self, keys_yaml: str, webui_port: int, models: dict[tuple[str, int], str]) -> None:
        """(Re)start the stand-ins: ``keys_yaml`` is the model servers' --config file."""
        self.stop_backends()
        (self.dir / "api-keys.yaml").write_text(keys_yaml)
        pairs = [f"{a}:{p}={m}" for (a, p), m in models.items()]
        argv = [sys.executable, str(HERE / "backends.py"), str(self.dir / "api-keys.yaml"), str(webui_port), *pairs]
        self._spawn("backends", argv, ready="ready")

    def stop_backends(self) -> None:
        self._stop("backends")

    def curl(self, url: str, *args: str, timeout: int = 10) -> Reply:
        argv = ["ip", "netns", "exec", self.ns, "curl", "-sS", "--max-time", str(timeout), "-o", "-",
                "-w", "\n%{http_code} %{redirect_url}", *args, url]  # fmt: skip
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 10)
        body, _, tail = proc.stdout.rpartition("\n")
        code, _, location = tail.partition(" ")
        return Reply(int(code or 0), body, location, proc.stderr)

    def _stop(self, name: str) -> None:
        p = self.procs.pop(name, None)
        if p is not None:
            stop_process(p)

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            self._stop(name)
        with contextlib.suppress(subprocess.CalledProcessError):
            subprocess.run(["ip", "netns", "delete", self.ns], check=True, capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


class Reply:
    def __init__(self, status: int, body: str, location: str, stderr: str) -> None:
        self.status, self.body, self.location, self.stderr = status, body, location, stderr

    def __repr__(self) -> str:
        return f"Reply({self.status}, {self.body[:200]!r}, location={self.location!r}, stderr={self.stderr[-300:]!r})"


def basic(user: str, password: str) -> str:
    return "Authorization: Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
