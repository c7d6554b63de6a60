#@ Unmount the volume, remove its fstab entry and the Docker drop-in (the data stays on the volume).
if mountpoint -q @mount_point@; then
  umount @mount_point@
  hpc_changed "unmounted @mount_text@"
fi
if awk -v mp=@mount_point@ '$2 == mp { found = 1 } END { exit !found }' @fstab@; then
  others=$(awk -v mp=@mount_point@ '$2 != mp' @fstab@)
  hpc_put_file @fstab@ 0644 0:0 < <(printf '%s\n' ${others:+"$others"})
  hpc_changed "removed the fstab entry for @mount_text@"
fi
if [ -f @docker_dropin@ ]; then
  rm -f @docker_dropin@
  hpc_changed "removed @docker_dropin@ (Docker no longer waits for the volume)"
  if [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
fi
