#@ Part of ganesha.sh: the systemd drop-in and its wait script (after glusterd at boot, and only
#@ once the volume is started).
hpc_put_file @wait_script@ 0755 0:0 <<'HPC_WAIT_END'
#!/bin/sh
# Managed by hpc-cluster (Pulumi): NFS-Ganesha's FSAL_GLUSTER exports only what glusterd serves
# when Ganesha starts, so Ganesha waits (ExecStartPre) until the volume is started.
volume=$1 limit=${2:-@boot_wait@} waited=0
until gluster --mode=script volume status "$volume" >/dev/null 2>&1; do
  if [ "$waited" -ge "$limit" ]; then
    echo "hpc-cluster: gluster volume $volume is not started after ${limit}s" >&2
    exit 1
  fi
  sleep 2
  waited=$((waited + 2))
done
HPC_WAIT_END
hpc_put_file @drop_in@ 0644 0:0 <<'HPC_DROPIN_END'
# Managed by hpc-cluster (Pulumi): start NFS-Ganesha after glusterd, once the volume is up.
[Unit]
After=glusterd.service network-online.target
Wants=glusterd.service network-online.target

[Service]
ExecStartPre=@wait_script@ @volume@ @boot_wait@
# The wait outlasts systemd's default start timeout (90 s); a volume still down after it fails the
# start, and systemd tries again, so the export is served as soon as the volume is up.
TimeoutStartSec=@start_timeout@
Restart=on-failure
RestartSec=@restart_s@
HPC_DROPIN_END
if hpc_file_changed; then
  systemctl daemon-reload
fi
