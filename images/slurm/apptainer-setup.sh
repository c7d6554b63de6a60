#!/bin/bash
# Configures Apptainer (/etc/apptainer/apptainer.conf) for containers run inside the cluster's own
# Docker containers, unprivileged (no setuid starter: a user's image never runs as root):
# * Docker masks parts of /proc (/proc/kcore, /proc/keys, ...), so the kernel refuses a fresh proc
#   mount in a user namespace ("can't mount proc filesystem to /proc: operation not permitted");
#   the container gets the job's own /proc bound instead, masks included.
# * allow setuid = no: even an installed setuid starter is never used.
# Fails if the file no longer has a line it edits (a new Apptainer release: check the option).
set -euo pipefail
conf=${APPTAINER_CONF:-/etc/apptainer/apptainer.conf}
want() {  # option value
  grep -Eq "^$1 = " "$conf" || { echo "hpc: error: $conf has no '$1 = ' line to set" >&2; exit 1; }
  sed -Ei "s|^$1 = .*$|$1 = $2|" "$conf"
}
want "mount proc" no
want "allow setuid" no
grep -qx 'bind path = /proc' "$conf" || echo 'bind path = /proc' >>"$conf"
