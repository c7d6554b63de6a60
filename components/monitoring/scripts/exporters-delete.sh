#@ Stop the collectors and remove their files and metrics, and the monitoring firewall; the exporter
#@ packages and their configuration stay (the exporters keep running as configured).
@stop_timers@rm -f @collectors@ @unit_dir@/hpc-gluster-metrics.* @unit_dir@/hpc-nfs-probe.* @unit_dir@/hpc-slurm-metrics.* @unit_dir@/hpc-gpu-metrics.*
rm -f @textfile_dir@/gluster.prom @textfile_dir@/nfs_probe.prom @textfile_dir@/slurm.prom @textfile_dir@/gpu.prom
systemctl daemon-reload
hpc_changed "removed the hpc-cluster collectors (exporter packages kept)"
if nft list table inet @table@ >/dev/null 2>&1; then
  nft delete table inet @table@
  hpc_changed "removed the monitoring firewall (nft table inet @table@)"
fi
if systemctl is-enabled --quiet @unit@ 2>/dev/null; then systemctl disable --quiet @unit@; fi
rm -f @unit_dir@/@unit@.service @rules_file@
