#@ The volume in /etc/fstab (backup volfile servers) and mounted; another Gluster volume on the
#@ mount point is replaced, anything else fails naming both sources; then the volume root (0755,
#@ root's unless the stack says otherwise: whoever owns it can swap any home) and the shared dirs.
#@ Where Docker is installed, it starts at boot only once the volume is mounted (a drop-in).
hpc_install glusterfs-client
want=@line@
have=$(awk -v mp=@mount_point@ '$2 == mp' @fstab@)
if [ "$have" != "$want" ]; then
  # the other lines as they are, then ours; replaced atomically (a crash keeps the old fstab)
  others=$(awk -v mp=@mount_point@ '$2 != mp' @fstab@)
  hpc_put_file @fstab@ 0644 0:0 < <(printf '%s\n' ${others:+"$others"} "$want")
  hpc_changed "fstab entry for @mount_text@"
fi
hpc_mkdir @mount_point@
servers=(@servers@)
current=$(findmnt -n -o SOURCE,FSTYPE --mountpoint @mount_point@ || true)
if [ -n "$current" ]; then
  src=${current%% *} fstype=${current##* }
  if [ "$fstype" != @fstype@ ]; then
    hpc_fail "@mount_text@ on $(hostname) holds $src ($fstype), not the Gluster volume @want_src@: \
unmount it or change hpc:storage.mountPoint"
  fi
  ours=0
  for s in "${servers[@]}"; do
    if [ "$src" = "$s:/@volume@" ]; then ours=1; fi
  done
  if [ "$ours" = 0 ]; then
    out=$(umount @mount_point@ 2>&1) || hpc_fail "@mount_text@ on $(hostname) is mounted from $src, but the stack wants \
@want_src@, and it cannot be unmounted: $out"
    hpc_changed "unmounted $src from @mount_text@ (the stack wants @want_src@)"
    current=""
  fi
fi
if [ -z "$current" ]; then
  # Bricks can still be coming up right after the volume starts: retry, then quote the client.
  if ! hpc_retry @tries@ @delay@ timeout 60 mount @mount_point@; then
    log=/var/log/glusterfs/@client_log@.log
    hpc_fail "mounting @mount_text@ from @want_src@ failed on $(hostname): $(hpc_last_error) \
$(grep -s '\] E \[' "$log" | tail -n 2 | cut -c1-300 | tr '\n' ' ')"
  fi
  hpc_changed "mounted @mount_text@"
fi
hpc_fix_mode @mount_point@ 0755 @root_owner@
@dirs@
if [ -n "$(ls /usr/lib/systemd/system/docker.service /lib/systemd/system/docker.service \
  /etc/systemd/system/docker.service 2>/dev/null)" ]; then
  hpc_put_file @docker_dropin@ 0644 0:0 < <(printf '[Unit]\nRequiresMountsFor=%s\n' @mount_point@)
  if hpc_file_changed && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
fi
