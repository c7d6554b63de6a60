#@ Stop the collectors and remove their files and metrics; the exporter packages stay.
@stop_timers@rm -f @collectors@ @unit_dir@/hpc-gluster-metrics.* @unit_dir@/hpc-nfs-probe.* @unit_dir@/hpc-slurm-metrics.*
rm -f @textfile_dir@/gluster.prom @textfile_dir@/nfs_probe.prom @textfile_dir@/slurm.prom
systemctl daemon-reload
hpc_changed "removed the hpc-cluster collectors (exporter packages kept)"
