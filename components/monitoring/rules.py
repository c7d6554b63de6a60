"""Alert rules (Prometheus rule file), each with the runbook line an operator acts on.

Metric sources: node exporter (``up``), DCGM exporter (``DCGM_FI_*``), the IPMI exporter
(``ipmi_*``), Debian's NVMe textfile collector (``nvme_*``), and this project's own textfile
collectors (``hpc_gluster_*``, ``hpc_nfs_probe_*``, ``hpc_slurm_*``, ``components.monitoring.collectors``),
vLLM's ``/metrics`` (``vllm:*``). Thresholds come from ``spec.THRESHOLDS``.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from components.monitoring.spec import THRESHOLDS, MonitoringSpec


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    for_: str
    severity: str
    summary: str
    runbook: str


def _t(key: str) -> float:
    return THRESHOLDS[key].value


def alerts() -> list[Alert]:
    return [
        Alert("HostDown", 'up{job="node"} == 0', "2m", "critical",
              "{{ $labels.host }} does not answer node exporter scrapes",
              "Check power and network (BMC console); if it rebooted, `make up` re-applies what it lost."),
        Alert("GpuTemperatureHigh", f"DCGM_FI_DEV_GPU_TEMP > {_t('gpu_temp_c'):g}", "5m", "warning",
              "GPU {{ $labels.gpu }} on {{ $labels.host }} at {{ $value }} °C",
              "Check the node's fans and inlet temperature; drain it (scontrol update ... state=drain) if it rises."),
        Alert("GpuThermalThrottling", "rate(DCGM_FI_DEV_THERMAL_VIOLATION[5m]) > 0", "10m", "warning",
              "GPU {{ $labels.gpu }} on {{ $labels.host }} is throttling for heat",
              "Jobs on it run slower; check airflow and the rack's cooling, then the GPU's own fan/heatsink."),
        Alert("GpuXidError", "DCGM_FI_DEV_XID_ERRORS != 0", "0m", "critical",
              "GPU {{ $labels.gpu }} on {{ $labels.host }} reported XID {{ $value }}",
              "Look the XID up in NVIDIA's XID catalogue; 48/63/64/79 need a drain and a GPU reset or RMA."),
        Alert("GpuEccUncorrectable", "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[1h]) > 0", "0m", "critical",
              "Uncorrectable ECC errors on GPU {{ $labels.gpu }} of {{ $labels.host }}",
              "Drain the node; jobs on this GPU may have computed garbage. Reset the GPU; RMA if it repeats."),
        Alert("BmcInletTemperatureHigh",
              f'ipmi_temperature_celsius{{name=~"(?i).*inlet.*"}} > {_t("inlet_c"):g}', "15m", "warning",
              "Inlet air at {{ $labels.host }} is {{ $value }} °C",
              "The room or the rack's cold aisle is too warm: check the CRAC units and blanking panels."),
        Alert("BmcInternalAmbientHigh",
              f'ipmi_temperature_celsius{{name=~"(?i).*(exhaust|ambient|system).*"}} > {_t("internal_ambient_c"):g}',
              "10m", "critical",
              "Internal ambient at {{ $labels.host }} is {{ $value }} °C",
              "Above 35 °C drives and capacitors age fast: reduce load (drain) and fix the cooling now."),
        Alert("RackPowerOverBudget",
              "sum by (rack) (ipmi_dcmi_power_consumption_watts) > on (rack) hpc:rack_power_budget_watts",
              "5m", "critical",
              "Rack {{ $labels.rack }} draws {{ $value }} W, above its powerBudgetW",
              "Drain nodes in the rack until it is under budget; a breaker trip loses every job in it."),
        Alert("NvmeWearHigh", f"nvme_percentage_used_ratio > {_t('nvme_wear_ratio'):g}", "1h", "warning",
              "NVMe {{ $labels.device }} on {{ $labels.host }} has used {{ $value | humanizePercentage }} of its life",
              "Order a replacement drive; plan the swap in a maintenance window before it reaches 100 %."),
        Alert("GlusterBrickOffline", "hpc_gluster_brick_online == 0", "2m", "critical",
              "Brick {{ $labels.brick }} of {{ $labels.volume }} is offline",
              "The volume runs on fewer copies: `gluster volume start <vol> force` on the storage host restarts it."),
        Alert("GlusterHealBacklogGrowing",
              "hpc_gluster_heal_pending_entries > 0 and delta(hpc_gluster_heal_pending_entries[30m]) > 0",
              "30m", "warning",
              "{{ $value }} entries wait for heal on {{ $labels.brick }}",
              "Check the brick's host and network; `gluster volume heal <vol> info` lists the entries."),
        Alert("NfsProbeFailing", "hpc_nfs_probe_success == 0", "5m", "critical",
              "The NFS read/write probe fails on {{ $labels.host }}",
              "Checkpoints may not be written: check ganesha.nfsd and the export (`make up` repairs the export)."),
        Alert("NfsProbeStale", f"time() - hpc_nfs_probe_timestamp_seconds > {_t('nfs_probe_stale_s'):g}", "5m",
              "warning", "The NFS probe on {{ $labels.host }} has not reported for 10 min",
              "A hung mount blocks the probe: check `mountpoint` and `dmesg` on the host."),
        Alert("SlurmNodeDown", "hpc_slurm_node_down == 1", "5m", "critical",
              "Slurm node {{ $labels.node }} is down",
              "`sinfo -R` says why; fix the node, then `scontrol update nodename=<n> state=resume`."),
        Alert("SlurmNodeDrainedLong", "hpc_slurm_node_drained == 1", f"{_t('drained_hours'):g}h", "warning",
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
                    "labels": {"severity": a.severity, "cluster": spec.cluster},
                    "annotations": {"summary": a.summary, "runbook": a.runbook},
                }
                for a in alerts()
            ],
        }
    )
    header = "# Managed by hpc-cluster (Pulumi): components/monitoring/rules.py\n"
    return header + yaml.safe_dump({"groups": groups}, sort_keys=False, allow_unicode=True, width=1000)
