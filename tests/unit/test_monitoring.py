"""The monitoring tier's configs, checked by the tools that read them: promtool (config, rules,
and a unit test per alert with synthetic series: it fires when it should and stays quiet when
it should not), amtool, and the dashboards against their schema with every query parsed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from components.monitoring import dashboards, render_prometheus, rules
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

# alert -> (firing series, quiet series, eval time, the alert's labels when it fires)
CASES: dict[str, tuple[dict[str, str], dict[str, str], str, dict[str, str]]] = {
    "HostDown": ({'up{job="node",host="g1"}': "0x10"}, {'up{job="node",host="g1"}': "1x10"}, "5m",
                 {"job": "node", "host": "g1"}),
    "GpuTemperatureHigh": ({'DCGM_FI_DEV_GPU_TEMP{host="g1",gpu="0"}': "90x10"},
                           {'DCGM_FI_DEV_GPU_TEMP{host="g1",gpu="0"}': "80x10"}, "8m", {"host": "g1", "gpu": "0"}),
    "GpuThermalThrottling": ({'DCGM_FI_DEV_THERMAL_VIOLATION{host="g1",gpu="1"}': "0+1000x30"},
                             {'DCGM_FI_DEV_THERMAL_VIOLATION{host="g1",gpu="1"}': "5x30"}, "20m",
                             {"host": "g1", "gpu": "1"}),
    "GpuXidError": ({'DCGM_FI_DEV_XID_ERRORS{host="g1",gpu="2"}': "0 0 79 79 79"},
                    {'DCGM_FI_DEV_XID_ERRORS{host="g1",gpu="2"}': "0x5"}, "4m", {"host": "g1", "gpu": "2"}),
    "GpuEccUncorrectable": ({'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{host="g1",gpu="3"}': "0 0 1 1 1"},
                            {'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{host="g1",gpu="3"}': "4x5"}, "4m",
                            {"host": "g1", "gpu": "3"}),
    "BmcInletTemperatureHigh": ({'ipmi_temperature_celsius{host="h1",name="Inlet Temp"}': "25x30"},
                                {'ipmi_temperature_celsius{host="h1",name="Inlet Temp"}': "21x30"}, "20m",
                                {"host": "h1", "name": "Inlet Temp"}),
    "BmcInternalAmbientHigh": ({'ipmi_temperature_celsius{host="h1",name="Exhaust Temp"}': "40x20"},
                               {'ipmi_temperature_celsius{host="h1",name="Exhaust Temp"}': "30x20"}, "15m",
                               {"host": "h1", "name": "Exhaust Temp"}),
    "RackPowerOverBudget": ({'ipmi_dcmi_power_consumption_watts{host="h1",rack="r1"}': "10000x10",
                             'ipmi_dcmi_power_consumption_watts{host="g1",rack="r1"}': "9000x10"},
                            {'ipmi_dcmi_power_consumption_watts{host="h1",rack="r1"}': "5000x10",
                             'ipmi_dcmi_power_consumption_watts{host="g1",rack="r1"}': "9000x10"}, "8m",
                            {"rack": "r1"}),
    "NvmeWearHigh": ({'nvme_percentage_used_ratio{host="h1",device="nvme0"}': "0.85x90"},
                     {'nvme_percentage_used_ratio{host="h1",device="nvme0"}': "0.5x90"}, "70m",
                     {"host": "h1", "device": "nvme0"}),
    "GlusterBrickOffline": ({'hpc_gluster_brick_online{volume="gv0",brick="s3:/b"}': "0x5"},
                            {'hpc_gluster_brick_online{volume="gv0",brick="s3:/b"}': "1x5"}, "3m",
                            {"volume": "gv0", "brick": "s3:/b"}),
    "GlusterHealBacklogGrowing": ({'hpc_gluster_heal_pending_entries{volume="gv0",brick="s1:/b"}': "0+10x70"},
                                  {'hpc_gluster_heal_pending_entries{volume="gv0",brick="s1:/b"}': "100x70"}, "65m",
                                  {"volume": "gv0", "brick": "s1:/b"}),
    "NfsProbeFailing": ({'hpc_nfs_probe_success{host="g1"}': "0x10"}, {'hpc_nfs_probe_success{host="g1"}': "1x10"},
                        "6m", {"host": "g1"}),
    "NfsProbeStale": ({'hpc_nfs_probe_timestamp_seconds{host="g1"}': "0x30"},
                      {'hpc_nfs_probe_timestamp_seconds{host="g1"}': "0+60x30"}, "20m", {"host": "g1"}),
    "SlurmNodeDown": ({'hpc_slurm_node_down{node="g1",state="down"}': "1x10"},
                      {'hpc_slurm_node_down{node="g1",state="idle"}': "0x10"}, "6m", {"node": "g1", "state": "down"}),
    "SlurmNodeDrainedLong": ({'hpc_slurm_node_drained{node="g1"}': "1x400"},
                             {'hpc_slurm_node_drained{node="g1"}': "1x400"}, "370m", {"node": "g1"}),
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
# Where the quiet case is the same series at an earlier time (the alert's `for` not yet reached).
QUIET_AT = {"SlurmNodeDrainedLong": "300m"}


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_every_alert_has_a_case_a_runbook_and_a_severity():
    names = [a.name for a in rules.alerts()]
    assert sorted(names) == sorted(CASES)
    for a in rules.alerts():
        assert a.severity in ("warning", "critical") and len(a.runbook) > 30, a.name


def test_the_rules_and_the_config_pass_promtool(tmp_path):
    (tmp_path / "hpc-rules.yml").write_text(rules.rule_file(SPEC))
    conf = render_prometheus.prometheus_config(SPEC).replace(render_prometheus.RULE_FILE, "hpc-rules.yml")
    (tmp_path / "prometheus.yml").write_text(conf)
    proc = promtool("check", "config", "prometheus.yml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(CASES) + 1} rules found" in proc.stdout + proc.stderr


def test_each_alert_fires_when_it_should_and_stays_quiet_when_it_should_not(tmp_path):
    doc = yaml.safe_load(rules.rule_file(SPEC))
    for group in doc["groups"]:  # templates are checked by promtool check; here: expr, for, labels
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(doc))
    tests = []
    for name, (firing, quiet, at, labels) in CASES.items():
        expected = {**labels, "severity": next(a.severity for a in rules.alerts() if a.name == name), "cluster": "test"}
        for series, alerts, when in ((firing, [{"exp_labels": expected}], at), (quiet, [], QUIET_AT.get(name, at))):
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
    assert len(tests) == 2 * len(CASES)


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
    r"^(up|ALERTS|node_[A-Za-z_]+|DCGM_FI_[A-Z_]+|ipmi_[a-z_]+|nvme_[a-z_]+|hpc_(gluster|nfs_probe|slurm)_[a-z_]+"
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
    spec = monitoring.spec_of(cfg)
    prom = plan.plain(result.by_name(f"{head}-prometheus").inputs["create"])
    assert render_prometheus.prometheus_config(spec).strip() in prom
    assert all(f"{h.address}:9100" in prom for h in spec.hosts)


def test_monitoring_can_be_turned_off():
    names = {r.name for r in plan.run("dev", {"hpc:monitoring": {"enabled": False}}).resources}
    assert not any(n.endswith(("-exporters", "-prometheus", "-alertmanager")) for n in names)


def test_model_servers_are_scrapable_where_prometheus_looks():
    """Prometheus scrapes <host address>:<port>/metrics: each model server publishes its port on its
    host (hostPort), and the plan's vllm job names exactly those."""
    result = plan.run("prod")
    spec_text = plan.plain(result.by_name("head01-prometheus").inputs["create"])
    deployments = [r for r in result.of_type("kubernetes:apps/v1:Deployment") if "-inference-" in r.name]
    assert deployments
    for r in deployments:
        port = plan.plain(r.inputs["spec"])["template"]["spec"]["containers"][0]["ports"][0]
        assert port["hostPort"] == port["containerPort"], r.name
        assert f":{int(port['containerPort'])}" in spec_text
