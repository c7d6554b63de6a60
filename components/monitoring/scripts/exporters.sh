#@ node exporter (+ Debian's NVMe collector) everywhere, the IPMI exporter with a BMC, and this
#@ host's collectors (Gluster health, the NFS probe, Slurm states) on systemd timers.
hpc_install @packages@
hpc_dir @textfile_dir@ 0755 0:0
hpc_dir @libexec@ 0755 0:0
@collectors@
if [ "$HPC_CHANGED" = 1 ]; then systemctl daemon-reload; fi
@services@
hpc_wait @timeout@ "node exporter on :@node_port@" curl -fsS -o /dev/null http://127.0.0.1:@node_port@/metrics
@ipmi_wait@
