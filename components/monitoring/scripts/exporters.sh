#@ node exporter (+ Debian's NVMe collector) everywhere, the IPMI exporter with a BMC, and this
#@ host's collectors (Gluster health, the NFS probe, Slurm states, GPU health) on systemd timers;
#@ the host firewall keeps the exporters (and on the head Prometheus and Alertmanager) to Prometheus.
hpc_install @packages@
@firewall@
hpc_dir @textfile_dir@ 0755 0:0
hpc_dir @libexec@ 0755 0:0
@collectors@
hpc_put_file /etc/default/prometheus-node-exporter 0644 0:0 <<'HPC_FILE_END'
@node_defaults@
HPC_FILE_END
if hpc_file_changed && systemctl is-active --quiet prometheus-node-exporter; then
  systemctl restart prometheus-node-exporter
  hpc_changed "restarted node exporter (its arguments changed)"
fi
@ipmi@
@dcgm@
if [ "$HPC_CHANGED" = 1 ]; then systemctl daemon-reload; fi
@services@
hpc_wait @timeout@ "node exporter on :@node_port@" curl -fsS -o /dev/null http://127.0.0.1:@node_port@/metrics
@ipmi_wait@
