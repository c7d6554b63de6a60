"""Pure renderers for the cluster's people: account files, host accounts, homes, Slurm associations.

* Containers resolve users through NSS ``extrausers``: each host keeps ``passwd``, ``group`` and
  ``shadow`` files under ``ACCOUNTS_DIR`` (mounted read-only at /var/lib/extrausers), so a new
  user is seen by running containers at once, with the same ids everywhere.
* Hosts get the same users and groups in their own /etc (fixed ids; a name or id already used
  otherwise fails the step naming both), homes pointing at the shared volume, no password, for
  file ownership only: no shell (``nologin``) and no SSH (an sshd drop-in denies them; the step
  checks that sshd reads it). Researchers log in to the login node's container.
* Homes: created once on the shared volume, owned by the user, mode 0700; never deleted.
* Slurm: their accounts and associations are the scheduling policy's (``components.slurm.
  render_scheduling``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from components.scripts import Raw, RemoteScript, fill, put_file, quoted, script

SCRIPTS = Path(__file__).with_name("scripts")
ACCOUNTS_DIR = "/etc/hpc-cluster/accounts"  # on every host; /var/lib/extrausers in the containers
SSHD_DROPIN = "/etc/ssh/sshd_config.d/90-hpc-cluster-people.conf"
NOLOGIN = "/usr/sbin/nologin"
CONTAINER_ACCOUNTS = "/var/lib/extrausers"


@dataclass(frozen=True)
class Person:
    name: str
    uid: int
    gid: int
    groups: tuple[str, ...]
    keys: tuple[str, ...]
    account: str


@dataclass(frozen=True)
class Group:
    name: str
    gid: int


def passwd(people: tuple[Person, ...], home_root: str = "/home") -> str:
    return "".join(f"{p.name}:x:{p.uid}:{p.gid}:{p.name}:{home_root}/{p.name}:/bin/bash\n" for p in people)


def denied_users(people: tuple[Person, ...]) -> str:
    """The cluster's users as sshd's DenyUsers lists them (and ``sshd -T`` prints them back)."""
    return " ".join(sorted(p.name for p in people))


def sshd_dropin(people: tuple[Person, ...]) -> str:
    """sshd refuses the cluster's users on hosts (they log in to the login node's container)."""
    names = denied_users(people)
    head = "# hpc-cluster: the cluster's users log in to the login node only\n"
    return head + (f"DenyUsers {names}\n" if names else "")


def group(groups: tuple[Group, ...], people: tuple[Person, ...]) -> str:
    members = {g.name: [p.name for p in people if g.name in p.groups] for g in groups}
    return "".join(f"{g.name}:x:{g.gid}:{','.join(members[g.name])}\n" for g in groups)


def shadow(people: tuple[Person, ...]) -> str:
    """No password for anyone ('*': key login only, and not a locked account)."""
    return "".join(f"{p.name}:*:19000:0:99999:7:::\n" for p in people)


def host_accounts(host: str, people: tuple[Person, ...], groups: tuple[Group, ...], home_root: str) -> RemoteScript:
    """The account files for the host's containers, and the same users and groups on the host."""
    gids = {g.name: g.gid for g in groups}
    files = (
        put_file(f"{ACCOUNTS_DIR}/passwd", "0644", passwd(people))
        + put_file(f"{ACCOUNTS_DIR}/group", "0644", group(groups, people))
        + put_file(f"{ACCOUNTS_DIR}/shadow", "0640", shadow(people))
        + "".join(put_file(f"{ACCOUNTS_DIR}/keys/{p.name}", "0644", "".join(k + "\n" for k in p.keys)) for p in people)
    )

    def all_gids(p: Person) -> str:
        return ",".join(str(g) for g in sorted({p.gid, *(gids[n] for n in p.groups)}))

    ensure = "".join(f"ensure_group {g.name} {g.gid}\n" for g in groups) + "".join(
        f"ensure_user {p.name} {p.uid} {p.gid} {quoted(','.join(p.groups))} {all_gids(p)} "
        f"{quoted(f'{home_root}/{p.name}')}\n"
        for p in people
    )
    body = fill(
        SCRIPTS / "accounts.sh",
        dir=ACCOUNTS_DIR,
        files=Raw(files),
        wanted=[p.name for p in people],
        host=host,
        ensure=Raw(ensure),
        nologin=NOLOGIN,
        dropin=SSHD_DROPIN,
        sshd_dropin=Raw(put_file(SSHD_DROPIN, "0644", sshd_dropin(people))),
        denied=denied_users(people),
    )
    create = script(host, f"{host}-accounts", body)
    undo = f"rm -rf {ACCOUNTS_DIR}\nrm -f {SSHD_DROPIN}\n"
    delete = script(host, f"{host}-accounts-delete", undo)
    return RemoteScript(f"{host}-accounts", host, create, delete)


def homes(host: str, people: tuple[Person, ...], home_root: str) -> RemoteScript:
    """Each user's home on the shared volume: created once, owned by them, 0700; kept on delete."""
    lines = "".join(f"hpc_dir {quoted(f'{home_root}/{p.name}')} 0700 {p.uid}:{p.gid}\n" for p in people)
    body = fill(SCRIPTS / "homes.sh", home_root=home_root, home_text=Raw(home_root), homes=Raw(lines.rstrip("\n")))
    create = script(host, f"{host}-homes", body)
    delete = script(host, f"{host}-homes-delete", 'echo "hpc: homes stay on the shared volume"\n')
    return RemoteScript(f"{host}-homes", host, create, delete)
