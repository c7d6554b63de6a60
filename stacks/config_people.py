"""The people of the cluster: users and groups (``hpc:users``, ``hpc:groups``).

The same numeric ids on every host and in every container (files on the shared volume carry
numbers), homes on the shared volume, SSH public keys for the login node, a Slurm account per
user. Ids of service accounts and system ranges are refused.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from components import accounts, hostkeys
from components.people import sssd
from stacks.config_base import _Model
from stacks.config_errors import encode

ACCOUNT_PATTERN = r"^[a-z_][a-z0-9_-]{0,31}$"
MIN_ID, MAX_ID = 1000, 59999  # below: system accounts; above: nobody, Debian's reserved ranges
RESERVED_IDS = frozenset({accounts.MUNGE_UID, accounts.SLURM_UID, accounts.NOBODY_UID, accounts.FASTCHAT_UID})
RESERVED_NAMES = frozenset(
    {"root", "nobody", "munge", "slurm", "mysql", "daemon", "bin", "sys", "admin", "ubuntu", "pi", "fastchat"}
)


def _public_key(value: str) -> str:
    if "PRIVATE KEY" in value:
        raise ValueError("this is a private key: give the public one (.pub)")
    try:
        hostkeys.parse(value, hostkeys.USER_KEY_TYPES)
    except ValueError as e:
        raise ValueError(f"not an SSH public key ('<type> <base64> [comment]'): {e}") from None
    return " ".join(value.split())  # the comment kept: it names the key in authorized_keys


PublicKey = Annotated[str, AfterValidator(_public_key)]
Id = Annotated[int, Field(ge=MIN_ID, le=MAX_ID)]


class GroupConfig(_Model):
    """A Unix group of the cluster."""

    name: str = Field(pattern=ACCOUNT_PATTERN, description="Group name.")
    gid: Id = Field(description="Numeric group id, the same everywhere.")


class UserConfig(_Model):
    """A person who uses the cluster."""

    name: str = Field(pattern=ACCOUNT_PATTERN, description="Login name.")
    uid: Id = Field(description="Numeric user id, the same on every host and in every container.")
    group: str = Field(description="Primary group (a name from hpc:groups).")
    groups: list[str] = Field(default_factory=list, description="More groups (names from hpc:groups).")
    ssh_keys: list[PublicKey] = Field(default_factory=list, description="SSH public keys for the login node.")
    account: str | None = Field(
        default=None, pattern=ACCOUNT_PATTERN, description="Slurm account; default: the primary group's name."
    )

    api_key_rotation: int = Field(
        default=0, ge=0, description="Bump to give this user a new API key (the old one stops working)."
    )

    @property
    def slurm_account(self) -> str:
        return self.account or self.group


class People(_Model):
    """Users and groups, checked together."""

    users: list[UserConfig] = Field(default_factory=list, description="Users.")
    groups: list[GroupConfig] = Field(default_factory=list, description="Groups.")

    @model_validator(mode="after")
    def _consistent(self) -> People:
        found = list(self.problems())
        if found:
            raise encode(found)
        return self

    def problems(self) -> Iterator[tuple[str, str]]:
        """Every inconsistency between users and groups, as (relative key, message)."""
        gids: dict[int, str] = {}
        names: dict[str, str] = {}
        for g in self.groups:
            where = f"groups[{g.name}]"
            if g.name in names:
                yield (f"{where}.name", f"group {g.name!r} is listed twice")
            if g.gid in gids or g.gid in RESERVED_IDS:
                yield (f"{where}.gid", f"gid {g.gid} is taken ({gids.get(g.gid, 'a service account')})")
            names[g.name], gids[g.gid] = "group", g.name
        uids: dict[int, str] = {}
        users: set[str] = set()
        for u in self.users:
            where = f"users[{u.name}]"
            if u.name in users:
                yield (f"{where}.name", f"user {u.name!r} is listed twice")
            if u.name in RESERVED_NAMES:
                yield (f"{where}.name", f"{u.name!r} is a system or service account; choose another name")
            if u.uid in uids or u.uid in RESERVED_IDS:
                yield (f"{where}.uid", f"uid {u.uid} is taken ({uids.get(u.uid, 'a service account')})")
            for key, group in [("group", u.group), *(("groups", g) for g in u.groups)]:
                if group not in names:
                    yield (f"{where}.{key}", f"group {group!r} is not in hpc:groups")
            users.add(u.name)
            uids[u.uid] = u.name

    def gid_of(self, group: str) -> int:
        return next(g.gid for g in self.groups if g.name == group)


LDAP_URI_PATTERN = r"^ldaps?://[A-Za-z0-9.\-\[\]:]+(:\d{1,5})?/?$"
DN_PATTERN = r"^[A-Za-z][A-Za-z0-9-]*=[^,=]+(,\s*[A-Za-z][A-Za-z0-9-]*=[^,=]+)*$"


PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def _pem_certificate(value: str) -> str:
    """One or more X.509 certificates in PEM, each parsed (cryptography), none expired; any other
    block (a private key pasted with the CA) refused by its label, its content never echoed."""
    from cryptography import x509

    text = value.strip()
    blocks = list(PEM_BLOCK.finditer(text))
    if not blocks or PEM_BLOCK.sub("", text).strip():
        raise ValueError("not a PEM certificate (-----BEGIN CERTIFICATE----- ... -----END CERTIFICATE-----)")
    for i, block in enumerate(blocks, 1):
        if block.group(1) != "CERTIFICATE":
            raise ValueError(
                f"block {i} is a {block.group(1)}, not a CERTIFICATE: the CA file goes to every host, remove it"
            )
        try:
            cert = x509.load_pem_x509_certificate(block.group(0).encode())
        except ValueError:
            raise ValueError(f"certificate {i} is damaged (not X.509 DER inside the PEM markers)") from None
        if cert.not_valid_after_utc < dt.datetime.now(dt.UTC):
            expired = f"{cert.not_valid_after_utc:%Y-%m-%d}"
            raise ValueError(f"certificate {i} expired on {expired}: TLS to the directory would fail")
    return "\n".join(b.group(0) for b in blocks) + "\n"


def _ldap_uri(value: str) -> str:
    port = re.search(r":(\d+)/?$", value.split("://", 1)[1])
    if port and not 1 <= int(port.group(1)) <= 65535:
        raise ValueError(f"port {port.group(1)} is not a TCP port (1-65535; ldaps is 636, ldap 389)")
    return value


GROUP_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"


class LdapConfig(_Model):
    """An LDAP directory the site already runs (RFC 2307 posixAccount/posixGroup), read by SSSD
    in the Slurm containers. Always over TLS: ``ldaps://``, or StartTLS on ``ldap://``, the
    server's certificate checked against ``tlsCa``. Its users and groups get ids
    ``minId``-``maxId`` only (inside 1000-59999; an entry outside, with uid 0, a service
    account's id or a stack user's id, is ignored), a range no ``hpc:users`` uid or
    ``hpc:groups`` gid may enter; declared ``hpc:users`` win over a directory entry of the same
    name. Only members of ``allowGroups`` may log in (SSSD's ``simple`` access provider). Logins
    stay key-only: SSH keys from ``sshPublicKeyAttribute`` (openssh-lpk), no LDAP password is
    ever checked."""

    uri: list[Annotated[str, Field(pattern=LDAP_URI_PATTERN), AfterValidator(_ldap_uri)]] = Field(
        min_length=1, description="Servers, tried in order: ldaps://host[:port] or ldap://host[:port] (StartTLS)."
    )
    base_dn: str = Field(pattern=DN_PATTERN, description="Search base, e.g. dc=example,dc=org.")
    bind_dn: str | None = Field(
        default=None,
        pattern=DN_PATTERN,
        description="Service account to bind as (password: secret hpc:ldapBindPassword); none: anonymous.",
    )
    tls_ca: Annotated[str, AfterValidator(_pem_certificate)] = Field(description="PEM CA certificate of the servers.")

    ssh_public_key_attribute: str | None = Field(
        default="sshPublicKey",
        pattern=r"^[A-Za-z][A-Za-z0-9-]*$",
        description="Attribute with users' SSH keys; null: none.",
    )
    min_id: Id = Field(default=MIN_ID, description="Lowest uid/gid taken from the directory.")
    max_id: Id = Field(default=MAX_ID, description="Highest uid/gid taken from the directory.")
    allow_groups: list[Annotated[str, Field(pattern=GROUP_NAME_PATTERN)]] = Field(
        min_length=1, description="Directory groups whose members may log in (everyone else is refused by PAM)."
    )

    @model_validator(mode="after")
    def _range(self) -> LdapConfig:
        if self.min_id > self.max_id:
            raise encode([("minId", f"minId {self.min_id} is above maxId {self.max_id}: give the range low to high")])
        return self

    def directory(self) -> sssd.Directory:
        return sssd.Directory(
            tuple(self.uri), self.base_dn, self.bind_dn, self.tls_ca, self.ssh_public_key_attribute,
            (self.min_id, self.max_id), tuple(self.allow_groups),
        )  # fmt: skip


def id_problems(
    users: list[UserConfig], groups: list[GroupConfig], ldap: LdapConfig | None, owner: tuple[int, int]
) -> Iterator[tuple[str, str]]:
    """Stack ids, the directory's range and the volume owner are disjoint: a directory entry, or
    whoever owns the volume root, can never be a stack user (keys relative to ``hpc:``)."""
    if ldap is not None:
        lo, hi = ldap.min_id, ldap.max_id
        fix = f"is inside the directory's range identity.ldap.minId-maxId ({lo}-{hi}): move it or narrow the range"
        for u in users:
            if lo <= u.uid <= hi:
                yield (f"users[{u.name}].uid", f"uid {u.uid} {fix}")
        for g in groups:
            if lo <= g.gid <= hi:
                yield (f"groups[{g.name}].gid", f"gid {g.gid} {fix}")
    uid, gid = owner
    named = {u.uid: u.name for u in users}
    if uid in named:
        yield (
            "storage.ownerUid",
            f"uid {uid} is user {named[uid]}'s: that user would own the volume root; leave it 0 (root)",
        )
    elif ldap is not None and uid != 0 and ldap.min_id <= uid <= ldap.max_id:
        yield ("storage.ownerUid", f"uid {uid} is inside the directory's range: leave it 0 (root)")
    if gid in {g.gid for g in groups} or (ldap is not None and gid != 0 and ldap.min_id <= gid <= ldap.max_id):
        yield ("storage.ownerGid", f"gid {gid} is a cluster or directory group's: leave it 0 (root)")


class IdentityConfig(_Model):
    """Where users come from besides ``hpc:users``."""

    ldap: LdapConfig | None = Field(default=None, description="An external LDAP directory, read by SSSD.")
