"""Alert rules (Prometheus rule file), each with the runbook line an operator acts on.

Metric sources: node exporter (``up``), DCGM exporter (``DCGM_FI_*``), the IPMI exporter
(``ipmi_*``), Debian's NVMe textfile collector (``nvme_*``), and this project's own textfile
collectors (``hpc_gluster_*``, ``hpc_nfs_probe_*``, ``hpc_slurm_*``, ``components.monitoring.collectors``),
the backups' (``hpc_backup_*``, ``components/backup/programs/hpc-backup``),
vLLM's ``/metrics`` (``vllm:*``). Thresholds come from ``spec.THRESHOLDS``.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from components.hardware import CRITICAL_XIDS
from components.monitoring.spec import THRESHOLDS, MonitoringSpec


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    for_: str
    severity: str
    summary: str
    runbook: str
    drain: bool = False  # the alert receiver on the head drains the Slurm node it names


def _t(key: str) -> float:
    return THRESHOLDS[key].value


def _on_host(expr: str, label: str | None) -> str:
    """A collector's series names the machine it ran on (``host``): that becomes ``reporter``, and
    ``host`` names the failed machine (its ``label``), or is dropped when the series names none,
    so alerts and the HostDown inhibition point at what broke."""
    moved = f'label_replace({expr}, "reporter", "$1", "host", "(.+)")'
    if label is None:
        return f'label_replace({moved}, "host", "", "host", ".*")'
    return f'label_replace({moved}, "host", "$1", "{label}", "(.+)")'


# Filesystems whose space is the host's own (not tmpfs, the shared volume's mounts, overlays).
_FS = 'fstype!~"tmpfs|ramfs|devtmpfs|overlay|squashfs|nfs4?|fuse.*",mountpoint!~"/run.*"'

# GPU series by source: the site's DCGM exporter, or this project's nvidia-smi collector.
GPU_SERIES = {
    "dcgm": {
        "temp": "DCGM_FI_DEV_GPU_TEMP",
        "throttle": "rate(DCGM_FI_DEV_THERMAL_VIOLATION[5m]) > 0",
        "xid": "DCGM_FI_DEV_XID_ERRORS",
        "ecc": "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[1h]) > 0",
        "retired": "DCGM_FI_DEV_RETIRED_PENDING > 0",
    },
    "nvidia-smi": {
        "temp": "hpc_gpu_temperature_celsius",
        "throttle": "hpc_gpu_thermal_slowdown == 1",
        "xid": "hpc_gpu_xid_last",
        "ecc": "hpc_gpu_ecc_uncorrected_volatile_total > 0",
        "retired": "hpc_gpu_retired_pages_pending == 1",
    },
}


def _critical_xid(series: str) -> str:
    """The series when its last XID is one that needs a reset or repair (CRITICAL_XIDS)."""
    return " or ".join(f"{series} == {x}" for x in CRITICAL_XIDS)


def alerts(gpu_metrics: str = "nvidia-smi") -> list[Alert]:
    gpu = GPU_SERIES[gpu_metrics]
    return [
        Alert("Watchdog", "vector(1)", "0m", "none",
              "Always firing: proves Prometheus evaluates rules and Alertmanager delivers",
              "Point an external dead-man's switch at hpc:watchdogWebhookUrl: when it stops hearing this alert, "
              "the monitoring itself is down (the head, Prometheus or Alertmanager)."),
        Alert("HostDown", 'up{job="node"} == 0', "2m", "critical",
              "{{ $labels.host }} does not answer node exporter scrapes",
              "Check power and network (BMC console); if it rebooted, `make up` re-applies what it lost."),
        Alert("TargetDown", 'up{job!~"node|vllm"} == 0', "5m", "warning",
              "The {{ $labels.job }} exporter on {{ $labels.host }} does not answer",
              "Its alerts cannot fire while it is down: `systemctl status` the exporter on the host "
              "(ipmi: prometheus-ipmi-exporter, dcgm: the site's DCGM exporter), then `make up`."),
        Alert("TextfileCollectorStale",
              # the backups' file is written once a run (daily): BackupStale watches its own age
              f'time() - node_textfile_mtime_seconds{{file!~".*hpc_backup[.]prom"}} > {_t("textfile_stale_s"):g}', "5m",
              "warning",
              "{{ $labels.file }} on {{ $labels.host }} has not been rewritten for 10 min",
              "Its collector's timer stopped or hangs (`systemctl list-timers 'hpc-*'`): until it runs, the "
              "alerts it feeds read its last values."),
        Alert("TextfileCollectorUnreadable", "node_textfile_scrape_error == 1", "5m", "warning",
              "node exporter cannot parse a collector's file on {{ $labels.host }}",
              "The node exporter log names the file and the line; the collector wrote something it should not."),
        Alert("HostDiskFull",
              f"node_filesystem_avail_bytes{{{_FS}}} / node_filesystem_size_bytes{{{_FS}}} < {_t('disk_free_ratio'):g}",
              "5m", "critical",
              "{{ $labels.mountpoint }} on {{ $labels.host }} has {{ $value | humanizePercentage }} free",
              "Free space now (old logs, container images: `docker image prune`); slurmd, Docker and journald "
              "fail on a full disk."),
        Alert("HostDiskFilling",
              f"predict_linear(node_filesystem_avail_bytes{{{_FS}}}[6h], 24 * 3600) < 0 and "
              f"node_filesystem_avail_bytes{{{_FS}}} / node_filesystem_size_bytes{{{_FS}}}"
              f" < {_t('disk_filling_ratio'):g}",
              "1h", "warning",
              "{{ $labels.mountpoint }} on {{ $labels.host }} fills up within a day at this rate",
              "Find what grows (`du -xsh /var/* | sort -h`); plan the cleanup before HostDiskFull."),
        Alert("HostMemoryPressure",
              f"node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes < {_t('memory_available_ratio'):g}",
              "10m", "warning",
              "{{ $labels.host }} has {{ $value | humanizePercentage }} of its memory available",
              "A process outside a job's cgroup grows (`ps -eo pid,rss,cmd --sort=-rss`); the OOM killer is next."),
        Alert("HostOomKill", "increase(node_vmstat_oom_kill[10m]) > 0", "0m", "warning",
              "The kernel killed a process for memory on {{ $labels.host }}",
              "`journalctl -k | grep -i 'killed process'` names it; a job's own OOM is reported by Slurm "
              "(OUT_OF_MEMORY), this one may have been a daemon."),
        Alert("HostSystemdUnitFailed", 'node_systemd_unit_state{state="failed"} == 1', "5m", "warning",
              "{{ $labels.name }} failed on {{ $labels.host }}",
              "`systemctl status {{ $labels.name }}` and `journalctl -u {{ $labels.name }}` say why; fix, then "
              "`systemctl reset-failed`."),
        Alert("HostClockSkew", f"abs(node_timex_offset_seconds) > {_t('clock_offset_s'):g}", "10m", "warning",
              "The clock of {{ $labels.host }} is {{ $value }} s off",
              "Munge credentials and Slurm's job times need agreeing clocks: `timedatectl`, `chronyc tracking`."),
        Alert("HostClockNotSynchronised", "min_over_time(node_timex_sync_status[10m]) == 0", "10m", "warning",
              "The clock of {{ $labels.host }} is not synchronised to NTP",
              "Start the time daemon (`systemctl status chrony systemd-timesyncd`) and check it reaches its server."),
        Alert("HostMemoryEccUncorrectable", "increase(node_edac_uncorrectable_errors_total[1h]) > 0", "0m", "critical",
              "Uncorrectable memory errors on {{ $labels.host }} (controller {{ $labels.controller }})",
              "The node is drained (a job may have computed garbage); `edac-util -v` names the DIMM to replace.",
              drain=True),
        Alert("HostMemoryEccCorrectable",
              f"increase(node_edac_correctable_errors_total[1h]) > {_t('edac_correctable_per_h'):g}", "0m", "warning",
              "{{ $value }} corrected memory errors in an hour on {{ $labels.host }}",
              "A DIMM is failing: `edac-util -v` names it; replace it in the next maintenance window."),
        Alert("GpuCollectorFailing", "hpc_gpu_up == 0", "5m", "critical",
              "nvidia-smi fails on {{ $labels.host }}",
              "A GPU fell off the bus or the driver is gone: the health check drains the node; `nvidia-smi` and "
              "`dmesg | grep -i xid` on the host, then a reset or a reboot."),
        Alert("GpuMissing", "hpc_gpu_count < hpc_gpu_expected", "2m", "critical",
              "{{ $labels.host }} shows {{ $value }} GPUs, fewer than its profile",
              "A GPU fell off the bus (XID 79) or is not seated: the node is drained; reboot, then RMA.",
              drain=True),
        Alert("GpuTemperatureHigh", f"{gpu['temp']} > {_t('gpu_temp_c'):g}", "5m", "warning",
              "GPU {{ $labels.gpu }} on {{ $labels.host }} at {{ $value }} °C",
              "Check the node's fans and inlet temperature; drain it (scontrol update ... state=drain) if it rises."),
        Alert("GpuThermalThrottling", gpu["throttle"], "10m", "warning",
              "GPU {{ $labels.gpu }} on {{ $labels.host }} is throttling for heat",
              "Jobs on it run slower; check airflow and the rack's cooling, then the GPU's own fan/heatsink."),
        Alert("GpuXidError", _critical_xid(gpu["xid"]), "0m", "critical",
              "GPU {{ $labels.gpu }} on {{ $labels.host }} reported XID {{ $value }}",
              "The node is drained (its jobs keep running): look the XID up in NVIDIA's XID catalogue; "
              "48/64/79/95 need a GPU reset, a reboot or an RMA. Resume it when the GPU passes again.",
              drain=True),
        Alert("GpuXidReported", f"{gpu['xid']} != 0 unless ({_critical_xid(gpu['xid'])})", "0m", "warning",
              "GPU {{ $labels.gpu }} on {{ $labels.host }} reported XID {{ $value }}",
              "An XID a program causes or recovers from (13, 31, 43, 94): tell the job's owner; it does not "
              "drain the node."),
        Alert("GpuEccUncorrectable", gpu["ecc"], "0m", "critical",
              "Uncorrectable ECC errors on GPU {{ $labels.gpu }} of {{ $labels.host }}",
              "The node is drained; jobs on this GPU may have computed garbage. Reset the GPU; RMA if it repeats.",
              drain=True),
        Alert("GpuRetiredPagesPending", gpu["retired"], "0m", "warning",
              "GPU {{ $labels.gpu }} of {{ $labels.host }} has memory pages waiting for retirement",
              "The retirement takes effect at the next GPU reset: drain the node and reset the GPU when it is idle."),
        Alert("BmcInletTemperatureHigh",
              f'ipmi_temperature_celsius{{name=~"(?i).*inlet.*"}} > {_t("inlet_c"):g}', "15m", "warning",
              "Inlet air at {{ $labels.host }} is {{ $value }} °C",
              "The room or the rack's cold aisle is too warm: check the CRAC units and blanking panels."),
        Alert("BmcInternalAmbientHigh",
              f'ipmi_temperature_celsius{{name=~"(?i).*(ambient|internal|system).*"}} > {_t("internal_ambient_c"):g}',
              "10m", "critical",
              "Internal ambient at {{ $labels.host }} is {{ $value }} °C",
              "Above 35 °C drives and capacitors age fast: reduce load (drain) and fix the cooling now."),
        Alert("BmcExhaustTemperatureHigh",
              f'ipmi_temperature_celsius{{name=~"(?i).*(exhaust|outlet).*"}} > {_t("exhaust_c"):g}', "10m", "warning",
              "Exhaust air of {{ $labels.host }} is {{ $value }} °C",
              "The node heats more than its airflow carries away: check its fans and the hot aisle's extraction."),
        Alert("BmcSensorCritical", "ipmi_temperature_state == 2", "5m", "critical",
              "The BMC of {{ $labels.host }} rates {{ $labels.name }} critical (the vendor's own threshold)",
              "`ipmitool sdr type Temperature` on the host shows the reading and its thresholds; reduce load now."),
        Alert("BmcCollectorFailing", "ipmi_up == 0", "10m", "warning",
              "The IPMI exporter's {{ $labels.collector }} collector fails on {{ $labels.host }}",
              "Its alerts cannot fire (dcmi: RackPowerOverBudget): `ipmi-dcmi --get-system-power-statistics` "
              "on the host shows the BMC's own error."),
        Alert("RackPowerOverBudget",
              "sum by (rack) (ipmi_dcmi_power_consumption_watts) > on (rack) hpc:rack_power_budget_watts",
              "5m", "critical",
              "Rack {{ $labels.rack }} draws {{ $value }} W, above its powerBudgetW",
              "Drain nodes in the rack until it is under budget; a breaker trip loses every job in it."),
        Alert("NvmeWearHigh", f"nvme_percentage_used_ratio > {_t('nvme_wear_ratio'):g}", "1h", "warning",
              "NVMe {{ $labels.device }} on {{ $labels.host }} has used {{ $value | humanizePercentage }} of its life",
              "Order a replacement drive; plan the swap in a maintenance window before it reaches 100 %."),
        Alert("GlusterCollectorFailing", "hpc_gluster_up == 0", "3m", "critical",
              "glusterd on {{ $labels.host }} does not answer for {{ $labels.volume }}",
              "The brick and heal alerts are blind while it fails: `systemctl status glusterd`, "
              "`gluster volume status`."),
        Alert("GlusterBrickOffline", _on_host("hpc_gluster_brick_online == 0", None), "2m", "critical",
              "Brick {{ $labels.brick }} of {{ $labels.volume }} is offline",
              "The volume runs on fewer copies: `gluster volume start <vol> force` on the storage host restarts it."),
        Alert("GlusterHealBacklogGrowing",
              _on_host("hpc_gluster_heal_pending_entries > 0 and delta(hpc_gluster_heal_pending_entries[30m]) > 0",
                       None),
              "30m", "warning",
              "{{ $value }} entries wait for heal on {{ $labels.brick }}",
              "Check the brick's host and network; `gluster volume heal <vol> info` lists the entries."),
        Alert("NfsProbeFailing", "hpc_nfs_probe_success == 0", "5m", "critical",
              "The NFS read/write probe fails on {{ $labels.host }}",
              "Checkpoints may not be written: check ganesha.nfsd and the export (`make up` repairs the export)."),
        Alert("NfsProbeStale", f"time() - hpc_nfs_probe_timestamp_seconds > {_t('nfs_probe_stale_s'):g}", "5m",
              "warning", "The NFS probe on {{ $labels.host }} has not reported for 10 min",
              "A hung mount blocks the probe: check `mountpoint` and `dmesg` on the host."),
        Alert("BackupFailing", "hpc_backup_last_run_success == 0", "0m", "warning",
              "The {{ $labels.kind }} backup on {{ $labels.host }} failed",
              "`journalctl -u hpc-backup` quotes restic's or mariadb-dump's error (target full or unreachable, "
              "volume not mounted, DB down); fix it, then `systemctl start hpc-backup`."),
        Alert("BackupStale",
              "time() - hpc_backup_last_success_timestamp_seconds"
              " > ignoring(kind) group_left hpc_backup_max_age_seconds",
              "10m", "critical",
              "No good {{ $labels.kind }} backup on {{ $labels.host }} within hpc:backup.staleHours",
              "What cannot be rebuilt is not copied: `systemctl list-timers hpc-backup` (did it run?), "
              "`hpc-backup snapshots {{ $labels.kind }}`, then `systemctl start hpc-backup` and read its log."),
        Alert("SlurmControllerDown", "hpc_slurm_up == 0", "3m", "critical",
              "slurmctld on {{ $labels.host }} does not answer sinfo",
              "No job starts and the node alerts are blind: `docker logs slurm-head`, `docker exec slurm-head "
              "scontrol ping`; the controller's state survives a restart."),
        Alert("SlurmDbdDown", "hpc_slurmdbd_up == 0", "5m", "critical",
              "slurmdbd on {{ $labels.host }} does not answer sacctmgr",
              "Accounting and fair share stop (slurmctld queues the records for a while): check MariaDB and "
              "slurmdbd's log in the head container."),
        Alert("SlurmNodeDown", _on_host("hpc_slurm_node_down == 1", "node"), "5m", "critical",
              "Slurm node {{ $labels.node }} is down",
              "`sinfo -R` says why; fix the node, then `scontrol update nodename=<n> state=resume`."),
        Alert("SlurmNodeDrainedLong", _on_host("hpc_slurm_node_drained == 1", "node"), f"{_t('drained_hours'):g}h",
              "warning",
              "Slurm node {{ $labels.node }} has been drained for over 6 h",
              "A drain that outlived its maintenance: resume the node or record why it stays out."),
        Alert("ModelEndpointDown", 'up{job="vllm"} == 0', "5m", "critical",
              "Model {{ $labels.model }} on {{ $labels.host }} does not answer",
              "`kubectl -n inference describe pod` for the model; check the GPU (XID) and the model cache volume."),
        Alert("ModelLatencyHigh",
              "histogram_quantile(0.95, sum by (le, model) (rate(vllm:time_to_first_token_seconds_bucket[5m])))"
              f" > {_t('model_ttft_p95_s'):g}",
              "10m", "warning",
              "p95 time to first token of {{ $labels.model }} is {{ $value }} s",
              "The model is overloaded or its GPU is shared too tightly: move a model or raise its GPU share."),
    ]  # fmt: skip


def rule_file(spec: MonitoringSpec) -> str:
    """The rule file Prometheus loads: the rack budgets as series, then every alert."""
    budgets = [
        {"record": "hpc:rack_power_budget_watts", "expr": f"vector({watts})", "labels": {"rack": rack}}
        for rack, watts in sorted(spec.rack_budgets_w.items())
    ]
    groups = []
    if budgets:
        groups.append({"name": "hpc-budgets", "rules": budgets})
    groups.append(
        {
            "name": "hpc-alerts",
            "rules": [
                {
                    "alert": a.name,
                    "expr": a.expr,
                    "for": a.for_,
                    "labels": {"severity": a.severity, "cluster": spec.cluster}
                    | ({"drain": "true"} if a.drain else {}),
                    "annotations": {"summary": a.summary, "runbook": a.runbook},
                }
                for a in alerts(spec.gpu_metrics)
            ],
        }
    )
    header = "# Managed by hpc-cluster (Pulumi): components/monitoring/rules.py\n"
    return header + yaml.safe_dump({"groups": groups}, sort_keys=False, allow_unicode=True, width=1000)
