"""SSH public keys are read as OpenSSH's wire format: every type ssh-keygen makes is accepted, a
truncated paste, a blob of another type, two keys run together or a short RSA key are refused
with a line that says what to do (sshd would refuse each at login: no user locked out silently)."""

from __future__ import annotations

import base64
import shutil
import subprocess

import pytest

from components import hostkeys
from stacks.config_people import _public_key

pytestmark = [
    pytest.mark.real_tool,  # CI installs openssh-client: there a skip is a failure (tests/conftest.py)
    pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen (openssh-client) is needed"),
]


def keygen(tmp_path, kind: str, bits: int | None = None) -> str:
    path = tmp_path / f"k-{kind}-{bits}"
    extra = ["-b", str(bits)] if bits else []
    subprocess.run(["ssh-keygen", "-q", "-t", kind, *extra, "-N", "", "-C", "alice@lab", "-f", str(path)], check=True)
    return (
        path.with_suffix(".pub").read_text().strip()
        if path.suffix
        else (tmp_path / f"{path.name}.pub").read_text().strip()
    )


@pytest.mark.parametrize(
    ("kind", "bits"), [("ed25519", None), ("rsa", 3072), ("ecdsa", 256), ("ecdsa", 384), ("ecdsa", 521)]
)
def test_every_key_ssh_keygen_makes_is_accepted(tmp_path, kind, bits):
    line = keygen(tmp_path, kind, bits)
    assert _public_key(line) == line  # the comment kept
    assert hostkeys.parse(line) == " ".join(line.split()[:2])


def test_a_truncated_paste_is_refused(tmp_path):
    kind, data, _ = keygen(tmp_path, "ed25519").split()
    cut = data[: len(data) - 8]  # still valid base64 (a multiple of 4): only the parse sees it
    with pytest.raises(ValueError, match="cut short"):
        _public_key(f"{kind} {cut}")


def test_a_blob_of_another_type_is_refused(tmp_path):
    _, data, _ = keygen(tmp_path, "ed25519").split()
    with pytest.raises(ValueError, match="the key data says 'ssh-ed25519', not 'ssh-rsa'"):
        _public_key(f"ssh-rsa {data}")


def test_two_keys_run_together_are_refused(tmp_path):
    _, data, _ = keygen(tmp_path, "ed25519").split()
    blob = base64.b64decode(data)
    with pytest.raises(ValueError, match="bytes after the key data"):
        _public_key(f"ssh-ed25519 {base64.b64encode(blob + blob).decode()}")


def test_an_rsa_key_sshd_refuses_is_refused(tmp_path):
    line = keygen(tmp_path, "rsa", 1024)
    blob = bytearray(base64.b64decode(line.split()[1]))
    # a 768-bit modulus: ssh-keygen no longer makes one, so shorten the real key's modulus field
    r = hostkeys._Reader(bytes(blob))
    r.string(), r.string()
    n_at = r.at
    n = r.string()
    short = n[: 96 + 1]
    forged = bytes(blob[:n_at]) + len(short).to_bytes(4, "big") + short
    with pytest.raises(ValueError, match="sshd refuses keys under 1024 bits"):
        _public_key(f"ssh-rsa {base64.b64encode(forged).decode()}")


def test_a_private_key_is_refused_without_echoing_it():
    with pytest.raises(ValueError) as err:
        _public_key("-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjEAAAAA")
    assert "private key" in str(err.value) and "b3BlbnNza" not in str(err.value)
