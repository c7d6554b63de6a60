"""The monitoring tier's configs, checked by the tools that read them: promtool (config, rules,
and a unit test per alert with synthetic series: it fires when it should and stays quiet when
it should not), amtool, and the dashboards against their schema with every query parsed."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from components.monitoring import alert_table, dashboards, exporter_config, render_prometheus, rules
from components.monitoring.spec import THRESHOLDS, HostTarget, ModelTarget, MonitoringSpec
from offline import plan
from stacks import config, monitoring

pytestmark = [
    pytest.mark.real_tool,
    pytest.mark.skipif(not shutil.which("promtool"), reason="promtool (Debian: prometheus) is required"),
]

SPEC = MonitoringSpec(
    cluster="test",
    head="h1",
    hosts=(
        HostTarget("h1", "10.0.0.1", rack="r1", bmc=True),
        HostTarget("g1", "10.0.0.2", rack="r1", gpus=8, bmc=True),
    ),
    models=(ModelTarget("m", "g1", "10.0.0.2", 8000),),
    rack_budgets_w={"r1": 18000},
)
BASE = {"severity": None, "cluster": "test"}

# alert -> (firing series, quiet series (None: never quiet), eval time, the alert's labels when it fires)
Case = tuple[dict[str, str], dict[str, str] | None, str, dict[str, str]]
DISK = 'host="h1",device="/dev/nvme0n1p2",fstype="ext4",mountpoint="/"'
DISK_LABELS = {"host": "h1", "device": "/dev/nvme0n1p2", "fstype": "ext4", "mountpoint": "/"}
TMPFS = 'host="h1",device="tmpfs",fstype="tmpfs",mountpoint="/dev/shm"'
CASES: dict[str, Case] = {
    "Watchdog": ({}, None, "1m", {}),
    "HostDown": ({'up{job="node",host="g1"}': "0x10"}, {'up{job="node",host="g1"}': "1x10"}, "5m",
                 {"job": "node", "host": "g1"}),
    "TargetDown": ({'up{job="ipmi",host="g1"}': "0x10"},
                   {'up{job="ipmi",host="g1"}': "1x10", 'up{job="node",host="g1"}': "0x10"}, "8m",
                   {"job": "ipmi", "host": "g1"}),
    "TextfileCollectorStale": ({'node_textfile_mtime_seconds{host="h1",file="slurm.prom"}': "0x30"},
                               {'node_textfile_mtime_seconds{host="h1",file="slurm.prom"}': "0+60x30",
                                # the backups' file is rewritten once a run: BackupStale watches it
                                'node_textfile_mtime_seconds{host="h1",file="/var/lib/prometheus/node-exporter/'
                                'hpc_backup.prom"}': "0x30"}, "20m",
                               {"host": "h1", "file": "slurm.prom"}),
    "TextfileCollectorUnreadable": ({'node_textfile_scrape_error{host="h1"}': "1x10"},
                                    {'node_textfile_scrape_error{host="h1"}': "0x10"}, "6m", {"host": "h1"}),
    "HostDiskFull": ({f"node_filesystem_avail_bytes{{{DISK}}}": "1x10",
                      f"node_filesystem_size_bytes{{{DISK}}}": "100x10"},
                     {f"node_filesystem_avail_bytes{{{DISK}}}": "50x10",
                      f"node_filesystem_size_bytes{{{DISK}}}": "100x10",
                      f"node_filesystem_avail_bytes{{{TMPFS}}}": "0x10",
                      f"node_filesystem_size_bytes{{{TMPFS}}}": "100x10"},
                     "6m", DISK_LABELS),
    "HostDiskFilling": ({f"node_filesystem_avail_bytes{{{DISK}}}": "24-0.02x440",
                         f"node_filesystem_size_bytes{{{DISK}}}": "100x440"},
                        {f"node_filesystem_avail_bytes{{{DISK}}}": "20x440",
                         f"node_filesystem_size_bytes{{{DISK}}}": "100x440"}, "430m", DISK_LABELS),
    "HostMemoryPressure": ({'node_memory_MemAvailable_bytes{host="g1"}': "1x20",
                            'node_memory_MemTotal_bytes{host="g1"}': "100x20"},
                           {'node_memory_MemAvailable_bytes{host="g1"}': "50x20",
                            'node_memory_MemTotal_bytes{host="g1"}': "100x20"}, "15m", {"host": "g1"}),
    "HostOomKill": ({'node_vmstat_oom_kill{host="g1"}': "0 0 1 1 1"}, {'node_vmstat_oom_kill{host="g1"}': "3x5"},
                    "4m", {"host": "g1"}),
    "HostSystemdUnitFailed": ({'node_systemd_unit_state{host="h1",name="munge.service",state="failed"}': "1x10"},
                              {'node_systemd_unit_state{host="h1",name="munge.service",state="failed"}': "0x10"},
                              "6m", {"host": "h1", "name": "munge.service", "state": "failed"}),
    "HostClockSkew": ({'node_timex_offset_seconds{host="h1"}': "-0.2x20"},
                      {'node_timex_offset_seconds{host="h1"}': "0.001x20"}, "15m", {"host": "h1"}),
    "HostClockNotSynchronised": ({'node_timex_sync_status{host="h1"}': "0x30"},
                                 {'node_timex_sync_status{host="h1"}': "1x30"}, "25m", {"host": "h1"}),
    "HostMemoryEccUncorrectable": ({'node_edac_uncorrectable_errors_total{host="g1",controller="0"}': "0 0 1 1 1"},
                                   {'node_edac_uncorrectable_errors_total{host="g1",controller="0"}': "2x5"}, "4m",
                                   {"host": "g1", "controller": "0"}),
    "HostMemoryEccCorrectable": ({'node_edac_correctable_errors_total{host="g1",controller="0"}': "0+1x70"},
                                 {'node_edac_correctable_errors_total{host="g1",controller="0"}': "0+0.05x70"}, "65m",
                                 {"host": "g1", "controller": "0"}),
    "GpuCollectorFailing": ({'hpc_gpu_up{host="g1",source="nvidia-smi"}': "0x10"},
                            {'hpc_gpu_up{host="g1",source="nvidia-smi"}': "1x10"}, "6m",
                            {"host": "g1", "source": "nvidia-smi"}),
    "GpuMissing": ({'hpc_gpu_count{host="g1"}': "7x10", 'hpc_gpu_expected{host="g1"}': "8x10"},
                   {'hpc_gpu_count{host="g1"}': "8x10", 'hpc_gpu_expected{host="g1"}': "8x10"}, "3m", {"host": "g1"}),
    "BmcInletTemperatureHigh": ({'ipmi_temperature_celsius{host="h1",name="Inlet Temp"}': "25x30"},
                                {'ipmi_temperature_celsius{host="h1",name="Inlet Temp"}': "21x30"}, "20m",
                                {"host": "h1", "name": "Inlet Temp"}),
    "BmcInternalAmbientHigh": ({'ipmi_temperature_celsius{host="h1",name="System Temp"}': "40x20"},
                               {'ipmi_temperature_celsius{host="h1",name="System Temp"}': "30x20",
                                'ipmi_temperature_celsius{host="h1",name="Exhaust Temp"}': "40x20"}, "15m",
                               {"host": "h1", "name": "System Temp"}),
    "BmcExhaustTemperatureHigh": ({'ipmi_temperature_celsius{host="h1",name="Exhaust Temp"}': "55x20"},
                                  {'ipmi_temperature_celsius{host="h1",name="Exhaust Temp"}': "37x20"}, "15m",
                                  {"host": "h1", "name": "Exhaust Temp"}),
    "BmcSensorCritical": ({'ipmi_temperature_state{host="g1",name="GPU1 Temp",id="40"}': "2x10"},
                          {'ipmi_temperature_state{host="g1",name="GPU1 Temp",id="40"}': "1x10"}, "6m",
                          {"host": "g1", "name": "GPU1 Temp", "id": "40"}),
    "BmcCollectorFailing": ({'ipmi_up{host="g1",collector="dcmi"}': "0x15"},
                            {'ipmi_up{host="g1",collector="dcmi"}': "1x15"}, "12m",
                            {"host": "g1", "collector": "dcmi"}),
    "RackPowerOverBudget": ({'ipmi_dcmi_power_consumption_watts{host="h1",rack="r1"}': "10000x10",
                             'ipmi_dcmi_power_consumption_watts{host="g1",rack="r1"}': "9000x10"},
                            {'ipmi_dcmi_power_consumption_watts{host="h1",rack="r1"}': "5000x10",
                             'ipmi_dcmi_power_consumption_watts{host="g1",rack="r1"}': "9000x10"}, "8m",
                            {"rack": "r1"}),
    "NvmeWearHigh": ({'nvme_percentage_used_ratio{host="h1",device="nvme0"}': "0.85x90"},
                     {'nvme_percentage_used_ratio{host="h1",device="nvme0"}': "0.5x90"}, "70m",
                     {"host": "h1", "device": "nvme0"}),
    "GlusterCollectorFailing": ({'hpc_gluster_up{host="s1",volume="gv0"}': "0x5"},
                                {'hpc_gluster_up{host="s1",volume="gv0"}': "1x5"}, "4m",
                                {"host": "s1", "volume": "gv0"}),
    "GlusterBrickOffline": ({'hpc_gluster_brick_online{host="s1",volume="gv0",brick="s3:/b"}': "0x5"},
                            {'hpc_gluster_brick_online{host="s1",volume="gv0",brick="s3:/b"}': "1x5"}, "3m",
                            {"volume": "gv0", "brick": "s3:/b", "reporter": "s1"}),
    "GlusterHealBacklogGrowing": ({'hpc_gluster_heal_pending_entries{host="s1",volume="gv0",brick="s1:/b"}': "0+10x70"},
                                  {'hpc_gluster_heal_pending_entries{host="s1",volume="gv0",brick="s1:/b"}': "100x70"},
                                  "65m", {"volume": "gv0", "brick": "s1:/b", "reporter": "s1"}),
    "NfsProbeFailing": ({'hpc_nfs_probe_success{host="g1"}': "0x10"}, {'hpc_nfs_probe_success{host="g1"}': "1x10"},
                        "6m", {"host": "g1"}),
    "NfsProbeStale": ({'hpc_nfs_probe_timestamp_seconds{host="g1"}': "0x30"},
                      {'hpc_nfs_probe_timestamp_seconds{host="g1"}': "0+60x30"}, "20m", {"host": "g1"}),
    "BackupFailing": ({'hpc_backup_last_run_success{host="h1",kind="db"}': "0x5"},
                      {'hpc_backup_last_run_success{host="h1",kind="db"}': "1x5"}, "1m", {"host": "h1", "kind": "db"}),
    "BackupStale": ({'hpc_backup_last_success_timestamp_seconds{host="h1",kind="volume"}': "0x40",
                     'hpc_backup_max_age_seconds{host="h1"}': "600x40"},
                    {'hpc_backup_last_success_timestamp_seconds{host="h1",kind="volume"}': "0+60x40",
                     'hpc_backup_max_age_seconds{host="h1"}': "600x40"}, "25m", {"host": "h1", "kind": "volume"}),
    "SlurmControllerDown": ({'hpc_slurm_up{host="h1"}': "0x5"}, {'hpc_slurm_up{host="h1"}': "1x5"}, "4m",
                            {"host": "h1"}),
    "SlurmDbdDown": ({'hpc_slurmdbd_up{host="h1"}': "0x10"}, {'hpc_slurmdbd_up{host="h1"}': "1x10"}, "6m",
                     {"host": "h1"}),
    "SlurmNodeDown": ({'hpc_slurm_node_down{host="h1",node="g1",state="down"}': "1x10"},
                      {'hpc_slurm_node_down{host="h1",node="g1",state="idle"}': "0x10"}, "6m",
                      {"node": "g1", "state": "down", "host": "g1", "reporter": "h1"}),
    "SlurmNodeDrainedLong": ({'hpc_slurm_node_drained{host="h1",node="g1"}': "1x400"},
                             {'hpc_slurm_node_drained{host="h1",node="g1"}': "1x400"}, "370m",
                             {"node": "g1", "host": "g1", "reporter": "h1"}),
    "ModelEndpointDown": ({'up{job="vllm",host="g1",model="m"}': "0x10"},
                          {'up{job="vllm",host="g1",model="m"}': "1x10"}, "6m",
                          {"job": "vllm", "host": "g1", "model": "m"}),
    "ModelLatencyHigh": ({'vllm:time_to_first_token_seconds_bucket{model="m",le="0.5"}': "0x20",
                          'vllm:time_to_first_token_seconds_bucket{model="m",le="5"}': "0+10x20",
                          'vllm:time_to_first_token_seconds_bucket{model="m",le="+Inf"}': "0+10x20"},
                         {'vllm:time_to_first_token_seconds_bucket{model="m",le="0.5"}': "0+10x20",
                          'vllm:time_to_first_token_seconds_bucket{model="m",le="5"}': "0+10x20",
                          'vllm:time_to_first_token_seconds_bucket{model="m",le="+Inf"}': "0+10x20"}, "15m",
                         {"model": "m"}),
}  # fmt: skip
# The GPU alerts read the source the stack names (hpc:monitoring.gpuMetrics).
GPU_CASES: dict[str, dict[str, Case]] = {
    "nvidia-smi": {
        "GpuTemperatureHigh": ({'hpc_gpu_temperature_celsius{host="g1",gpu="0"}': "90x10"},
                               {'hpc_gpu_temperature_celsius{host="g1",gpu="0"}': "80x10"}, "8m",
                               {"host": "g1", "gpu": "0"}),
        "GpuThermalThrottling": ({'hpc_gpu_thermal_slowdown{host="g1",gpu="1"}': "1x30"},
                                 {'hpc_gpu_thermal_slowdown{host="g1",gpu="1"}': "0x30"}, "20m",
                                 {"host": "g1", "gpu": "1"}),
        "GpuXidError": ({'hpc_gpu_xid_last{host="g1",gpu="2"}': "0 0 79 79 79"},
                        {'hpc_gpu_xid_last{host="g1",gpu="2"}': "0 0 13 13 13"}, "4m", {"host": "g1", "gpu": "2"}),
        "GpuXidReported": ({'hpc_gpu_xid_last{host="g1",gpu="2"}': "0 0 13 13 13"},
                           {'hpc_gpu_xid_last{host="g1",gpu="2"}': "0 0 79 79 79"}, "4m", {"host": "g1", "gpu": "2"}),
        "GpuEccUncorrectable": ({'hpc_gpu_ecc_uncorrected_volatile_total{host="g1",gpu="3"}': "0 0 1 1 1"},
                                {'hpc_gpu_ecc_uncorrected_volatile_total{host="g1",gpu="3"}': "0x5"}, "4m",
                                {"host": "g1", "gpu": "3"}),
        "GpuRetiredPagesPending": ({'hpc_gpu_retired_pages_pending{host="g1",gpu="4"}': "1x5"},
                                   {'hpc_gpu_retired_pages_pending{host="g1",gpu="4"}': "0x5"}, "3m",
                                   {"host": "g1", "gpu": "4"}),
    },
    "dcgm": {
        "GpuTemperatureHigh": ({'DCGM_FI_DEV_GPU_TEMP{host="g1",gpu="0"}': "90x10"},
                               {'DCGM_FI_DEV_GPU_TEMP{host="g1",gpu="0"}': "80x10"}, "8m", {"host": "g1", "gpu": "0"}),
        "GpuThermalThrottling": ({'DCGM_FI_DEV_THERMAL_VIOLATION{host="g1",gpu="1"}': "0+1000x30"},
                                 {'DCGM_FI_DEV_THERMAL_VIOLATION{host="g1",gpu="1"}': "5x30"}, "20m",
                                 {"host": "g1", "gpu": "1"}),
        "GpuXidError": ({'DCGM_FI_DEV_XID_ERRORS{host="g1",gpu="2"}': "0 0 48 48 48"},
                        {'DCGM_FI_DEV_XID_ERRORS{host="g1",gpu="2"}': "0x5"}, "4m", {"host": "g1", "gpu": "2"}),
        "GpuXidReported": ({'DCGM_FI_DEV_XID_ERRORS{host="g1",gpu="2"}': "0 0 31 31 31"},
                           {'DCGM_FI_DEV_XID_ERRORS{host="g1",gpu="2"}': "0x5"}, "4m", {"host": "g1", "gpu": "2"}),
        "GpuEccUncorrectable": ({'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{host="g1",gpu="3"}': "0 0 1 1 1"},
                                {'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{host="g1",gpu="3"}': "4x5"}, "4m",
                                {"host": "g1", "gpu": "3"}),
        "GpuRetiredPagesPending": ({'DCGM_FI_DEV_RETIRED_PENDING{host="g1",gpu="4"}': "2x5"},
                                   {'DCGM_FI_DEV_RETIRED_PENDING{host="g1",gpu="4"}': "0x5"}, "3m",
                                   {"host": "g1", "gpu": "4"}),
    },
}  # fmt: skip
# Where the quiet case is the same series at an earlier time (the alert's `for` not yet reached).
QUIET_AT = {"SlurmNodeDrainedLong": "300m"}
MODES = sorted(GPU_CASES)


def cases(mode: str) -> dict[str, Case]:
    return {**CASES, **GPU_CASES[mode]}


def spec(mode: str) -> MonitoringSpec:
    return dataclasses.replace(SPEC, gpu_metrics=mode)


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("mode", MODES)
def test_every_alert_has_a_case_a_runbook_and_a_severity(mode):
    names = [a.name for a in rules.alerts(mode)]
    assert sorted(names) == sorted(cases(mode)) and len(names) == len(set(names))
    for a in rules.alerts(mode):
        assert a.severity in ("warning", "critical") or a.name == "Watchdog", a.name
        assert len(a.runbook) > 30, a.name


@pytest.mark.parametrize("mode", MODES)
def test_the_rules_and_the_config_pass_promtool(tmp_path, mode):
    (tmp_path / "hpc-rules.yml").write_text(rules.rule_file(spec(mode)))
    conf = render_prometheus.prometheus_config(spec(mode)).replace(render_prometheus.RULE_FILE, "hpc-rules.yml")
    (tmp_path / "prometheus.yml").write_text(conf)
    proc = promtool("check", "config", "prometheus.yml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(cases(mode)) + 1} rules found" in proc.stdout + proc.stderr


@pytest.mark.parametrize("mode", MODES)
def test_each_alert_fires_when_it_should_and_stays_quiet_when_it_should_not(tmp_path, mode):
    doc = yaml.safe_load(rules.rule_file(spec(mode)))
    for group in doc["groups"]:  # templates are checked by promtool check; here: expr, for, labels
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(doc))
    tests = []
    severity = {a.name: a.severity for a in rules.alerts(mode)}
    drains = {a.name for a in rules.alerts(mode) if a.drain}
    for name, (firing, quiet, at, labels) in cases(mode).items():
        expected = {**labels, "severity": severity[name], "cluster": "test"}
        if name in drains:
            expected["drain"] = "true"
        runs = [(firing, [{"exp_labels": expected}], at)]
        if quiet is not None:
            runs.append((quiet, [], QUIET_AT.get(name, at)))
        for series, alerts, when in runs:
            tests.append(
                {
                    "name": f"{name} {'fires' if alerts else 'stays quiet'}",
                    "interval": "1m",
                    "input_series": [{"series": s, "values": v} for s, v in series.items()],
                    "alert_rule_test": [{"eval_time": when, "alertname": name, "exp_alerts": alerts}],
                }
            )
    (tmp_path / "test.yml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": tests})
    )
    proc = promtool("test", "rules", "test.yml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(tests) == 2 * len(cases(mode)) - 1  # the Watchdog is never quiet


def test_gpu_hosts_are_scraped_for_dcgm_only_where_the_site_runs_it():
    jobs = {j["job_name"] for j in render_prometheus.scrape_jobs(spec("nvidia-smi"))}
    assert "dcgm" not in jobs and {"node", "ipmi", "vllm"} <= jobs
    dcgm = next(j for j in render_prometheus.scrape_jobs(spec("dcgm")) if j["job_name"] == "dcgm")
    assert [c["labels"]["host"] for c in dcgm["static_configs"]] == ["g1"]


def test_the_dcgm_counters_file_names_every_field_a_rule_or_dashboard_reads():
    used = exporter_config.dcgm_fields_used([a.expr for a in rules.alerts("dcgm")] + dashboards.expressions())
    assert {"DCGM_FI_DEV_THERMAL_VIOLATION", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"} <= used
    counters = exporter_config.dcgm_counters()
    rows = [line.split(", ") for line in counters.splitlines() if line and not line.startswith("#")]
    assert {r[0] for r in rows} == used
    assert all(len(r) == 3 and r[1] in ("gauge", "counter") and r[2] for r in rows)


def test_thresholds_name_their_source():
    for key, t in THRESHOLDS.items():
        assert t.source and t.unit, key
    assert f"> {THRESHOLDS['inlet_c'].value:g}" in next(
        a.expr for a in rules.alerts() if a.name == "BmcInletTemperatureHigh"
    )


@pytest.mark.skipif(not shutil.which("amtool"), reason="amtool (Debian: prometheus-alertmanager) is required")
@pytest.mark.parametrize("webhook", [None, "https://hooks.example.invalid/T0/B0"])
def test_alertmanager_config_passes_amtool(tmp_path, webhook):
    (tmp_path / "am.yml").write_text(render_prometheus.alertmanager_config(SPEC, webhook))
    proc = subprocess.run(["amtool", "check-config", str(tmp_path / "am.yml")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---- dashboards -------------------------------------------------------------------------------
DASHBOARD_SCHEMA = {  # the part of Grafana's dashboard JSON model provisioning relies on
    "type": "object",
    "required": ["uid", "title", "schemaVersion", "panels", "templating", "time"],
    "properties": {
        "uid": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,40}$"},
        "schemaVersion": {"type": "integer", "minimum": 36},
        "panels": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["id", "type", "title", "gridPos", "targets", "datasource"],
                "properties": {
                    "type": {"enum": ["timeseries", "stat", "gauge", "table"]},
                    "gridPos": {
                        "type": "object",
                        "required": ["h", "w", "x", "y"],
                        "properties": {"w": {"maximum": 24}, "x": {"maximum": 23}},
                    },
                    "targets": {
                        "type": "array",
                        "minItems": 1,
                        "items": {"type": "object", "required": ["refId", "expr"]},
                    },
                },
            },
        },
    },
}
# Metric names each source produces (the exporters' documented names, our collectors' and rules').
KNOWN = re.compile(
    r"^(up|ALERTS|node_[A-Za-z_]+|DCGM_FI_[A-Z_]+|ipmi_[a-z_]+|nvme_[a-z_]+|hpc_(gluster|nfs_probe|slurm|gpu)_[a-z_]+"
    r"|hpc:rack_power_budget_watts|vllm:[a-z_]+)$"
)


def test_dashboards_match_the_schema_and_every_query_parses(tmp_path):
    files = dashboards.files()
    assert sorted(files) == ["hpc-gpus.json", "hpc-inference.json", "hpc-overview.json", "hpc-slurm.json",
                             "hpc-storage.json"]  # fmt: skip
    for name, text in files.items():
        d = json.loads(text)
        jsonschema.validate(d, DASHBOARD_SCHEMA)
        ids = [p["id"] for p in d["panels"]]
        assert len(ids) == len(set(ids)), name
    exprs = dashboards.expressions()
    (tmp_path / "q.yml").write_text(
        yaml.safe_dump(
            {"groups": [{"name": "q", "rules": [{"record": f"q:{i}", "expr": e} for i, e in enumerate(exprs)]}]}
        )
    )
    proc = promtool("check", "rules", "q.yml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = set()
    for e in exprs:
        stripped = re.sub(r"\{[^}]*\}|\"[^\"]*\"|\[[^\]]*\]", "", e)
        names |= {
            n for n in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", stripped)
            if n not in {"sum", "by", "rate", "increase", "max", "min", "count", "avg", "or", "vector", "le",
                         "histogram_quantile", "model", "host", "rack", "gpu", "mode", "e6", "and", "on"}
        }  # fmt: skip
    assert names and all(KNOWN.match(n) for n in names), sorted(n for n in names if not KNOWN.match(n))


# ---- the plan -------------------------------------------------------------------------------------
def test_the_plan_installs_monitoring_from_the_stack():
    result = plan.run("prod")
    names = {r.name for r in result.resources}
    cfg = config.parse({k.split(":", 1)[1]: v for k, v in
                        yaml.safe_load((plan.ROOT / "Pulumi.prod.yaml").read_text())["config"].items()})  # fmt: skip
    assert {f"{h.name}-exporters" for h in cfg.hosts} <= names
    head = cfg.slurm_head.name
    assert {f"{head}-prometheus", f"{head}-alertmanager", f"{head}-dashboards"} <= names
    spec = monitoring.spec_of(cfg, tls=True)  # prod is planned with the site's certificate
    prom = plan.plain(result.by_name(f"{head}-prometheus").inputs["create"])
    assert render_prometheus.prometheus_config(spec).strip() in prom
    assert all(f"{h.address}:9100" in prom for h in spec.hosts)


def test_monitoring_can_be_turned_off():
    names = {r.name for r in plan.run("dev", {"hpc:monitoring": {"enabled": False}}).resources}
    assert not any(n.endswith(("-exporters", "-prometheus", "-alertmanager")) for n in names)


def test_model_servers_are_scraped_through_traefik_with_the_monitoring_login():
    """No model server publishes a port on its host (nothing bypasses Traefik): Prometheus scrapes
    each model's /metrics/<model> route on k3s's Traefik, over HTTPS with the site's certificate
    in prod, with the monitoring login, and the plan has exactly that route for every model."""
    result = plan.run("prod")
    text = plan.plain(result.by_name("head01-prometheus").inputs["create"])
    deployments = [r for r in result.of_type("kubernetes:apps/v1:Deployment") if "-inference-" in r.name]
    assert deployments
    for r in deployments:
        [port] = plan.plain(r.inputs["spec"])["template"]["spec"]["containers"][0]["ports"]
        assert "hostPort" not in port, r.name
    models = [m["name"] for m in yaml.safe_load((plan.ROOT / "Pulumi.prod.yaml").read_text())["config"]
              ["hpc:inference"]["models"]]  # fmt: skip
    for model in models:
        assert f"__metrics_path__: /metrics/{model}" in text, model
        route = plan.plain(result.by_name(f"public-metrics-{model}").inputs)
        [path] = route["spec"]["rules"][0]["http"]["paths"]
        assert path["path"] == f"/metrics/{model}" and path["pathType"] == "Exact"
        assert route["metadata"]["annotations"]["traefik.ingress.kubernetes.io/router.middlewares"] == (
            f"inference-metrics-login@kubernetescrd,inference-metrics-{model}@kubernetescrd"
        )
    assert "- llm.hpc.internal:443" in text and "scheme: https" in text
    login = result.by_name("public-metrics-login")
    assert plan.plain(login.inputs)["type"] == "kubernetes.io/basic-auth" and "stringData" in login.secret_inputs()


def test_the_readme_tables_are_the_rules():
    readme = (plan.ROOT / "README.md").read_text()
    assert alert_table.alerts_table() in readme, "README alert table: python -m components.monitoring.alert_table"
    assert alert_table.thresholds_table() in readme
    assert alert_table.alerts_table().count("\n| `") == len(rules.alerts())
