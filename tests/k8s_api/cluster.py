"""A real Kubernetes control plane on loopback for the k3s tier's tests.

etcd + kube-apiserver (k3s-like flags: service CIDR 10.43.0.0/16, privileged pods allowed, Node and
RBAC authorization, NodeRestriction) + kube-controller-manager + kube-scheduler + kwok (fake
kubelets: nodes go Ready, scheduled pods Running with IPs), all from ``make k8s-api`` (.k8s/),
started in a private directory on /dev/shm and stopped by PID. ``Api`` is a small REST client
(discovery, server-side apply, get/list/delete) on urllib: what the tests see is what the server
says, with its own error messages.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offline import plan
from tests.integration.lab import wait_until

K8S = plan.ROOT / ".k8s"
SERVICE_CIDR = "10.43.0.0/16"  # k3s's defaults
POD_CIDR = "10.42.0.0/24"
FAKE_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")


class ApiError(RuntimeError):
    """The API server refused a request; ``status`` and the server's own message."""

    def __init__(self, status: int, message: str, reason: str = ""):
        super().__init__(f"HTTP {status} {reason}: {message}")
        self.status, self.message, self.reason = status, message, reason


def binaries_missing() -> str | None:
    need = [K8S / "bin" / b for b in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")]
    need += [K8S / "extras" / "bin" / "etcd", K8S / "extras" / "kwok-stages.yaml", K8S / "extras" / "traefik-crds.yaml"]
    missing = [str(p) for p in need if not p.exists()]
    return f"run `make k8s-api` first (missing {', '.join(missing)})" if missing else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Api:
    """The apiserver's REST API with a bearer token; resources found by discovery."""

    server: str
    token: str
    ca_file: Path
    _resources: dict[tuple[str, str], tuple[str, bool]] = field(default_factory=dict)

    @functools.cached_property
    def _context(self) -> ssl.SSLContext:
        """Made once, on first use (the apiserver writes its certificate when it starts)."""
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        ctx.check_hostname = False  # the self-signed serving cert names the advertise address
        return ctx

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json", **query: str
    ) -> Any:
        url = self.server + path + (("?" + urllib.parse.urlencode(query)) if query else "")
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self._context, timeout=30) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as e:
            raw = e.read().decode()
            try:
                status = json.loads(raw)
                raise ApiError(e.code, status.get("message", raw), status.get("reason", "")) from None
            except json.JSONDecodeError:
                raise ApiError(e.code, raw) from None
        return json.loads(text) if text.strip().startswith(("{", "[")) else text

    def resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        """(collection path prefix, namespaced) of ``kind`` in ``api_version``, by discovery."""
        key = (api_version, kind)
        if key not in self._resources:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            try:
                listing = self.request("GET", base)
            except ApiError as e:
                raise ApiError(
                    404, f'no matches for kind "{kind}" in version "{api_version}" ({e.message.strip()})'
                ) from None
            for r in listing["resources"]:
                if r["kind"] == kind and "/" not in r["name"]:
                    self._resources[key] = (f"{base}/{r['name']}", bool(r["namespaced"]))
                    break
            else:
                raise ApiError(404, f'no matches for kind "{kind}" in version "{api_version}"')
        return self._resources[key]

    def forget_discovery(self) -> None:
        self._resources.clear()

    def path(self, api_version: str, kind: str, name: str | None = None, namespace: str | None = None) -> str:
        prefix, namespaced = self.resource(api_version, kind)
        if namespaced and namespace:
            group, plural = prefix.rsplit("/", 1)
            prefix = f"{group}/namespaces/{namespace}/{plural}"
        return prefix + (f"/{name}" if name else "")

    def apply(self, obj: dict[str, Any], manager: str = "hpc-cluster") -> dict[str, Any]:
        """Server-side apply (what the Pulumi provider does with enableServerSideApply)."""
        meta = obj["metadata"]
        path = self.path(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        query = {"fieldManager": manager, "force": "true"}
        result: dict[str, Any] = self.request("PATCH", path, obj, "application/apply-patch+yaml", **query)
        return result

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        result: dict[str, Any] = self.request(
            "POST", self.path(obj["apiVersion"], obj["kind"], None, meta.get("namespace")), obj
        )
        return result

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = self.request("GET", self.path(api_version, kind, name, namespace))
            return result
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def list(self, api_version: str, kind: str, namespace: str | None = None, **query: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.request("GET", self.path(api_version, kind, None, namespace), **query)[
            "items"
        ]
        return items

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"}
        self.request("DELETE", self.path(api_version, kind, name, namespace), body)


class ControlPlane:
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok; ``start``/``stop``."""

    def __init__(self, netns: str | None = None, address: str = "127.0.0.1", port: int | None = None) -> None:
        """On loopback by default; with ``netns``, inside that network namespace (a test host's)
        serving on ``address``:``port`` there, reachable only from that namespace's network."""
        self.dir = Path(tempfile.mkdtemp(prefix="hpc-k8s-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.token = secrets.token_hex(16)
        self.netns, self.address = netns, address
        self.port = port or free_port()
        self.api = Api(f"https://{address}:{self.port}", self.token, self.dir / "pki" / "apiserver.crt")
        self.started_seconds = 0.0

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.dir / f"{name}.log", "wb")  # noqa: SIM115 (kept open for the process's life)
        wrap = ["ip", "netns", "exec", self.netns] if self.netns else []
        self.procs[name] = subprocess.Popen(
            [*wrap, *argv], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def _readyz(self) -> bool:
        if self.netns is None:
            try:
                return self.api.request("GET", "/readyz") == "ok"
            except (OSError, ApiError):
                return False
        curl = ["curl", "-sf", "--max-time", "5", "--cacert", str(self.api.ca_file)]
        curl += ["-H", f"Authorization: Bearer {self.token}", f"{self.api.server}/readyz"]
        proc = subprocess.run(["ip", "netns", "exec", self.netns, *curl], capture_output=True, text=True)
        return proc.stdout == "ok"

    def log(self, name: str, tail: int = 30) -> str:
        path = self.dir / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-tail:]) if path.exists() else ""

    def _alive(self, name: str) -> None:
        code = self.procs[name].poll()
        if code is not None:
            raise RuntimeError(f"{name} exited with {code}:\n{self.log(name)}")

    def start(self, controllers: bool = True) -> ControlPlane:
        """etcd and kube-apiserver; with ``controllers`` also the controller-manager, the
        scheduler and kwok (these reach the API from the root namespace: loopback only)."""
        started = time.monotonic()
        d, b = self.dir, K8S / "bin"
        client, peer = free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{client}"
        self._spawn(
            "etcd",
            [
                str(K8S / "extras" / "bin" / "etcd"),
                "--data-dir",
                str(d / "etcd"),
                "--unsafe-no-fsync",
                "--listen-client-urls",
                etcd_url,
                "--advertise-client-urls",
                etcd_url,
                "--listen-peer-urls",
                f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{peer}",
                "--initial-cluster",
                f"default=http://127.0.0.1:{peer}",
                "--listen-metrics-urls",
                f"http://127.0.0.1:{free_port()}",
            ],
        )
        key = d / "sa.key"
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
        subprocess.run(
            ["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(d / "sa.pub")], check=True, capture_output=True
        )
        (d / "tokens.csv").write_text(f'{self.token},admin,admin,"system:masters"\n')
        self._spawn(
            "kube-apiserver",
            [
                str(b / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                f"--bind-address={self.address}",
                f"--advertise-address={self.address}",
                f"--secure-port={self.port}",
                f"--cert-dir={d / 'pki'}",
                f"--token-auth-file={d / 'tokens.csv'}",
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction",
                "--anonymous-auth=false",
                "--allow-privileged=true",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={d / 'sa.pub'}",
                f"--service-account-signing-key-file={key}",
                "--profiling=false",
            ],
        )

        def ready() -> bool:
            self._alive("etcd")
            self._alive("kube-apiserver")
            return self._readyz()

        wait_until(ready, "kube-apiserver /readyz", timeout=120)
        if not controllers:
            self.started_seconds = time.monotonic() - started
            return self
        kubeconfig = self.write_kubeconfig(d / "admin.kubeconfig", self.api.server)
        kc = f"--kubeconfig={kubeconfig}"
        self._spawn(
            "kube-controller-manager",
            [
                str(b / "kube-controller-manager"),
                kc,
                "--leader-elect=false",
                "--secure-port=0",
                "--use-service-account-credentials=false",
                f"--service-account-private-key-file={key}",
                f"--root-ca-file={self.api.ca_file}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--controllers=*,-nodeipam,-cloud-node-lifecycle",
            ],
        )
        self._spawn("kube-scheduler", [str(b / "kube-scheduler"), kc, "--leader-elect=false", "--secure-port=0"])
        self._spawn(
            "kwok",
            [
                str(b / "kwok"),
                kc,
                f"--config={K8S / 'extras' / 'kwok-stages.yaml'}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=" + "=".join(FAKE_NODE_ANNOTATION),
                f"--cidr={POD_CIDR}",
                "--node-ip=127.0.0.1",
                f"--server-address=127.0.0.1:{free_port()}",
            ],
        )
        # the service account controller (controller-manager) creates each namespace's default account
        wait_until(
            lambda: self._alive_all() or self.api.get("v1", "ServiceAccount", "default", "default"),
            "the default ServiceAccount",
            timeout=90,
        )
        self.started_seconds = time.monotonic() - started
        return self

    def _alive_all(self) -> None:
        for name in self.procs:
            self._alive(name)

    def write_kubeconfig(self, path: Path, server: str) -> Path:
        path.write_text(json.dumps(self.kubeconfig(server)))
        path.chmod(0o600)
        return path

    def kubeconfig(self, server: str) -> dict[str, Any]:
        ca = self.api.ca_file.read_text()
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "test",
                    "cluster": {"server": server, "certificate-authority-data": base64.b64encode(ca.encode()).decode()},
                }
            ],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}],
            "current-context": "test",
        }

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            stop_process(self.procs[name])
        shutil.rmtree(self.dir, ignore_errors=True)


def stop_process(p: subprocess.Popen) -> None:  # type: ignore[type-arg]
    """Stop a process this suite started (in a session of its own) and its children, by PID:
    SIGTERM, then SIGKILL after 15 s."""
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
