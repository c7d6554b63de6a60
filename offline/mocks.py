"""Plausible provider behaviour for the offline plan: the one place that says what mocks return.

Under ``pulumi.runtime`` mocks no provider runs; a resource's outputs are exactly what
``new_resource`` returns. These mocks echo the inputs and add, per resource type, the outputs the
real provider would compute, deterministically (hashes of the resource name, never random), so
downstream wiring (``apply``s, dependencies, secret propagation) is exercised:

=========================================== ===================================================
type                                        computed outputs
=========================================== ===================================================
``random:index/randomPassword:Random...``   ``result`` (``length`` chars, alphanumeric),
                                            ``bcryptHash``; both become secret (engine rule)
``random:index/randomBytes:RandomBytes``    ``base64``, ``hex`` of ``length`` stand-in bytes
``command:remote:Command``                  ``stdout`` ("" unless the script header declares
                                            ``# hpc: mock-stdout=kubeconfig``: then a kubeconfig
                                            for the host), ``stderr`` ("")
``docker:index/image:Image``                ``repoDigest``, ``imageId``, ``baseImageName``
``docker:index/remoteImage:RemoteImage``    ``repoDigest`` (its ``name``: pulled by digest), ``imageId``
``docker:index/container:Container``        ``id``-like ``name`` echo, ``exitCode`` none
``docker:index/network:Network``            ``name`` echo
``kubernetes:*``                            ``metadata.name`` (provider auto-name when unset),
                                            ``metadata.namespace`` for namespaced kinds,
                                            ``metadata.uid``; ``status`` for Services
=========================================== ===================================================

Stand-in secret values carry the ``MOCK-SECRET`` prefix so tests can prove none leaks.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pulumi

from components import scripts

MOCK_SECRET_PREFIX = "MOCK-SECRET"
CLUSTER_SCOPED_KINDS = frozenset(
    {
        "Namespace",
        "StorageClass",
        "RuntimeClass",
        "ClusterRole",
        "ClusterRoleBinding",
        "PersistentVolume",
        "Node",
    }
)


def _digest(*parts: str, n: int = 64) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:n]


def stand_in_secret(key: str) -> str:
    """Deterministic stand-in for a secret the plan cannot decrypt."""
    return f"{MOCK_SECRET_PREFIX}-{_digest('config', key, n=24)}"


def plain(v: Any) -> Any:
    """A recorded value without its secret marker (for reading, never for writing out)."""
    from pulumi.runtime import rpc

    return plain(v["value"]) if rpc.is_rpc_secret(v) else v


def mock_kubeconfig(server: str) -> str:
    """A kubeconfig like the one k3s writes, with stand-in credentials."""
    cred = f"{MOCK_SECRET_PREFIX}-{_digest('kubeconfig', server, n=24)}"
    return (
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n"
        f"    certificate-authority-data: {base64.b64encode(cred.encode()).decode()}\n"
        f"    server: https://{server}:6443\n  name: default\n"
        "contexts:\n- context:\n    cluster: default\n    user: default\n  name: default\n"
        "current-context: default\nusers:\n- name: default\n  user:\n"
        f"    token: {cred}\n"
    )


class PlanMocks(pulumi.runtime.Mocks):
    """Deterministic fake providers for every package the program uses."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict]:
        t, name = args.typ, args.name
        state = dict(args.inputs)
        rid = f"{name}-{_digest(t, name, n=8)}" if args.custom else ""
        if t == "random:index/randomPassword:RandomPassword":
            length = int(plain(state.get("length", 16)))
            body = (_digest("password", name) * 4)[: max(0, length - len(MOCK_SECRET_PREFIX))]
            state["result"] = (MOCK_SECRET_PREFIX + body)[:length]
            state["bcryptHash"] = f"$2a$10${MOCK_SECRET_PREFIX}{_digest('bcrypt', name, n=40)}"
        elif t == "random:index/randomBytes:RandomBytes":
            length = int(plain(state.get("length", 32)))
            raw = (MOCK_SECRET_PREFIX.encode() + bytes.fromhex(_digest("bytes", name) * 64))[:length]
            state["base64"] = base64.b64encode(raw).decode()
            state["hex"] = raw.hex()
        elif t == "command:remote:Command":
            headers = scripts.headers(scripts.unwrap(str(plain(state.get("create", "")))))
            stdout = ""
            if headers.get("mock-stdout") == "kubeconfig":
                conn = plain(state.get("connection")) or {}
                stdout = mock_kubeconfig(str(conn.get("host", "127.0.0.1")))
            state["stdout"] = stdout
            state["stderr"] = ""
        elif t == "docker:index/image:Image":
            image = str(plain(state.get("imageName", "")))
            repo = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
            state["repoDigest"] = f"{repo}@sha256:{_digest('image', image)}"
            state["imageId"] = f"sha256:{_digest('id', image)}"
            state["baseImageName"] = image
        elif t == "docker:index/remoteImage:RemoteImage":
            ref = str(plain(state.get("name", "")))
            state["repoDigest"] = ref  # pulled by digest: the reference is the digest
            state["imageId"] = f"sha256:{_digest('id', ref)}"
        elif t.startswith("kubernetes:") and not t.startswith("kubernetes:yaml"):
            kind = t.rsplit(":", 1)[-1].removesuffix("Patch")
            md = dict(plain(state.get("metadata")) or {})
            md.setdefault("name", f"{name}-{_digest('k8s', name, n=8)}")
            if kind not in CLUSTER_SCOPED_KINDS:
                md.setdefault("namespace", "default")
            md["uid"] = _digest("uid", t, name, n=32)
            state["metadata"] = md
        return rid, state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list[tuple[str, str]] | None]:
        return {}, None
