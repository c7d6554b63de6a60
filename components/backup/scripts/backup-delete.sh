#@ Stops the backups and removes what the create step installed. The repository (the backups
#@ themselves) is kept: its password is still the stack's hpc:backupPassword.
hpc_service_down hpc-backup.timer
for f in @unit_dir@/hpc-backup.timer @unit_dir@/hpc-backup.service @program@ @metrics_file@; do
  if [ -e "$f" ]; then
    rm -f "$f"
    hpc_changed "removed $f"
  fi
done
if [ -d @conf_dir@ ]; then
  rm -rf @conf_dir@
  hpc_changed "removed @conf_dir@"
fi
echo "hpc: kept the backup repository @repository@ and @status_dir@"
