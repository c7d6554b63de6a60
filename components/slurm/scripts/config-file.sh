#@ One Slurm config file on the head (content on stdin); a running controller re-reads a changed
#@ file (Slurm 24.11's scontrol reconfigure restarts slurmctld in place).
mkdir -p @config_dir@
content=$(cat)
hpc_put_file @path@ 0644 0:0 < <(printf '%s\n' "$content")
running() { [ "$(docker inspect -f '{{.State.Running}}' @container@ 2>/dev/null)" = true ]; }
controller_up() { grep -q 'is UP' <<<"$(docker exec @container@ scontrol ping)"; }
if hpc_file_changed && running; then
  docker exec @container@ scontrol reconfigure
  hpc_wait @timeout@ "slurmctld after the reconfigure" controller_up
  hpc_changed "scontrol reconfigure"
fi
