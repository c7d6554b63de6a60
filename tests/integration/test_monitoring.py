"""Monitoring on real daemons: the plan's own steps install node exporter on three storage hosts
and Prometheus + Alertmanager on the head (Debian's packages); Prometheus scrapes the targets the
plan rendered; the Gluster collector and the NFS probe run against the real volume and export and
report a stopped brick and a broken export, which Prometheus sees and alerts on. Who can reach
them (issue 24, point 4): Prometheus and Alertmanager answer only over TLS with the login, each
host's nftables table lets only the head read its exporters (a "job" namespace with an address
in the stack's container range is refused), and the Watchdog reaches a dead-man's switch through
the head's relay while Alertmanager's own API shows no URL.

Runs on the storage lab (tests/integration/storage_stack.py) with a 2 s scrape interval."""

from __future__ import annotations

import json
import shlex
import urllib.parse

import pytest

from components.monitoring import firewall, rules
from components.monitoring.spec import WEB_CERT
from offline import plan
from tests.integration import lab as labmod
from tests.integration.steps import Step, run_step, steps
from tests.integration.storage_stack import NET, STORAGE_COMPONENTS, stack, storage_lab

pytestmark = pytest.mark.integration

TEXTFILES = "/var/lib/prometheus/node-exporter"
LIBEXEC = "/usr/local/libexec/hpc-cluster"
HOSTS = ("gl1", "gl2", "gl3")
JOB = f"{NET}.245"  # a Slurm job's container address: inside the stack's containerRange
DEADMAN = "http://127.0.0.1:9199/ping/deadman-secret-token"  # hpc:watchdogWebhookUrl: a listener on gl1
LISTENER = r"""
import http.server, os, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        n = len(os.listdir(sys.argv[1]))
        open(os.path.join(sys.argv[1], f"{n}.json"), "wb").write(body)
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
http.server.HTTPServer(("127.0.0.1", 9199), H).serve_forever()
"""


@pytest.fixture(scope="module")
def lab(planned):
    if labmod.missing_tools("prometheus", "prometheus-node-exporter", "prometheus-alertmanager", "promtool", "amtool"):
        pytest.skip("the Debian monitoring packages are missing (.ci/run installs them)")
    if labmod.missing_tools("nft"):
        pytest.skip("nft (Debian: nftables) is missing (.ci/run installs it)")
    for up in storage_lab({"cl": f"{NET}.2", "job": JOB}):
        up.login = login_line(planned)  # type: ignore[attr-defined]
        yield up


@pytest.fixture(scope="module")
def planned() -> dict[str, Step]:
    from offline import mocks, record

    with pytest.MonkeyPatch.context() as mp:  # the operator's secret, as `pulumi config set --secret` holds it
        mp.setattr(
            record, "stand_in_secret", lambda k: DEADMAN if k == "hpc:watchdogWebhookUrl" else mocks.stand_in_secret(k)
        )
        over = {"hpc:monitoring": {"scrapeInterval": "2s"}, "hpc:watchdogWebhookUrl": {"secure": "ciphertext"}}
        result = plan.run("dev", {**stack(), **over})
    return {s.name: s for s in steps(result, (*STORAGE_COMPONENTS, "hpc:monitoring:Monitoring"))}


def login_line(planned: dict[str, Step]) -> str:
    """curl's config line with the admin login (the planned password), fed on stdin."""
    password = planned["gl1-monitoring-web"].stdin
    assert password and '"' not in password and "\\" not in password
    return f'user = "admin:{password}"\n'


def curl(lab, url: str, check: bool = True):
    return lab.ssh("gl1", f"curl -fsS --cacert {WEB_CERT} -K - {shlex.quote(url)}", stdin=lab.login, check=check)


def prom(lab, path: str) -> dict:
    return json.loads(curl(lab, "https://127.0.0.1:9090" + path).stdout)


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
    kinds = (
        "-exporters",
        "-prometheus",
        "-alertmanager",
        "-alert-drain",
        "-dashboards",
        "-monitoring-web",
        "-alert-relay",
    )
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
    status = curl(lab, "https://127.0.0.1:9093/api/v2/status").stdout
    assert json.loads(status)["cluster"]["status"] in ("ready", "disabled")


def alertmanager_alerts(lab, name: str) -> list[dict]:
    url = "https://127.0.0.1:9093/api/v2/alerts?filter=" + urllib.parse.quote(f'alertname="{name}"')
    return json.loads(curl(lab, url).stdout)


def test_prometheus_and_alertmanager_answer_only_over_tls_with_the_login(lab):
    for port in (9090, 9093):
        base = f"https://127.0.0.1:{port}/api/v" + ("1/status/buildinfo" if port == 9090 else "2/status")
        anonymous = lab.ssh("gl1", f"curl -sS -o /dev/null -w '%{{http_code}}' --cacert {WEB_CERT} {base}", check=False)
        assert anonymous.stdout == "401", anonymous.stdout + anonymous.stderr
        wrong = lab.ssh("gl1", f"curl -sS -o /dev/null -w '%{{http_code}}' --cacert {WEB_CERT} -K - {base}",
                        stdin='user = "admin:not-the-password-at-all"\n', check=False)  # fmt: skip
        assert wrong.stdout == "401"
        plain = lab.ssh("gl1", f"curl -fsS http://127.0.0.1:{port}/-/ready", check=False)
        assert plain.returncode != 0  # no plain HTTP
        assert curl(lab, base).returncode == 0
        # listening on the head's loopback only (no adminNetworks): nobody on the network gets a login page
        for client in ("cl", "job"):
            probe = lab.in_client(client, ["curl", "-skS", "-m", "5", f"https://{NET}.11:{port}/"])
            assert probe.returncode == 7, f"{client}: {probe.returncode} {probe.stderr}"  # 7: could not connect
    cert = lab.ssh("gl1", f"openssl x509 -in {WEB_CERT} -noout -ext subjectAltName").stdout
    assert "IP Address:127.0.0.1" in cert and f"IP Address:{NET}.11" in cert and "DNS:gl1" in cert


def test_only_the_head_reads_the_exporters(lab):
    """The real nftables table on each host: Prometheus's address gets the metrics, a job's
    address and the admins' SSH client get a TCP reset (curl 7), loopback still works."""
    for host, addr in (("gl2", f"{NET}.12"), ("gl3", f"{NET}.13")):
        assert "node_exporter_build_info" in lab.ssh("gl1", f"curl -fsS -m 5 http://{addr}:9100/metrics").stdout
        for client in ("job", "cl"):
            probe = lab.in_client(client, ["curl", "-sS", "-m", "5", "-o", "/dev/null", f"http://{addr}:9100/metrics"])
            assert probe.returncode == 7, f"{client} -> {host}: {probe.returncode} {probe.stderr}"
        other = "gl3" if host == "gl2" else "gl2"  # a host that is not the head
        probe = lab.ssh(other, f"curl -sS -m 5 -o /dev/null http://{addr}:9100/metrics", check=False)
        assert probe.returncode == 7, probe.stderr
        assert lab.ssh(host, "curl -fsS -m 5 -o /dev/null http://127.0.0.1:9100/metrics").returncode == 0
    table = lab.on("gl2", ["nft", "list", "table", "inet", firewall.TABLE]).stdout
    assert f"ip saddr != {NET}.11" in table


def test_the_watchdog_fires_and_reaches_its_own_receiver_in_alertmanager(lab):
    """The dead-man's switch: Prometheus evaluates the always-firing rule and the real
    Alertmanager routes it to the watchdog receiver, never to the admins."""
    labmod.wait_until(lambda: alert_states(lab, "Watchdog") == ["firing"], "Watchdog firing in Prometheus", 60)
    labmod.wait_until(lambda: alertmanager_alerts(lab, "Watchdog"), "Watchdog in Alertmanager", 60)
    (alert,) = alertmanager_alerts(lab, "Watchdog")
    assert [r["name"] for r in alert["receivers"]] == ["watchdog"] and alert["status"]["state"] == "active"


def test_the_watchdog_reaches_the_dead_man_s_switch_through_the_relay_and_no_url_shows(lab):
    """The real Alertmanager posts to the head's relay, which forwards to the switch's URL (a
    listener on gl1 here). Started after the alert fired: the relay answered 502 meanwhile and
    Alertmanager retried. Alertmanager's config API, its logs' view of the world, has no URL."""
    inbox = "/tmp/hpc-deadman"
    lab.ssh("gl1", f"mkdir -p {inbox} && cat > /tmp/hpc-deadman.py", stdin=LISTENER)
    lab.ssh("gl1", f"nohup python3 /tmp/hpc-deadman.py {inbox} >/dev/null 2>&1 </dev/null &")

    def received() -> list[dict]:
        names = lab.ssh("gl1", f"ls {inbox}").stdout.split()
        return [json.loads(lab.ssh("gl1", f"cat {inbox}/{n}").stdout) for n in names]

    labmod.wait_until(received, "a Watchdog notification at the dead-man's switch", 120)
    (first, *_) = received()
    assert first["receiver"] == "watchdog" and first["alerts"][0]["labels"]["alertname"] == "Watchdog"
    status = curl(lab, "https://127.0.0.1:9093/api/v2/status").stdout
    assert "deadman-secret-token" not in status and "9199" not in status
    assert "127.0.0.1:9096/watchdog" in status
    assert lab.ssh("gl1", "stat -c '%a %U' /etc/prometheus/hpc-webhooks/watchdog.url").stdout.split() == ["600", "root"]


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
    for name in ("gl1-prometheus", "gl2-exporters", "gl1-alert-drain", "gl1-alert-relay", "gl1-monitoring-web"):
        out = run_step(lab, planned[name], delete=True).stdout
        assert "hpc: result=" in out
    assert lab.ssh("gl2", f"test ! -e {LIBEXEC}/nfs_probe.sh && test ! -e {TEXTFILES}/nfs_probe.prom").returncode == 0
    assert lab.ssh("gl1", "test -d /var/lib/prometheus/metrics2/wal").returncode == 0
    assert lab.ssh("gl1", "systemctl is-active prometheus", check=False).returncode != 0
    assert lab.ssh("gl1", "test ! -e /etc/prometheus/hpc-alert-drain.token").returncode == 0
    assert lab.on("gl2", ["nft", "list", "table", "inet", firewall.TABLE], check=False).returncode != 0
    assert lab.ssh("gl2", f"test ! -e {firewall.RULES_FILE}").returncode == 0
    assert lab.ssh("gl1", "test ! -e /etc/prometheus/hpc-webhooks/watchdog.url").returncode == 0
