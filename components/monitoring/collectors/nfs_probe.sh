#!/usr/bin/env bash
# NFS read/write consistency probe for node exporter's textfile collector (hpc-cluster).
# Usage: nfs_probe.sh HOST MOUNT_POINT NFS_URL_BASE OUTPUT.prom
#   writes a random token through the FUSE mount and reads it back through the Ganesha export
#   (libnfs nfs-cat), then the reverse (nfs-cp as the anonymous user, read through the mount);
#   publishes hpc_nfs_probe_success, hpc_nfs_probe_duration_seconds and a timestamp. A hung mount
#   is bounded by timeouts; any mismatch or error is a failure, with the reason on stderr. Each run
#   uses new file names (an NFS create never meets an earlier file, a read never a rewritten one)
#   and removes them; leftovers of runs killed midway are removed after an hour.
set -uo pipefail
host=$1 mount=$2 base=$3 out=$4
dir="$mount/.hpc-probe"
token="$host-$(date +%s%N)-$RANDOM"
name="$token"
start=$(date +%s.%N)
ok=1 reason=""
fail() { ok=0; reason=$1; echo "nfs_probe: $1" >&2; }
scratch=$(mktemp -d)
cleanup() {
  rm -rf "$scratch"
  timeout 20 rm -f "$dir/$name.fuse" "$dir/$name.nfs" 2>/dev/null || true
}
trap cleanup EXIT
if ! timeout 20 mountpoint -q "$mount"; then
  fail "$mount is not mounted"
else
  if ! { timeout 20 mkdir -p "$dir" && timeout 20 chmod 1777 "$dir"; }; then fail "cannot create $dir"; fi
  timeout 20 find "$dir" -maxdepth 1 -name "$host-*" -mmin +60 -delete 2>/dev/null || true
  if [ "$ok" = 1 ]; then
    printf '%s\n' "$token" > "$scratch/fuse"
    timeout 20 cp "$scratch/fuse" "$dir/$name.fuse" || fail "write through the FUSE mount failed"
  fi
  if [ "$ok" = 1 ]; then
    got=$(timeout 20 nfs-cat "$base/.hpc-probe/$name.fuse?version=4&uid=65534&gid=65534" 2>&1) \
      || fail "read through the NFS export failed: $got"
    [ "$ok" = 0 ] || [ "$got" = "$token" ] || fail "NFS read back '$got', wrote '$token'"
  fi
  if [ "$ok" = 1 ]; then
    printf '%s\n' "$token-nfs" > "$scratch/nfs"
    msg=$(timeout 20 nfs-cp "$scratch/nfs" "$base/.hpc-probe/$name.nfs?version=4&uid=65534&gid=65534" 2>&1) \
      || fail "write through the NFS export failed: $msg"
    if [ "$ok" = 1 ]; then
      got=$(timeout 20 cat "$dir/$name.nfs" 2>&1) || fail "read through the FUSE mount failed: $got"
      [ "$ok" = 0 ] || [ "$got" = "$token-nfs" ] || fail "FUSE read back '$got', wrote '$token-nfs'"
    fi
  fi
fi
end=$(date +%s.%N)
tmp=$(mktemp "$(dirname "$out")/.nfs-probe.XXXXXX")
{
  echo "# HELP hpc_nfs_probe_success 1 when data written through each path read back equal through the other"
  echo "# TYPE hpc_nfs_probe_success gauge"
  echo "hpc_nfs_probe_success $ok"
  echo "# TYPE hpc_nfs_probe_duration_seconds gauge"
  echo "hpc_nfs_probe_duration_seconds $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')"
  echo "# TYPE hpc_nfs_probe_timestamp_seconds gauge"
  echo "hpc_nfs_probe_timestamp_seconds ${end%.*}"
} > "$tmp"
chmod 0644 "$tmp"
mv -f "$tmp" "$out"
[ -z "$reason" ] || exit 1
