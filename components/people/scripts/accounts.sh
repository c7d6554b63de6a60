#@ The account files the host's containers read (NSS extrausers) and the same users and groups on
#@ the host itself: fixed ids, a name or id used otherwise fails naming both, no password.
hpc_dir @dir@ 0755 0:0
hpc_dir @dir@/keys 0755 0:0
@files@
wanted=(@wanted@)
for f in @dir@/keys/*; do
  [ -e "$f" ] || continue
  if ! grep -qxF -- "${f##*/}" < <(printf '%s\n' "${wanted[@]}"); then
    rm -f "$f"
    hpc_changed "removed the SSH keys of ${f##*/}"
  fi
done
ensure_group() {
  local have
  have=$(getent group "$1" | cut -d: -f3) || true
  if [ -z "$have" ]; then
    if other=$(getent group "$2"); then hpc_fail "@host@: gid $2 for group $1 is taken by ${other%%:*}"; fi
    groupadd -g "$2" "$1"
    hpc_changed "added group $1 ($2)"
  elif [ "$have" != "$2" ]; then
    hpc_fail "@host@: group $1 exists with gid $have, but the stack says $2"
  fi
}
ensure_user() {
  local name=$1 uid=$2 gid=$3 more=$4 all=$5 home=$6 have
  have=$(getent passwd "$name" | cut -d: -f3) || true
  if [ -z "$have" ]; then
    if other=$(getent passwd "$uid"); then hpc_fail "@host@: uid $uid for $name is taken by ${other%%:*}"; fi
    useradd -u "$uid" -g "$gid" ${more:+-G "$more"} -M -d "$home" -s /bin/bash "$name"
    usermod -p '*' "$name"
    hpc_changed "added user $name ($uid)"
  elif [ "$have" != "$uid" ]; then
    hpc_fail "@host@: user $name exists with uid $have, but the stack says $uid"
  elif [ "$(id -G "$name" | tr ' ' '\n' | sort -n | paste -sd,)" != "$all" ]; then
    usermod -g "$gid" -G "$more" "$name"
    hpc_changed "set the groups of $name"
  fi
  echo "$name" >>"$managed.new"
}
managed=@dir@/managed-users
: >"$managed.new"
@ensure@
while read -r old; do
  if ! grep -qxF -- "$old" "$managed.new"; then
    userdel "$old"
    hpc_changed "removed user $old (its home stays on the shared volume)"
  fi
done < <(cat "$managed" 2>/dev/null || true)
mv -f "$managed.new" "$managed"
