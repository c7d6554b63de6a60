"""Grafana dashboards as code (provisioning files): overview, GPUs, storage, Slurm, inference.

Each dashboard is the JSON model Grafana provisions from a directory (schemaVersion 39), with a
Prometheus data-source variable so it works whatever the data source is called. Every panel
query uses only metrics that the scrape jobs and collectors of this package produce (the tests
parse each query with promtool and check its metric names).
"""

from __future__ import annotations

import json
from typing import Any

SCHEMA_VERSION = 39
DS = {"type": "prometheus", "uid": "${datasource}"}

# (title, panels: (panel title, type, unit, [(expr, legend)]))
Panel = tuple[str, str, str, list[tuple[str, str]]]
DASHBOARDS: dict[str, tuple[str, list[Panel]]] = {
    "hpc-overview": ("Cluster overview", [
        ("Hosts up", "stat", "none", [('sum(up{job="node"})', "up"), ('count(up{job="node"})', "hosts")]),
        ("Firing alerts", "stat", "none", [('count(ALERTS{alertstate="firing"}) or vector(0)', "alerts")]),
        ("CPU busy", "timeseries", "percentunit",
         [('1 - avg by (host) (rate(node_cpu_seconds_total{mode="idle"}[5m]))', "{{host}}")]),
        ("Memory used", "timeseries", "percentunit",
         [("1 - node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes", "{{host}}")]),
        ("Rack power", "timeseries", "watt", [("sum by (rack) (ipmi_dcmi_power_consumption_watts)", "{{rack}}"),
                                            ("hpc:rack_power_budget_watts", "budget {{rack}}")]),
        ("Inlet temperature", "timeseries", "celsius",
         [('ipmi_temperature_celsius{name=~"(?i).*inlet.*"}', "{{host}}")]),
    ]),
    "hpc-gpus": ("GPUs", [  # the site's DCGM exporter, or this project's nvidia-smi collector
        ("GPU temperature", "timeseries", "celsius",
         [("DCGM_FI_DEV_GPU_TEMP or hpc_gpu_temperature_celsius", "{{host}} gpu{{gpu}}")]),
        ("GPU power", "timeseries", "watt",
         [("DCGM_FI_DEV_POWER_USAGE or hpc_gpu_power_watts", "{{host}} gpu{{gpu}}")]),
        ("GPU utilisation", "timeseries", "percent",
         [("DCGM_FI_DEV_GPU_UTIL or hpc_gpu_utilization_percent", "{{host}} gpu{{gpu}}")]),
        ("GPU memory used", "timeseries", "decmbytes",
         [("DCGM_FI_DEV_FB_USED or hpc_gpu_memory_used_mib", "{{host}} gpu{{gpu}}")]),
        ("XID errors", "stat", "none",
         [("max by (host, gpu) (DCGM_FI_DEV_XID_ERRORS or hpc_gpu_xid_last)", "{{host}} gpu{{gpu}}")]),
        ("Uncorrectable ECC", "stat", "none",
         [("increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[1h]) or hpc_gpu_ecc_uncorrected_volatile_total",
           "{{host}} gpu{{gpu}}")]),
        ("Thermal throttling", "timeseries", "percentunit",
         [("rate(DCGM_FI_DEV_THERMAL_VIOLATION[5m]) / 1e6 or hpc_gpu_thermal_slowdown", "{{host}} gpu{{gpu}}")]),
    ]),
    "hpc-storage": ("Storage", [
        ("Bricks online", "stat", "none", [("sum(hpc_gluster_brick_online)", "online"),
                                          ("count(hpc_gluster_brick_online)", "bricks")]),
        ("Pending heals", "timeseries", "none", [("hpc_gluster_heal_pending_entries", "{{brick}}")]),
        ("NFS probe", "stat", "none", [("min by (host) (hpc_nfs_probe_success)", "{{host}}")]),
        ("NFS probe latency", "timeseries", "s", [("hpc_nfs_probe_duration_seconds", "{{host}}")]),
        ("NVMe wear", "timeseries", "percentunit", [("nvme_percentage_used_ratio", "{{host}} {{device}}")]),
        ("NVMe data written", "timeseries", "bytes",
         [("nvme_data_units_written_total * 512000", "{{host}} {{device}}")]),
    ]),
    "hpc-slurm": ("Slurm", [
        ("Nodes down", "stat", "none", [("sum(hpc_slurm_node_down)", "down")]),
        ("Nodes drained", "stat", "none", [("sum(hpc_slurm_node_drained)", "drained")]),
        ("Jobs", "timeseries", "none", [("hpc_slurm_jobs", "{{state}}")]),
        ("GPUs allocated", "timeseries", "none", [("hpc_slurm_gpus_allocated", "allocated"),
                                                ("sum(hpc_slurm_node_gpus)", "total")]),
    ]),
    "hpc-inference": ("Inference", [
        ("Model servers up", "stat", "none", [('up{job="vllm"}', "{{model}}")]),
        ("Time to first token p95", "timeseries", "s", [(
            "histogram_quantile(0.95, sum by (le, model) (rate(vllm:time_to_first_token_seconds_bucket[5m])))",
            "{{model}}")]),
        ("Requests running / waiting", "timeseries", "none", [("vllm:num_requests_running", "{{model}} running"),
                                                            ("vllm:num_requests_waiting", "{{model}} waiting")]),
        ("KV cache use", "timeseries", "percentunit", [("vllm:gpu_cache_usage_perc", "{{model}}")]),
        ("Generated tokens/s", "timeseries", "none",
         [("rate(vllm:generation_tokens_total[5m])", "{{model}}")]),
    ]),
}  # fmt: skip


def _panel(i: int, title: str, kind: str, unit: str, queries: list[tuple[str, str]]) -> dict[str, Any]:
    width = 8 if kind == "stat" else 12
    per_row = 24 // width
    return {
        "id": i + 1,
        "type": kind,
        "title": title,
        "datasource": DS,
        "gridPos": {"h": 8, "w": width, "x": (i % per_row) * width, "y": (i // per_row) * 8},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {},
        "targets": [
            {"refId": chr(ord("A") + j), "datasource": DS, "expr": expr, "legendFormat": legend}
            for j, (expr, legend) in enumerate(queries)
        ],
    }


def dashboard(uid: str) -> dict[str, Any]:
    title, panels = DASHBOARDS[uid]
    return {
        "uid": uid,
        "title": f"hpc-cluster: {title}",
        "tags": ["hpc-cluster"],
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": False,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "1m",
        "templating": {
            "list": [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"}]
        },
        "panels": [_panel(i, *p) for i, p in enumerate(panels)],
    }


def files() -> dict[str, str]:
    """File name -> JSON, for Grafana's dashboard provisioning directory."""
    return {f"{uid}.json": json.dumps(dashboard(uid), indent=1, sort_keys=True) + "\n" for uid in DASHBOARDS}


def expressions() -> list[str]:
    return [expr for _, panels in DASHBOARDS.values() for *_, queries in panels for expr, _ in queries]
