#@ The account files the host's containers read (NSS extrausers) and the same users and groups on
#@ the host itself: fixed ids, a name or id used otherwise fails naming both, no password, no
#@ shell and no SSH (nologin; sshd's DenyUsers in a drop-in): only jobs reach compute.
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
    useradd -u "$uid" -g "$gid" ${more:+-G "$more"} -M -d "$home" -s @nologin@ "$name"
    usermod -p '*' "$name"
    hpc_changed "added user $name ($uid)"
  elif [ "$have" != "$uid" ]; then
    hpc_fail "@host@: user $name exists with uid $have, but the stack says $uid"
  elif [ "$(id -G "$name" | tr ' ' '\n' | sort -n | paste -sd,)" != "$all" ]; then
    usermod -g "$gid" -G "$more" "$name"
    hpc_changed "set the groups of $name"
  fi
  if [ "$(getent passwd "$name" | cut -d: -f7)" != @nologin@ ]; then
    usermod -s @nologin@ "$name"
    hpc_changed "set the shell of $name to @nologin@ (no shell on hosts: jobs and the login node only)"
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
# No SSH for the cluster's users on this host (their key on the shared home would open it, and
# nologin alone still lets a key forward ports). sshd must read the drop-in directory.
@sshd_dropin@
if hpc_file_changed; then
  if ! out=$(sshd -t 2>&1); then
    rm -f @dropin@
    hpc_fail "@host@: sshd refuses its configuration with @dropin@: $out"
  fi
  if systemctl is-active --quiet ssh 2>/dev/null; then systemctl reload ssh; fi
fi
effective=$(sshd -T 2>&1) || hpc_fail "@host@: sshd -T failed: $(tail -n1 <<<"$effective")"
denied=$(awk '$1 == "denyusers" { print $2 }' <<<"$effective" | sort | paste -sd' ')
[ "$denied" = @denied@ ] || hpc_fail "@host@: sshd does not read @dropin@ (denies '$denied', wants @denied@): \
add 'Include /etc/ssh/sshd_config.d/*.conf' at the top of /etc/ssh/sshd_config"
