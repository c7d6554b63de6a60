"""Monitoring on real daemons: the plan's own steps install node exporter on three storage hosts
and Prometheus + Alertmanager on the head (Debian's packages); Prometheus scrapes the targets the
plan rendered; the Gluster collector and the NFS probe run against the real volume and export and
report a stopped brick and a broken export, which Prometheus sees and alerts on.

Runs on the storage lab (tests/integration/storage_stack.py) with a 2 s scrape interval."""

from __future__ import annotations

import json
import shlex
import urllib.parse

import pytest

from components.monitoring import rules
from offline import plan
from tests.integration import lab as labmod
from tests.integration.steps import Step, run_step, steps
from tests.integration.storage_stack import NET, STORAGE_COMPONENTS, stack, storage_lab

pytestmark = pytest.mark.integration

TEXTFILES = "/var/lib/prometheus/node-exporter"
LIBEXEC = "/usr/local/libexec/hpc-cluster"
HOSTS = ("gl1", "gl2", "gl3")


@pytest.fixture(scope="module")
def lab():
    if labmod.missing_tools("prometheus", "prometheus-node-exporter", "prometheus-alertmanager", "promtool", "amtool"):
        pytest.skip("the Debian monitoring packages are missing (.ci/run installs them)")
    yield from storage_lab({})


@pytest.fixture(scope="module")
def planned() -> dict[str, Step]:
    result = plan.run("dev", {**stack(), "hpc:monitoring": {"scrapeInterval": "2s"}})
    return {s.name: s for s in steps(result, (*STORAGE_COMPONENTS, "hpc:monitoring:Monitoring"))}


def prom(lab, path: str) -> dict:
    out = lab.ssh("gl1", f"curl -fsS {shlex.quote('http://127.0.0.1:9090' + path)}").stdout
    return json.loads(out)


def query(lab, expr: str) -> dict[str, float]:
    """Instant query: {brick or host label: value}."""
    data = prom(lab, "/api/v1/query?query=" + urllib.parse.quote(expr))["data"]["result"]
    return {r["metric"].get("brick") or r["metric"].get("host", ""): float(r["value"][1]) for r in data}


def alert_states(lab, name: str) -> list[str]:
    return [a["state"] for a in prom(lab, "/api/v1/alerts")["data"]["alerts"] if a["labels"]["alertname"] == name]


def test_the_plan_installs_exporters_prometheus_and_alertmanager(lab, planned):
    outs = {name: run_step(lab, s).stdout for name, s in planned.items()}
    for h in HOSTS:
        assert "hpc: changed: started prometheus-node-exporter" in outs[f"{h}-exporters"], outs[f"{h}-exporters"]
    assert "hpc: changed: started prometheus" in outs["gl1-prometheus"]
    assert "hpc: changed: started prometheus-alertmanager" in outs["gl1-alertmanager"]
    assert "hpc: changed: started hpc-alert-drain" in outs["gl1-alert-drain"], outs["gl1-alert-drain"]
    assert lab.ssh("gl1", "stat -c '%a %U %G' /etc/prometheus/hpc-alert-drain.token").stdout.split() == [
        "640", "root", "prometheus"]  # fmt: skip
    assert lab.ssh("gl1", f"test -x {LIBEXEC}/gluster_metrics.py && test -x {LIBEXEC}/slurm_metrics.sh").returncode == 0
    assert lab.ssh("gl2", f"test ! -e {LIBEXEC}/gluster_metrics.py && test -x {LIBEXEC}/nfs_probe.sh").returncode == 0


def test_a_second_run_changes_nothing(lab, planned):
    kinds = ("-exporters", "-prometheus", "-alertmanager", "-alert-drain", "-dashboards")
    monitoring = [n for n in planned if n.endswith(kinds)]
    for name in monitoring:
        out = run_step(lab, planned[name]).stdout
        assert out.rstrip().endswith("hpc: result=unchanged"), f"{name}:\n{out}"


def test_prometheus_scrapes_every_planned_target_and_loads_every_alert(lab):
    def node_targets_up() -> bool:
        targets = prom(lab, "/api/v1/targets")["data"]["activeTargets"]
        nodes = {t["labels"]["host"]: t["health"] for t in targets if t["labels"]["job"] == "node"}
        return nodes == {h: "up" for h in HOSTS}

    labmod.wait_until(node_targets_up, "three node exporters up", 60)
    targets = prom(lab, "/api/v1/targets")["data"]["activeTargets"]
    assert {t["scrapeUrl"] for t in targets if t["labels"]["job"] == "node"} == {
        f"http://{NET}.{11 + i}:9100/metrics" for i in range(3)
    }
    groups = prom(lab, "/api/v1/rules")["data"]["groups"]
    alerting = [r["name"] for g in groups for r in g["rules"] if r["type"] == "alerting"]
    assert sorted(alerting) == sorted(a.name for a in rules.alerts()) and "GlusterBrickOffline" in alerting
    status = lab.ssh("gl1", "curl -fsS http://127.0.0.1:9093/api/v2/status").stdout
    assert json.loads(status)["cluster"]["status"] in ("ready", "disabled")


def alertmanager_alerts(lab, name: str) -> list[dict]:
    url = "http://127.0.0.1:9093/api/v2/alerts?filter=" + urllib.parse.quote(f'alertname="{name}"')
    return json.loads(lab.ssh("gl1", f"curl -fsS {shlex.quote(url)}").stdout)


def test_the_watchdog_fires_and_reaches_its_own_receiver_in_alertmanager(lab):
    """The dead-man's switch: Prometheus evaluates the always-firing rule and the real
    Alertmanager routes it to the watchdog receiver, never to the admins."""
    labmod.wait_until(lambda: alert_states(lab, "Watchdog") == ["firing"], "Watchdog firing in Prometheus", 60)
    labmod.wait_until(lambda: alertmanager_alerts(lab, "Watchdog"), "Watchdog in Alertmanager", 60)
    (alert,) = alertmanager_alerts(lab, "Watchdog")
    assert [r["name"] for r in alert["receivers"]] == ["watchdog"] and alert["status"]["state"] == "active"


def test_a_slurm_collector_that_cannot_reach_the_controller_alerts(lab):
    """The collector's failure path on the real textfile collector and rules: no controller to
    ask (here no Docker daemon at all) writes hpc_slurm_up 0 and hpc_slurmdbd_up 0, which
    SlurmControllerDown and SlurmDbdDown read (before, the node series just vanished)."""
    prom_file = f"{TEXTFILES}/slurm.prom"
    out = lab.ssh("gl1", f"DOCKER_HOST=unix:///nonexistent.sock {LIBEXEC}/slurm_metrics.sh slurm-head {prom_file}")
    assert "slurm_metrics: sinfo:" in out.stderr and "Cannot connect to the Docker daemon" in out.stderr, out.stderr
    try:
        text = lab.ssh("gl1", f"cat {prom_file}").stdout
        assert "hpc_slurm_up 0" in text and "hpc_slurmdbd_up 0" in text, text
        labmod.wait_until(lambda: query(lab, "hpc_slurm_up").get("gl1") == 0.0, "Prometheus sees it", 30)
        for name in ("SlurmControllerDown", "SlurmDbdDown"):
            labmod.wait_until(lambda n=name: alert_states(lab, n) == ["pending"], f"{name} pending", 30)
    finally:
        lab.ssh("gl1", f"rm -f {prom_file}")


def collect_gluster(lab) -> str:
    lab.ssh("gl1", f"{LIBEXEC}/gluster_metrics.py gv0 {TEXTFILES}/gluster.prom")
    return lab.ssh("gl1", f"cat {TEXTFILES}/gluster.prom").stdout


def test_the_gluster_collector_reports_a_stopped_brick_and_prometheus_alerts(lab):
    text = collect_gluster(lab)
    brick3 = f"{NET}.13:/srv/bricks/gv0/brick"
    assert text.count("hpc_gluster_brick_online{") == 3 and f'brick="{brick3}"}} 1' in text
    assert 'hpc_gluster_up{volume="gv0"} 1' in text
    assert "hpc_gluster_heal_pending_entries{" in text
    labmod.wait_until(
        lambda: query(lab, "hpc_gluster_brick_online").get(brick3) == 1.0, "brick online in Prometheus", 30
    )

    pid = lab.ssh("gl3", f"cat /run/gluster/vols/gv0/{NET}.13-srv-bricks-gv0-brick.pid").stdout.strip()
    assert pid.isdigit()
    lab.ssh("gl3", f"kill -TERM {pid}")
    try:
        labmod.wait_until(
            lambda: f'brick="{brick3}"}} 0' in collect_gluster(lab), "the collector sees the brick down", 60
        )
        labmod.wait_until(lambda: query(lab, "hpc_gluster_brick_online").get(brick3) == 0.0, "Prometheus sees it", 30)
        labmod.wait_until(lambda: alert_states(lab, "GlusterBrickOffline") == ["pending"], "the alert pending", 30)
    finally:
        lab.ssh("gl1", "gluster volume start gv0 force")
    labmod.wait_until(lambda: f'brick="{brick3}"}} 1' in collect_gluster(lab), "the brick back", 60)


def probe(lab, host: str):
    cmd = f"{LIBEXEC}/nfs_probe.sh {host} /srv/gfsv nfs://{NET}.11/gv {TEXTFILES}/nfs_probe.prom"
    return lab.ssh(host, cmd, check=False)


def test_the_nfs_probe_passes_then_reports_a_broken_export_then_recovers(lab):
    for _ in range(3):  # repeatable: each run uses new files and removes them
        ok = probe(lab, "gl2")
        assert ok.returncode == 0, ok.stderr
    assert lab.ssh("gl2", "ls -A /srv/gfsv/.hpc-probe").stdout.split() == []
    text = lab.ssh("gl2", f"cat {TEXTFILES}/nfs_probe.prom").stdout
    assert "hpc_nfs_probe_success 1" in text
    latency = float(next(line.split()[1] for line in text.splitlines() if line.startswith("hpc_nfs_probe_duration")))
    assert 0 < latency < 20
    labmod.wait_until(lambda: query(lab, "hpc_nfs_probe_success").get("gl2") == 1.0, "probe result in Prometheus", 30)

    lab.ssh("gl1", "systemctl stop nfs-ganesha")
    try:
        bad = probe(lab, "gl2")
        assert bad.returncode == 1
        assert "read through the NFS export failed" in bad.stderr, bad.stderr
        assert "hpc_nfs_probe_success 0" in lab.ssh("gl2", f"cat {TEXTFILES}/nfs_probe.prom").stdout
        labmod.wait_until(lambda: query(lab, "hpc_nfs_probe_success").get("gl2") == 0.0, "Prometheus sees it", 30)
        labmod.wait_until(lambda: alert_states(lab, "NfsProbeFailing") == ["pending"], "the alert pending", 30)
    finally:
        lab.ssh("gl1", "systemctl start nfs-ganesha")
    last: list[str] = []

    def passes() -> bool:
        p = probe(lab, "gl2")
        last[:] = [p.stderr]
        return p.returncode == 0

    try:
        labmod.wait_until(passes, "the probe passing again", 90)
    except TimeoutError:
        ganesha = lab.ssh("gl1", "systemctl is-active nfs-ganesha; tail -5 /var/log/ganesha/ganesha.log", check=False)
        raise AssertionError(f"{last}\n{ganesha.stdout}{ganesha.stderr}") from None
    print(f"\nNFS probe: {latency:.3f} s for a write+read each way")


def test_the_dashboards_are_installed_for_grafana(lab):
    listing = lab.ssh("gl1", "ls /etc/hpc-cluster/grafana/dashboards").stdout.split()
    assert listing == ["hpc-gpus.json", "hpc-inference.json", "hpc-overview.json", "hpc-slurm.json", "hpc-storage.json"]


def test_deleting_stops_the_collectors_and_keeps_the_history(lab, planned):
    for name in ("gl1-prometheus", "gl2-exporters", "gl1-alert-drain"):
        out = run_step(lab, planned[name], delete=True).stdout
        assert "hpc: result=" in out
    assert lab.ssh("gl2", f"test ! -e {LIBEXEC}/nfs_probe.sh && test ! -e {TEXTFILES}/nfs_probe.prom").returncode == 0
    assert lab.ssh("gl1", "test -d /var/lib/prometheus/metrics2/wal").returncode == 0
    assert lab.ssh("gl1", "systemctl is-active prometheus", check=False).returncode != 0
    assert lab.ssh("gl1", "test ! -e /etc/prometheus/hpc-alert-drain.token").returncode == 0
