#@ Backups on the Slurm head: restic, the hpc-backup program and its config, the repository's
#@ password (a secret: on stdin, kept in a root-only file), the repository (created once, never
#@ replaced: restic refuses to init over one) and the timer that runs every backup. A changed
#@ password re-keys the repository before the file changes, so the snapshots stay readable.
#@ The first backup runs from the timer, not here: a step does not wait on the data's size.
hpc_install restic jq
password=$(cat)
[ -n "$password" ] || hpc_fail "no backup password on stdin (hpc:backupPassword)"
hpc_dir @conf_dir@ 0700 0:0
hpc_dir @status_dir@ 0700 0:0
hpc_dir @textfile_dir@ 0755 0:0
hpc_put_file @program@ 0755 0:0 <<'HPC_FILE_END'
@program_text@
HPC_FILE_END
hpc_put_file @conf@ 0600 0:0 <<'HPC_FILE_END'
@conf_text@
HPC_FILE_END
new=$(mktemp "@conf_dir@/.password.XXXXXX")
trap 'rm -f "$new"' EXIT
printf '%s' "$password" >"$new"
if [ -s @password_file@ ] && ! cmp -s "$new" @password_file@ && @program@ opens 2>/dev/null; then
  out=$(@program@ rekey "$new" 2>&1) || hpc_fail "the backup password changed but the repository kept the old one: $out"
  hpc_changed "changed the backup repository's password"
fi
hpc_put_file @password_file@ 0600 0:0 <"$new"
out=$(@program@ init 2>&1) || hpc_fail "$out"
case $out in *created*) hpc_changed "$out" ;; esac
@program@ metrics >/dev/null
restart=0
@units@
if [ "$restart" = 1 ]; then systemctl daemon-reload; fi
hpc_service_up hpc-backup.timer
