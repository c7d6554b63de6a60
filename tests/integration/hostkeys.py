"""SSH host keys of the lab hosts for one test session: the test stacks pin them (``hostKey``)
and the hosts' sshd serve them, so every replayed step checks the host it talks to."""

from __future__ import annotations

import atexit
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path


@cache
def _dir() -> Path:
    d = Path(tempfile.mkdtemp(prefix="hpc-hostkeys-"))
    atexit.register(shutil.rmtree, d, True)
    return d


def key_file(host: str, variant: str = "") -> Path:
    """The private host key of ``host`` (made on first use); ``variant`` gives another one."""
    path = _dir() / f"{host}{'-' + variant if variant else ''}"
    if not path.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)], check=True)
    return path


def public(host: str, variant: str = "") -> str:
    """``ssh-ed25519 <base64>``: what the stack's hostKey says."""
    return " ".join(Path(f"{key_file(host, variant)}.pub").read_text().split()[:2])
