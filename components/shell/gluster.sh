#@ Prepended to the storage scripts after lib.sh: the CLI's time limit and the glusterq helper
#@ (components/shell/glusterq.py, installed by the glusterd step) come first.
HPC_GLUSTER_TIMEOUT_S=@timeout@
hpc_gq() { python3 @glusterq@ "$@"; }
# hpc-cluster Gluster library: prepended to the storage scripts after lib.sh (and hpc_gq, the
# glusterq helper). Every gluster call is bounded, so a hung glusterd fails the step.
g() { timeout "$HPC_GLUSTER_TIMEOUT_S" gluster --mode=script "$@"; }

# gcall DESCRIPTION ARGS...: run gluster; on failure stop with gluster's own message.
gcall() {
  local what=$1 out
  shift
  out=$(g "$@" 2>&1) || hpc_fail "$what failed on $(hostname): ${out:-gluster exited $?}"
  printf '%s\n' "$out"
}

# gluster_not_connected STATES: from `hpc_gq peers` lines (ADDR UUID STATE), "ADDR is STATE, ..."
# for every member that is neither connected nor this host; nothing when all are.
gluster_not_connected() {
  awk '$3 == "unknown" { $3 = "not in the pool" } $3 != "Connected" && $3 != "local" {
    printf "%s%s is %s", sep, $1, $3; sep = ", " }' <<<"$1"
}

# gluster_clear_stale_stamp PATH: a failed `volume create` leaves its volume id on the bricks of
# the host that ran it, and gluster refuses every retry ("already part of a volume"). Clear the
# stamp only when no volume of this pool has that id and the brick holds no data.
gluster_clear_stale_stamp() {
  local path=$1 stamp ids known
  [ -d "$path" ] || return 0
  stamp=$(getfattr --absolute-names -n trusted.glusterfs.volume-id -e hex "$path" 2>/dev/null \
    | awk -F= '$1 == "trusted.glusterfs.volume-id" { print $2 }') || true
  [ -n "$stamp" ] || return 0
  ids=$(hpc_gq volume-ids 2>&1) || hpc_fail "gluster volume info failed on $(hostname): $ids"
  known=$(tr -d '-' <<<"$ids" | sed 's/^/0x/')
  if grep -qixF -- "$stamp" <<<"$known"; then return 0; fi
  if [ -n "$(find "$path" -mindepth 1 -maxdepth 1 ! -name .glusterfs -print -quit)" ] ||
    [ -n "$(find "$path/.glusterfs" -type f -print -quit 2>/dev/null)" ]; then
    hpc_fail "$path on $(hostname) carries volume id $stamp, which no volume of this pool has, and holds data; \
clear it by hand (setfattr -x trusted.glusterfs.volume-id $path) once the data is known to be unneeded"
  fi
  setfattr -x trusted.glusterfs.volume-id "$path"
  setfattr -x trusted.gfid "$path" 2>/dev/null || true
  rm -rf "${path:?}/.glusterfs"
  hpc_changed "cleared volume id $stamp that a failed volume create left on $path"
}
