#!/bin/bash
# hpc-cluster Slurm container entrypoint; PID 1 is tini, which reaps and forwards signals to it.
#
#   hpc-entrypoint head     munged, MariaDB, slurmdbd, slurmctld (configless server)
#   hpc-entrypoint worker   munged, slurmd --conf-server "$SLURM_CONF_SERVER"
#   hpc-entrypoint login    munged, sackd --conf-server "$SLURM_CONF_SERVER", sshd (keys only)
#   hpc-entrypoint health   exit 0 when this container's daemons answer (HEALTHCHECK)
#
# Daemons run in the foreground as children of this script; when any of them exits, the
# script stops the others and exits non-zero, so Docker's restart policy restarts the set.
# docker stop/restart (SIGTERM, to this script only: tini without -g) stops them in the reverse
# order of their start, each waited for: slurmctld saves its state before slurmdbd, MariaDB
# and munged go, so a restarted head recovers what it had (nodes resumed, jobs cancelled).
# Secrets come from files mounted by the host (never from arguments or the environment).
# With an external directory (hpc:identity.ldap), sssd runs beside the daemons, started first.
set -euo pipefail

# The host's key (root's, read-only mount) and the copy munged reads (the image's munge user).
MUNGE_KEY_SOURCE=${MUNGE_KEY_SOURCE:-/etc/hpc-cluster/munge/munge.key}
MUNGE_KEY=/etc/munge/munge.key
DB_PASSWORD_FILE=${DB_PASSWORD_FILE:-/run/secrets/slurm-db-password}
DB_DIR=${DB_DIR:-/var/lib/mysql}
DB_SOCKET=/run/mysqld/mysqld.sock
ACCOUNTING_DB=slurm_acct_db
STARTUP_TIMEOUT_S=60
# InnoDB for the accounting database, after SchedMD's accounting guide: a lock wait of 900 s (its
# recommended innodb_lock_wait_timeout: slurmdbd's rollups hold long transactions), and a buffer
# pool sized for a head that also runs slurmctld (the guide asks for a large one on a database
# host of its own; raise DB_BUFFER_POOL for a long job history).
DB_LOCK_WAIT_TIMEOUT_S=900
DB_BUFFER_POOL=${DB_BUFFER_POOL:-256M}
SSSD_DIR=${SSSD_DIR:-/run/hpc-sssd}  # sssd.conf and the directory's CA, from the host (read-only)

log() { printf 'hpc-entrypoint: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

wait_for() { # SECONDS WHAT COMMAND...
  local limit=$1 what=$2 i
  shift 2
  for ((i = 0; i < limit * 5; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  die "timed out after ${limit}s waiting for $what"
}

tcp_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
munge_ok() { munge -n </dev/null | unmunge >/dev/null; }

start_munge() {
  [ -f "$MUNGE_KEY_SOURCE" ] || die "munge key $MUNGE_KEY_SOURCE is missing (the host's munge-key step writes it)"
  [ "$(stat -c '%u %a' "$MUNGE_KEY_SOURCE")" = "0 400" ] \
    || die "munge key $MUNGE_KEY_SOURCE must be owned by root, mode 0400 (the host's munge-key step writes it so)"
  install -o munge -g munge -m 0400 "$MUNGE_KEY_SOURCE" "$MUNGE_KEY"
  install -d -o munge -g munge -m 0755 /run/munge
  runuser -u munge -- munged --foreground --key-file="$MUNGE_KEY" --seed-file=/run/munge/munged.seed &
  started munged
  wait_for "$STARTUP_TIMEOUT_S" munged munge_ok
}

start_sssd() {
  [ -f "$SSSD_DIR/sssd.conf" ] || return 0
  [ -f "$SSSD_DIR/ldap-ca.pem" ] || die "$SSSD_DIR/ldap-ca.pem is missing (the directory's CA)"
  install -m 0600 -o root -g root "$SSSD_DIR/sssd.conf" /etc/sssd/sssd.conf
  install -m 0644 -o root -g root "$SSSD_DIR/ldap-ca.pem" /etc/sssd/hpc-ldap-ca.pem
  # a restarted container asks the directory again instead of trusting an old cache
  rm -f /var/lib/sss/db/* /var/lib/sss/mc/* /var/lib/sss/pipes/*.pid 2>/dev/null || true
  sssd -i --logger=stderr &
  started sssd
  wait_for "$STARTUP_TIMEOUT_S" sssd test -S /var/lib/sss/pipes/nss
}

db_ping() { mariadb-admin --socket="$DB_SOCKET" ping; }

start_database() {
  [ -r "$DB_PASSWORD_FILE" ] || die "database password file $DB_PASSWORD_FILE is missing"
  install -d -o mysql -g mysql -m 0750 "$DB_DIR"
  install -d -o mysql -g mysql -m 0755 /run/mysqld
  if [ ! -d "$DB_DIR/mysql" ]; then
    log "initialising the accounting database in $DB_DIR"
    mariadb-install-db --user=mysql --datadir="$DB_DIR" --auth-root-authentication-method=socket \
      --skip-test-db >/dev/null
  fi
  mariadbd --user=mysql --datadir="$DB_DIR" --socket="$DB_SOCKET" --bind-address=127.0.0.1 --port=3306 \
    --skip-log-bin --innodb-buffer-pool-size="$DB_BUFFER_POOL" --innodb-lock-wait-timeout="$DB_LOCK_WAIT_TIMEOUT_S" &
  started mariadbd
  wait_for "$STARTUP_TIMEOUT_S" MariaDB db_ping
  local password
  password=$(<"$DB_PASSWORD_FILE")
  password=${password//\'/\'\'}
  # The password reaches MariaDB on stdin, never on a command line; ALTER keeps it in step
  # when the stack rotates it.
  mariadb --socket="$DB_SOCKET" <<SQL
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$password';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$password';
GRANT ALL ON $ACCOUNTING_DB.* TO 'slurm'@'127.0.0.1';
SQL
}

# The daemons in the order they started, as name:pid.
DAEMONS=()
STOPPING=0
started() { DAEMONS+=("$1:$!"); }

# stop_all: each daemon, last started first, sent SIGTERM and waited for.
stop_all() {
  local i name pid
  for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
    name=${DAEMONS[i]%%:*} pid=${DAEMONS[i]##*:}
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      log "stopped $name"
    fi
  done
}

trap 'STOPPING=1' TERM INT

supervise() {
  local status=0
  [ "$STOPPING" = 1 ] || wait -n || status=$?  # a signal during start-up: stop at once
  if [ "$STOPPING" = 1 ]; then
    log "stopping (signal received)"
    stop_all
    exit 0
  fi
  log "a daemon exited (status $status); stopping the others"
  stop_all
  exit 1
}

run_head() {
  start_sssd
  start_munge
  start_database
  install -d -o slurm -g slurm -m 0755 /var/log/slurm
  install -d -o slurm -g slurm -m 0700 /var/spool/slurmctld
  slurmdbd -D &
  started slurmdbd
  wait_for "$STARTUP_TIMEOUT_S" slurmdbd tcp_open 127.0.0.1 6819
  slurmctld -D &
  started slurmctld
  supervise
}

# slurmd makes the job cgroups in this container's own cgroup (a private cgroup namespace: its
# root is the container's cgroup), which Docker mounts read-only. CAP_SYS_ADMIN makes each cgroup
# mount writable (remount,bind: the mount's flag only, the hierarchy is the host's). On cgroup v2 a
# cgroup with processes cannot give controllers to its children ("no internal processes"), so this
# script and its children move to init.scope first; slurmd then makes its
# system.slice/<node>_slurmstepd.scope beside it (IgnoreSystemd=yes in cgroup.conf).
prepare_cgroups() {
  local target fstype err
  while read -r target fstype; do
    case "$fstype" in cgroup | cgroup2) ;; *) continue ;; esac
    err=$(mount -o remount,bind,rw "$target" 2>&1) \
      || die "cannot make the cgroup mount $target writable (slurmd needs CAP_SYS_ADMIN and a private cgroup namespace): $err"
  done < <(findmnt -rn -o TARGET,FSTYPE -R /sys/fs/cgroup)
  [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] || return 0
  mkdir -p /sys/fs/cgroup/init.scope
  local pid pass
  for pass in 1 2 3 4 5; do # again while a daemon not yet moved forks (its children stay behind)
    while read -r pid; do
      echo "$pid" >/sys/fs/cgroup/init.scope/cgroup.procs 2>/dev/null || true # a pid that has exited
    done </sys/fs/cgroup/cgroup.procs
    [ -s /sys/fs/cgroup/cgroup.procs ] || break
    log "moving processes to init.scope: pass $pass left $(wc -l </sys/fs/cgroup/cgroup.procs)"
  done
  [ ! -s /sys/fs/cgroup/cgroup.procs ] \
    || die "processes are left in the container's root cgroup: $(tr '\n' ' ' </sys/fs/cgroup/cgroup.procs)"
}

run_worker() {
  [ -n "${SLURM_CONF_SERVER:-}" ] || die "SLURM_CONF_SERVER (head address:port) is not set"
  # The GPU device files are root's only on the host (0660, the GPU preflight); in here a job runs
  # as its user and Slurm's devices cgroup is what keeps it to the GPUs it was given.
  local dev
  for dev in /dev/nvidia*; do
    if [ -c "$dev" ]; then chmod 0666 "$dev"; fi
  done
  start_sssd
  start_munge
  install -d -m 0755 /var/log/slurm /var/spool/slurmd
  prepare_cgroups # after munged and sssd (moved along to init.scope), so a bad key is named first
  slurmd -D --conf-server "$SLURM_CONF_SERVER" &
  started slurmd
  supervise
}

run_login() {
  [ -n "${SLURM_CONF_SERVER:-}" ] || die "SLURM_CONF_SERVER (head address:port) is not set"
  start_sssd
  start_munge
  # Directory users: keys from the directory (sss_ssh_authorizedkeys), homes made at first login
  # (PAM session: pam_mkhomedir). Read before 10-hpc-cluster.conf: the first value wins.
  if [ -f "$SSSD_DIR/sssd.conf" ]; then
    printf '%s\n' "# hpc-cluster: an external directory (hpc:identity.ldap)" "UsePAM yes" \
      "AuthorizedKeysCommand /usr/bin/sss_ssh_authorizedkeys %u" "AuthorizedKeysCommandUser nobody" \
      >/etc/ssh/sshd_config.d/05-hpc-directory.conf
  else
    rm -f /etc/ssh/sshd_config.d/05-hpc-directory.conf
  fi
  install -d -m 0700 /var/lib/hpc-login/ssh
  [ -f /var/lib/hpc-login/ssh/ssh_host_ed25519_key ] \
    || ssh-keygen -q -t ed25519 -N '' -C '' -f /var/lib/hpc-login/ssh/ssh_host_ed25519_key
  install -d -m 0755 /run/sshd /run/slurm
  # sackd fetches slurm.conf from the controller for the client tools (/run/slurm/conf).
  sackd -D --conf-server "$SLURM_CONF_SERVER" &
  started sackd
  wait_for "$STARTUP_TIMEOUT_S" "sackd to fetch the configuration" test -f /run/slurm/conf/slurm.conf
  /usr/sbin/sshd -D -e &
  started sshd
  supervise
}

health() {
  munge_ok || die "munged does not answer"
  if [ -f /etc/slurm/slurm.conf ] || [ -f /run/slurm/conf/slurm.conf ]; then
    grep -q 'is UP' <<<"$(scontrol ping)" || die "slurmctld does not answer"
  else
    kill -0 "$(cat /run/slurmd.pid)" || die "slurmd is not running"
  fi
}

case "${1:-}" in
  head) run_head ;;
  worker) run_worker ;;
  login) run_login ;;
  health) health ;;
  *) die "usage: hpc-entrypoint head|worker|login|health" ;;
esac
