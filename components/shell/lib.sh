# hpc-cluster shell library: prepended to every remote script (see components/scripts.py).
# Every helper is idempotent and reports a change with hpc_changed, so a second run of a script
# prints "hpc: result=unchanged".
HPC_CHANGED=0

hpc_changed() {
  HPC_CHANGED=1
  printf 'hpc: changed: %s\n' "$*"
}

hpc_fail() {
  printf 'hpc: error: %s\n' "$*" >&2
  exit 1
}

hpc_done() {
  if [ "$HPC_CHANGED" = 1 ]; then echo "hpc: result=changed"; else echo "hpc: result=unchanged"; fi
}

# hpc_install PACKAGE...: apt-get install the packages that are not installed yet.
hpc_install() {
  local missing=() p
  for p in "$@"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -q
  apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
  hpc_changed "installed ${missing[*]}"
}

# hpc_service_up UNIT: enable and start a systemd unit unless it is already active.
hpc_service_up() {
  if ! systemctl is-enabled --quiet "$1" 2>/dev/null; then
    systemctl enable --quiet "$1"
    hpc_changed "enabled $1"
  fi
  if ! systemctl is-active --quiet "$1"; then
    systemctl start "$1"
    hpc_changed "started $1"
  fi
}

# hpc_service_down UNIT: stop and disable a unit if it exists.
hpc_service_down() {
  if systemctl is-active --quiet "$1" 2>/dev/null; then
    systemctl stop "$1"
    hpc_changed "stopped $1"
  fi
  if systemctl is-enabled --quiet "$1" 2>/dev/null; then
    systemctl disable --quiet "$1"
    hpc_changed "disabled $1"
  fi
}

# hpc_put_file PATH MODE UID:GID < content: write the file only when its content, mode or owner
# differ (owners are numeric: the shared volume is read by containers with their own users).
# Atomic: the new content goes to a file beside PATH, is flushed to disk, then renamed over PATH
# (and the directory flushed), so a crash or a kill at any point leaves the old file or the new
# one, never a truncated one (/etc/fstab read at boot, a daemon's config); the next write of PATH
# removes what a killed one left (.NAME.hpc-new.*: one step writes a given file).
# Sets HPC_FILE_CHANGED=1 when the content changed, 0 otherwise.
HPC_FILE_CHANGED=0
hpc_put_file() {
  local path=$1 mode=$2 owner=$3 tmp dir base
  dir=$(dirname "$path") base=$(basename "$path")
  mkdir -p "$dir"
  rm -f "$dir/.$base.hpc-new."*
  tmp=$(mktemp "$dir/.$base.hpc-new.XXXXXX")
  if ! cat >"$tmp"; then
    rm -f "$tmp"
    hpc_fail "writing $path failed (the old file is kept): see the error above"
  fi
  if [ -f "$path" ] && cmp -s "$tmp" "$path"; then
    rm -f "$tmp"
    HPC_FILE_CHANGED=0
    hpc_fix_mode "$path" "$mode" "$owner"
    return 0
  fi
  chmod "$mode" "$tmp"
  chown "$owner" "$tmp"
  sync "$tmp"
  mv -f "$tmp" "$path"
  sync "$dir"
  HPC_FILE_CHANGED=1
  hpc_changed "wrote $path"
}

# hpc_file_changed: did the last hpc_put_file change the file's content?
hpc_file_changed() {
  [ "$HPC_FILE_CHANGED" = 1 ]
}

# hpc_fix_mode PATH MODE UID:GID: set mode and numeric owner when they differ.
hpc_fix_mode() {
  if [ "$(stat -c '%a %u:%g' "$1")" != "${2#0} $3" ]; then
    chmod "$2" "$1"
    chown "$3" "$1"
    hpc_changed "set mode $2 owner $3 on $1"
  fi
}

# hpc_dir PATH MODE UID:GID: create a directory, or fix its mode and numeric owner.
hpc_dir() {
  if [ ! -d "$1" ]; then
    mkdir -p "$1"
    chmod "$2" "$1"
    chown "$3" "$1"
    hpc_changed "created $1"
  else
    hpc_fix_mode "$1" "$2" "$3"
  fi
}

# hpc_mkdir PATH: create a directory (mode 0755, root) if missing; leave an existing one alone.
hpc_mkdir() {
  if [ ! -d "$1" ]; then
    mkdir -p "$1"
    hpc_changed "created $1"
  fi
}

# hpc_wait SECONDS DESCRIPTION COMMAND...: poll COMMAND every second; after SECONDS fail, quoting
# the last lines COMMAND printed (its own reason for not being ready).
hpc_wait() {
  local limit=$1 what=$2 i out=""
  shift 2
  for ((i = 0; i < limit; i++)); do
    if out=$("$@" 2>&1); then return 0; fi
    sleep 1
  done
  hpc_fail "timed out after ${limit}s waiting for $what${out:+: $(tail -n 3 <<<"$out" | tr '\n' ' ')}"
}

# hpc_retry TRIES DELAY COMMAND...: run COMMAND until it succeeds, at most TRIES times, DELAY
# seconds apart. On failure returns 1; hpc_last_error prints the command's last error output.
HPC_LAST_ERROR=""
hpc_retry() {
  local tries=$1 delay=$2 i
  shift 2
  for ((i = 1; i <= tries; i++)); do
    if HPC_LAST_ERROR=$("$@" 2>&1 >/dev/null); then return 0; fi
    if [ "$i" -lt "$tries" ]; then sleep "$delay"; fi
  done
  return 1
}

hpc_last_error() {
  printf '%s' "$HPC_LAST_ERROR" | tail -n 3 | tr '\n' ' '
}
