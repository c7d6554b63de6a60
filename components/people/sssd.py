"""Pure renderers for an external LDAP directory read by SSSD in the Slurm containers.

Each Slurm host keeps ``sssd.conf`` (0600, the bind password substituted on the host from stdin:
never in a script, an argument or the plan) and the directory's CA under ``SSSD_HOST_DIR``,
mounted read-only at ``SSSD_CONTAINER_DIR``; the containers' entrypoint installs them and runs
``sssd`` beside their daemons. Users resolve in the order ``files extrausers sss``: the stack's
``hpc:users`` win over a directory entry of the same name.

What the directory cannot do here: give ids outside its range (``min_id``/``max_id``, inside
1000-59999 and apart from every stack uid and gid: root, the service accounts and the stack's
users are out of reach), let anyone log in who is not in an allowed group (``access_provider =
simple``), talk without TLS (StartTLS on ``ldap://``, certificate checked, ``ldap_tls_reqcert =
demand``), or check a password (no ``auth_provider``: logins stay key-only, keys from
``ssh_public_key_attribute``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from components.scripts import Raw, RemoteScript, fill, put_file, restart_running, script

SCRIPTS = Path(__file__).with_name("scripts")
SSSD_HOST_DIR = "/etc/hpc-cluster/sssd"
SSSD_CONTAINER_DIR = "/run/hpc-sssd"
CA_FILE = "ldap-ca.pem"
CA_IN_CONTAINER = "/etc/sssd/hpc-ldap-ca.pem"  # where the entrypoint installs it
PASSWORD_PLACEHOLDER = "@@LDAP_BIND_PASSWORD@@"
HOME_ROOT = "/home"  # the shared volume's homes, at the same path in every container


@dataclass(frozen=True)
class Directory:
    """An LDAP directory as SSSD reads it."""

    uris: tuple[str, ...]
    base_dn: str
    bind_dn: str | None
    tls_ca: str
    ssh_key_attribute: str | None
    id_range: tuple[int, int]  # min_id, max_id: disjoint from the stack's ids (stacks/config_people.py)
    allow_groups: tuple[str, ...]

    @property
    def binds(self) -> bool:
        return self.bind_dn is not None


def sssd_conf(d: Directory) -> str:
    """sssd.conf with the bind password as ``PASSWORD_PLACEHOLDER``."""
    # pam: sshd's account phase asks pam_sss (libpam-sss) about directory users
    services = "nss, pam, ssh" if d.ssh_key_attribute else "nss, pam"
    lines = [
        "# Managed by hpc-cluster (Pulumi): hpc:identity.ldap.",
        "[sssd]",
        f"services = {services}",
        "domains = ldap",
        "",
        "[nss]",
        "# root and the service accounts never come from the directory",
        "filter_users = root, munge, slurm, mysql, nobody",
        "filter_groups = root, munge, slurm, mysql, nogroup",
        "",
        "[domain/ldap]",
        "id_provider = ldap",
        "auth_provider = none",
        "access_provider = simple",
        f"simple_allow_groups = {', '.join(d.allow_groups)}",
        "ldap_schema = rfc2307",
        f"ldap_uri = {', '.join(d.uris)}",
        f"ldap_search_base = {d.base_dn}",
        "ldap_tls_reqcert = demand",
        f"ldap_tls_cacert = {CA_IN_CONTAINER}",
        f"ldap_id_use_start_tls = {'false' if all(u.startswith('ldaps://') for u in d.uris) else 'true'}",
        f"min_id = {d.id_range[0]}",
        f"max_id = {d.id_range[1]}",
        f"override_homedir = {HOME_ROOT}/%u",
        "override_shell = /bin/bash",
        "cache_credentials = false",
        "enumerate = false",
    ]
    if d.binds:
        lines += [
            f"ldap_default_bind_dn = {d.bind_dn}",
            "ldap_default_authtok_type = password",
            f"ldap_default_authtok = {PASSWORD_PLACEHOLDER}",
        ]
    if d.ssh_key_attribute:
        lines.append(f"ldap_user_ssh_public_key = {d.ssh_key_attribute}")
    return "\n".join(lines) + "\n"


def directory_step(host: str, d: Directory, containers: tuple[str, ...]) -> RemoteScript:
    """Write the CA and sssd.conf (password from stdin when the directory binds) to this host;
    a change restarts the host's running Slurm containers. Delete removes both (no data)."""
    conf = f"{SSSD_HOST_DIR}/sssd.conf"
    if d.binds:
        read_password = fill(SCRIPTS / "directory-password.sh")
        write = f'hpc_put_file {conf} 0600 0:0 < <(printf \'%s\' "${{template//{PASSWORD_PLACEHOLDER}/$password}}")\n'
    else:
        read_password = ""
        write = f"hpc_put_file {conf} 0600 0:0 < <(printf '%s' \"$template\")\n"
    body = fill(
        SCRIPTS / "directory.sh",
        read_password=Raw(read_password),
        dir=SSSD_HOST_DIR,
        ca=Raw(put_file(f"{SSSD_HOST_DIR}/{CA_FILE}", "0644", d.tls_ca)),
        conf=Raw(sssd_conf(d).rstrip()),
        write=Raw(write),
        restart=restart_running(containers, "with the new directory settings"),
    )
    create = script(
        host, f"{host}-directory", body, extra_headers={"secret-stdin": "ldap-bind-password"} if d.binds else None
    )
    delete = script(host, f"{host}-directory-delete", f"rm -rf {SSSD_HOST_DIR}\n")
    return RemoteScript(f"{host}-directory", host, create, delete)
