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
# Users' keys may also live on a security key (FIDO: ssh-keygen -t ed25519-sk / ecdsa-sk).
USER_KEY_TYPES = (*KEY_TYPES, "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com")
_KEY = re.compile(r"^(\S+) ([A-Za-z0-9+/]+={0,2})$")
ED25519_BYTES = 32
EC_POINT_BYTES = {"nistp256": 65, "nistp384": 97, "nistp521": 133}  # uncompressed: 0x04 || X || Y
MIN_RSA_BITS = 1024  # sshd's RequiredRSASize default (OpenSSH 9.1+): a smaller key cannot log in


def parse(value: str, types: tuple[str, ...] = KEY_TYPES) -> str:
    """``TYPE BASE64`` (a trailing comment dropped), or ValueError saying what is wrong: the key
    data is read as OpenSSH's wire format (RFC 4253 6.6, RFC 5656 3.1, RFC 8709), so a truncated
    paste or a blob of another type is refused, not sent to every host."""
    parts = value.strip().split()
    if len(parts) < 2:
        raise ValueError("expected '<type> <base64>' as ssh-keyscan prints it (without the host name)")
    key = f"{parts[0]} {parts[1]}"
    m = _KEY.match(key)
    if not m or m.group(1) not in types:
        raise ValueError(f"unknown key type {parts[0][:40]!r}; use one of {', '.join(types)}")
    try:
        blob = base64.b64decode(m.group(2), validate=True)
    except binascii.Error as e:
        raise ValueError(f"the key is not valid base64 ({e}): copy the whole line of the .pub file") from None
    check_blob(m.group(1), blob)
    return key


class _Reader:
    def __init__(self, blob: bytes) -> None:
        self.blob, self.at = blob, 0

    def string(self) -> bytes:
        if self.at + 4 > len(self.blob):
            raise ValueError("the key data is cut short (a truncated paste?): copy the whole line of the .pub file")
        n = int.from_bytes(self.blob[self.at : self.at + 4], "big")
        start, self.at = self.at + 4, self.at + 4 + n
        if self.at > len(self.blob):
            raise ValueError("the key data is cut short (a truncated paste?): copy the whole line of the .pub file")
        return self.blob[start : self.at]

    def done(self) -> None:
        if self.at != len(self.blob):
            raise ValueError(f"{len(self.blob) - self.at} bytes after the key data: not one key (two pasted together?)")


def check_blob(kind: str, blob: bytes) -> None:
    """ValueError unless ``blob`` is a well-formed public key of type ``kind``."""
    r = _Reader(blob)
    inner = r.string().decode(errors="replace")
    if inner != kind:
        raise ValueError(f"the key data says {inner[:40] or 'nothing'!r}, not {kind!r}")
    if kind in ("ssh-ed25519", "sk-ssh-ed25519@openssh.com"):
        if len(r.string()) != ED25519_BYTES:
            raise ValueError(f"an Ed25519 key is {ED25519_BYTES} bytes: this one is damaged")
    elif kind == "ssh-rsa":
        e, n = r.string(), r.string()
        bits = int.from_bytes(n, "big").bit_length()
        if not e or bits < MIN_RSA_BITS:
            raise ValueError(f"an RSA key of {bits} bits: sshd refuses keys under {MIN_RSA_BITS} bits (use ed25519)")
    else:  # ecdsa-sha2-<curve>, sk-ecdsa-sha2-nistp256@openssh.com
        curve = r.string().decode(errors="replace")
        want = kind.removeprefix("sk-").removeprefix("ecdsa-sha2-").split("@")[0]
        point = r.string()
        if curve != want or len(point) != EC_POINT_BYTES.get(want) or point[:1] != b"\x04":
            raise ValueError(f"not a {want} point: the key data is damaged")
    if kind.startswith("sk-"):
        r.string()  # the application ("ssh:")
    r.done()


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
