#@ Part of preflight.sh on Slurm workers: their container passes the host's /dev/fuse to jobs, so
#@ Apptainer mounts a user's image (squashfuse, unprivileged) instead of unpacking it per job.
[ -c /dev/fuse ] || hpc_fail "@host@: /dev/fuse is missing (the Slurm worker container passes it to \
users' Apptainer images): load the fuse module (modprobe fuse) and list it in /etc/modules-load.d"
mode=$(stat -c %a /dev/fuse)
if [ "$mode" != 666 ]; then
  echo "hpc: warning: @host@: /dev/fuse is mode $mode, not 666 (udev's default): users' Apptainer images \
will be unpacked per job instead of mounted" >&2
fi
facts+=" fuse"
