"""Pure renderers for the cluster's people: account files, host accounts, homes, Slurm associations.

* Containers resolve users through NSS ``extrausers``: each host keeps ``passwd``, ``group`` and
  ``shadow`` files under ``ACCOUNTS_DIR`` (mounted read-only at /var/lib/extrausers), so a new
  user is seen by running containers at once, with the same ids everywhere.
* Hosts get the same users and groups in their own /etc (fixed ids; a name or id already used
  otherwise fails the step naming both), homes pointing at the shared volume, no password.
* Homes: created once on the shared volume, owned by the user, mode 0700; never deleted.
* Slurm: accounts and users created with ``sacctmgr`` only when missing; what hpc-cluster
  created (accounts described ``hpc-cluster``) and the stack no longer lists is removed.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.scripts import RemoteScript, put_file, script, sh_quote

ACCOUNTS_DIR = "/etc/hpc-cluster/accounts"  # on every host; /var/lib/extrausers in the containers
CONTAINER_ACCOUNTS = "/var/lib/extrausers"
MANAGED = "hpc-cluster"  # description of the Slurm accounts this project manages
SLURMDBD_READY_TIMEOUT_S = 120


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
        f"ensure_user {p.name} {p.uid} {p.gid} {sh_quote(','.join(p.groups))} {all_gids(p)} "
        f"{sh_quote(f'{home_root}/{p.name}')}\n"
        for p in people
    )
    wanted = " ".join(p.name for p in people)
    create = script(
        host,
        f"{host}-accounts",
        f"""\
hpc_dir {ACCOUNTS_DIR} 0755 0:0
hpc_dir {ACCOUNTS_DIR}/keys 0755 0:0
{files}wanted=({wanted})
for f in {ACCOUNTS_DIR}/keys/*; do
  [ -e "$f" ] || continue
  if ! grep -qxF -- "${{f##*/}}" < <(printf '%s\\n' "${{wanted[@]}}"); then
    rm -f "$f"
    hpc_changed "removed the SSH keys of ${{f##*/}}"
  fi
done
ensure_group() {{
  local have
  have=$(getent group "$1" | cut -d: -f3) || true
  if [ -z "$have" ]; then
    if other=$(getent group "$2"); then hpc_fail "{host}: gid $2 for group $1 is taken by ${{other%%:*}}"; fi
    groupadd -g "$2" "$1"
    hpc_changed "added group $1 ($2)"
  elif [ "$have" != "$2" ]; then
    hpc_fail "{host}: group $1 exists with gid $have, but the stack says $2"
  fi
}}
ensure_user() {{
  local name=$1 uid=$2 gid=$3 more=$4 all=$5 home=$6 have
  have=$(getent passwd "$name" | cut -d: -f3) || true
  if [ -z "$have" ]; then
    if other=$(getent passwd "$uid"); then hpc_fail "{host}: uid $uid for $name is taken by ${{other%%:*}}"; fi
    useradd -u "$uid" -g "$gid" ${{more:+-G "$more"}} -M -d "$home" -s /bin/bash "$name"
    usermod -p '*' "$name"
    hpc_changed "added user $name ($uid)"
  elif [ "$have" != "$uid" ]; then
    hpc_fail "{host}: user $name exists with uid $have, but the stack says $uid"
  elif [ "$(id -G "$name" | tr ' ' '\\n' | sort -n | paste -sd,)" != "$all" ]; then
    usermod -g "$gid" -G "$more" "$name"
    hpc_changed "set the groups of $name"
  fi
  echo "$name" >>"$managed.new"
}}
managed={ACCOUNTS_DIR}/managed-users
: >"$managed.new"
{ensure}for old in $(cat "$managed" 2>/dev/null); do
  if ! grep -qxF -- "$old" "$managed.new"; then
    userdel "$old"
    hpc_changed "removed user $old (its home stays on the shared volume)"
  fi
done
mv -f "$managed.new" "$managed"
""",
    )
    delete = script(host, f"{host}-accounts-delete", f"rm -rf {ACCOUNTS_DIR}\n")
    return RemoteScript(f"{host}-accounts", host, create, delete)


def homes(host: str, people: tuple[Person, ...], home_root: str) -> RemoteScript:
    """Each user's home on the shared volume: created once, owned by them, 0700; kept on delete."""
    lines = "".join(f"hpc_dir {sh_quote(f'{home_root}/{p.name}')} 0700 {p.uid}:{p.gid}\n" for p in people)
    create = script(
        host,
        f"{host}-homes",
        f"[ -d {sh_quote(home_root)} ] || hpc_fail \"{home_root} is missing: is the shared volume mounted?\"\n{lines}",
    )
    delete = script(host, f"{host}-homes-delete", 'echo "hpc: homes stay on the shared volume"\n')
    return RemoteScript(f"{host}-homes", host, create, delete)


def slurm_accounting(host: str, container: str, cluster: str, people: tuple[Person, ...]) -> RemoteScript:
    """Accounts and user associations in slurmdbd, from the stack: added when missing, removed
    when hpc-cluster made them and the stack dropped them; nothing else is touched."""
    wanted = "".join(f"{p.name}|{p.account}\n" for p in people)
    accounts = " ".join(sorted({p.account for p in people}))
    create = script(
        host,
        f"{host}-slurm-accounting",
        f"""\
sam() {{ docker exec {container} sacctmgr -n -P "$@"; }}
hpc_wait {SLURMDBD_READY_TIMEOUT_S} "slurmdbd to answer" sam show cluster format=cluster
if ! grep -qxF {sh_quote(cluster)} <<<"$(sam show cluster format=cluster)"; then
  sam -i add cluster {sh_quote(cluster)} >/dev/null
  hpc_changed "added cluster {cluster}"
fi
wanted=$(cat <<'HPC_WANTED'
{wanted}HPC_WANTED
)
for acct in {accounts}; do
  if ! grep -qxF "$acct" <<<"$(sam show account "$acct" format=account)"; then
    sam -i add account "$acct" description={MANAGED} organization={MANAGED} >/dev/null
    hpc_changed "added account $acct"
  fi
done
while IFS='|' read -r user acct; do
  [ -n "$user" ] || continue
  if ! grep -qxF "$user" <<<"$(sam show assoc where user="$user" account="$acct" format=user)"; then
    sam -i add user "$user" account="$acct" defaultaccount="$acct" >/dev/null
    hpc_changed "added $user to account $acct"
  fi
done <<<"$wanted"
managed=$(sam show account format=account,description | awk -F'|' '$2 == "{MANAGED}" {{ print $1 }}')
for acct in $managed; do
  for user in $(sam show assoc where account="$acct" format=user | grep -v '^$' || true); do
    if ! grep -qxF "$user|$acct" <<<"$wanted"; then
      sam -i remove user "$user" where account="$acct" >/dev/null
      hpc_changed "removed $user from account $acct"
    fi
  done
  if ! grep -q "|$acct\\$" <<<"$wanted"; then
    sam -i remove account "$acct" >/dev/null
    hpc_changed "removed account $acct"
  fi
done
""",
    )
    delete = script(host, f"{host}-slurm-accounting-delete", 'echo "hpc: accounting stays in slurmdbd"\n')
    return RemoteScript(f"{host}-slurm-accounting", host, create, delete)
