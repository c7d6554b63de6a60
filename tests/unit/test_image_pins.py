"""images/slurm/pins.sh and fetch-pinned.sh: what the Slurm images take from outside their base's
suite is pinned by version and SHA-256 for each architecture, and the fetch refuses other bytes
or a vanished file with one line naming the pin. The fetch runs for real, against a local mirror."""

from __future__ import annotations

import functools
import hashlib
import http.server
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from offline import plan

SLURM = plan.ROOT / "images" / "slurm"
ARCHES = ("amd64", "arm64")


def pins() -> dict[str, str]:
    return dict(re.findall(r"^([A-Za-z0-9_]+)=(\S+)$", (SLURM / "pins.sh").read_text(), re.M))


def test_every_pin_has_a_version_a_pool_and_a_sha256_per_architecture_and_is_fetched():
    values = pins()
    names = [k.removesuffix("_VERSION") for k in values if k.endswith("_VERSION")]
    assert names == ["APPTAINER"]
    for name in names:
        assert values[f"{name}_POOL"].startswith("pool/main/")
        for arch in ARCHES:
            assert re.fullmatch(r"[0-9a-f]{64}", values[f"{name}_SHA256_{arch}"]), (name, arch)
        for dockerfile in ("Dockerfile.worker", "Dockerfile.login"):
            assert f"fetch-pinned.sh {name.lower()} " in (SLURM / dockerfile).read_text(), (name, dockerfile)


@pytest.fixture
def mirror(tmp_path) -> Iterator[tuple[str, Path]]:
    """A Debian-like mirror on loopback serving tmp_path/www."""
    www = tmp_path / "www"
    www.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(www))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/debian", www
    finally:
        server.shutdown()
        server.server_close()


def fetch(tmp_path: Path, mirror_url: str, sha: str, version: str = "1.0-1") -> subprocess.CompletedProcess[str]:
    """Run the real fetch-pinned.sh with a pins.sh naming package "tool" (this machine's arch)."""
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True).stdout.strip()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    shutil.copy(SLURM / "fetch-pinned.sh", bin_dir)
    (bin_dir / "pins.sh").write_text(f"TOOL_VERSION={version}\nTOOL_POOL=pool/main/t/tool\nTOOL_SHA256_{arch}={sha}\n")
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    return subprocess.run(
        ["bash", str(bin_dir / "fetch-pinned.sh"), "tool", str(out)],
        capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "DEBIAN_MIRROR": mirror_url}, timeout=60,
    )  # fmt: skip


def test_the_pinned_bytes_are_fetched_and_others_are_refused(tmp_path, mirror):
    url, www = mirror
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip()
    deb = www / "debian/pool/main/t/tool" / f"tool_1.0-1_{arch}.deb"
    deb.parent.mkdir(parents=True)
    deb.write_bytes(b"the package")
    good = fetch(tmp_path, url, hashlib.sha256(b"the package").hexdigest())
    assert good.returncode == 0, good.stderr
    assert (tmp_path / "out" / deb.name).read_bytes() == b"the package"

    bad = fetch(tmp_path, url, "0" * 64)
    assert bad.returncode == 1 and len(bad.stderr.splitlines()) == 1, bad.stderr
    assert bad.stderr.startswith(f"hpc: error: {url}/pool/main/t/tool/{deb.name} does not match its pin "
                                 f"(TOOL_SHA256_{arch} in images/slurm/pins.sh): got "), bad.stderr  # fmt: skip


def test_a_pin_the_mirror_no_longer_serves_says_which_and_how_to_point_at_another(tmp_path, mirror):
    url, _ = mirror
    gone = fetch(tmp_path, url, "0" * 64, version="9.9-1")
    assert gone.returncode == 1 and len(gone.stderr.splitlines()) == 1, gone.stderr
    line = gone.stderr.strip()
    assert line.startswith("hpc: error: cannot fetch tool 9.9-1 (") and "404" in line, line
    assert line.endswith("move the pin, or build with --build-arg DEBIAN_MIRROR=<a mirror or snapshot.debian.org "
                         "archive that has it>"), line  # fmt: skip


def test_apptainer_setup_binds_proc_refuses_setuid_and_names_a_missing_option(tmp_path):
    conf = tmp_path / "apptainer.conf"
    conf.write_text("allow setuid = yes\nmount proc = yes\nbind path = /etc/hosts\n")
    env = {"PATH": "/usr/bin:/bin", "APPTAINER_CONF": str(conf)}
    for _ in range(2):  # idempotent
        run = subprocess.run(["bash", str(SLURM / "apptainer-setup.sh")], capture_output=True, text=True, env=env)
        assert run.returncode == 0, run.stderr
    assert conf.read_text() == "allow setuid = no\nmount proc = no\nbind path = /etc/hosts\nbind path = /proc\n"
    conf.write_text("mount proc = yes\n")
    run = subprocess.run(["bash", str(SLURM / "apptainer-setup.sh")], capture_output=True, text=True, env=env)
    assert run.returncode == 1 and run.stderr.strip() == f"hpc: error: {conf} has no 'allow setuid = ' line to set"
