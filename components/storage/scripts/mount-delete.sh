#@ Unmount the volume and remove its fstab entry (the data stays on the volume).
if mountpoint -q @mount_point@; then
  umount @mount_point@
  hpc_changed "unmounted @mount_text@"
fi
if awk -v mp=@mount_point@ '$2 == mp { found = 1 } END { exit !found }' @fstab@; then
  tmp=$(mktemp)
  awk -v mp=@mount_point@ '$2 != mp' @fstab@ >"$tmp"
  cat "$tmp" >@fstab@
  rm -f "$tmp"
  hpc_changed "removed the fstab entry for @mount_text@"
fi
