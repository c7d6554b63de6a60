"""Pinned SSH host keys: the channel that carries every secret checks whom it talks to.

Each host's public host key comes from the stack (``hostKey``, collected with ``ssh-keyscan``
and checked against the host's console). ``remote.Command`` verifies it itself (its connection's
``hostKey``); the Docker provider runs the OpenSSH client, which gets the key through
``KnownHostsCommand`` and checks it strictly, with no known_hosts file to write or to trust.
"""

from __future__ import annotations

import base64
import binascii
import re

KEY_TYPES = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
)
_KEY = re.compile(r"^(\S+) ([A-Za-z0-9+/]+={0,2})$")


def parse(value: str) -> str:
    """``TYPE BASE64`` (a trailing comment dropped), or ValueError saying what is wrong."""
    parts = value.strip().split()
    if len(parts) < 2:
        raise ValueError("expected '<type> <base64>' as ssh-keyscan prints it (without the host name)")
    key = f"{parts[0]} {parts[1]}"
    m = _KEY.match(key)
    if not m or m.group(1) not in KEY_TYPES:
        raise ValueError(f"unknown key type {parts[0]!r}; use one of {', '.join(KEY_TYPES)}")
    try:
        blob = base64.b64decode(m.group(2), validate=True)
    except binascii.Error as e:
        raise ValueError(f"the key is not valid base64 ({e})") from None
    inner = blob[4 : 4 + int.from_bytes(blob[:4], "big")].decode(errors="replace") if len(blob) > 4 else ""
    if inner != m.group(1):
        raise ValueError(f"the key data says {inner or 'nothing'!r}, not {m.group(1)!r}")
    return key


def known_hosts_line(address: str, port: int, key: str) -> str:
    """The known_hosts line OpenSSH matches for ``address:port``."""
    return f"{address if port == 22 else f'[{address}]:{port}'} {key}"


def ssh_options(address: str, port: int, key: str) -> list[str]:
    """OpenSSH options that accept exactly ``key`` for this host and nothing else."""
    return [
        "-o", "BatchMode=yes",
        "-o", "StrictHostKeyChecking=yes",
        "-o", "UserKnownHostsFile=/dev/null",
        "-o", "GlobalKnownHostsFile=/dev/null",
        "-o", f"KnownHostsCommand=/bin/echo {known_hosts_line(address, port, key)}",
    ]  # fmt: skip
