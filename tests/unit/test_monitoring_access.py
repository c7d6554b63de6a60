"""Who can reach and silence the monitoring (issue 24, point 4), as the plan builds it: the
firewall each host gets, the login and TLS of Prometheus and Alertmanager, webhook URLs kept out
of Alertmanager, and the config's refusals. The monitoring lab runs the same steps on real
daemons and real nftables (tests/integration/test_monitoring.py)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml

from components.monitoring import firewall, render_prometheus
from components.monitoring.spec import ALERT_RELAY_PORT, HostTarget, MonitoringSpec
from offline import plan
from offline.mocks import plain
from stacks.config import ConfigError
from tests.unit.secret_inputs import only_on_stdin

WEBHOOK = "https://hooks.example.invalid/T0/secret-path-xyz"
WATCHDOG = "https://deadman.example.invalid/ping/secret-ping-abc"
HEAD = "rpi1"  # dev's Slurm head
DEV_HOSTS = yaml.safe_load((plan.ROOT / "Pulumi.dev.yaml").read_text())["config"]["hpc:hosts"]
HEAD_ADDRESS = next(h["address"] for h in DEV_HOSTS if h["name"] == HEAD)
SECRETS = {"hpc:alertWebhookUrl": WEBHOOK, "hpc:watchdogWebhookUrl": WATCHDOG}


def run(overrides: dict | None = None, secrets: dict[str, str] | None = None) -> plan.PlanRun:
    """The dev plan with ``secrets`` as the values the operator set (the plan's stand-ins
    otherwise: a committed stack file holds only ciphertext)."""
    from offline import mocks, record

    given = secrets or {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(record, "stand_in_secret", lambda key: given.get(key) or mocks.stand_in_secret(key))
        over = {k: {"secure": "ciphertext"} for k in given}
        return plan.run("dev", {**over, **(overrides or {})})


def create(result: plan.PlanRun, name: str) -> str:
    return plain(result.by_name(name).inputs["create"])


@pytest.fixture(scope="module")
def dev() -> plan.PlanRun:
    return run(secrets=SECRETS)


def problems(overrides: dict, secrets: dict[str, str] | None = None) -> dict[str, str]:
    with pytest.raises(ConfigError) as err:
        run(overrides, secrets)
    assert err.value.registered == []
    assert all("\n" not in m for _, m in err.value.problems)
    return dict(err.value.problems)


# ---- the firewall -----------------------------------------------------------------------------
def test_exporters_answer_only_the_head_and_the_uis_only_the_admins():
    text = firewall.rules(exporter_ports=(9400, 9100, 9290), prometheus_address="10.0.0.5", ui_ports=(9090, 9093),
                          admin_networks=("10.9.0.0/24",))  # fmt: skip
    lines = [line.strip() for line in text.splitlines()]
    assert lines.index('iif "lo" accept') < lines.index(
        "tcp dport { 9100, 9290, 9400 } ip saddr != 10.0.0.5 reject with tcp reset"
    )
    assert "tcp dport { 9090, 9093 } ip saddr != { 10.9.0.0/24 } reject with tcp reset" in lines
    assert "meta nfproto ipv6 tcp dport { 9090, 9093 } reject with tcp reset" in lines
    assert "policy accept;" in text  # the table blocks only its own ports, never the site's traffic
    closed = firewall.rules(exporter_ports=(9100,), prometheus_address="10.0.0.5", ui_ports=(9090, 9093))
    assert "tcp dport { 9090, 9093 } reject with tcp reset" in closed  # no adminNetworks: loopback only
    worker = firewall.rules(exporter_ports=(9100,), prometheus_address="10.0.0.5")
    assert "9090" not in worker


@pytest.mark.skipif(shutil.which("nft") is None or shutil.which("unshare") is None,
                    reason="nft (Debian: nftables) and unshare are required")  # fmt: skip
def test_nft_accepts_every_host_s_table_twice(dev, tmp_path):
    """Each host's table as the plan writes it, loaded twice by the real nft in a network
    namespace of its own (the second load replaces the first, so a re-run is clean)."""
    for host in ("rpi1", "rpi2"):
        script = create(dev, f"{host}-exporters")
        start = script.index("# Managed by hpc-cluster (Pulumi): components/monitoring/firewall.py")
        text = script[start : script.index("HPC_FILE_END", start)]
        (tmp_path / f"{host}.nft").write_text(text)
        twice = f'nft -f "$1"; nft -f "$1"; nft list table inet {firewall.TABLE}'
        argv = ["unshare", "--net", "sh", "-ec", twice, "sh", str(tmp_path / f"{host}.nft")]
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0 and "Operation not permitted" in proc.stderr:
            pytest.skip("network namespaces need root")
        assert proc.returncode == 0, proc.stderr
        assert f"ip saddr != {HEAD_ADDRESS}" in proc.stdout
        assert ("9090" in proc.stdout) is (host == HEAD)


def test_every_host_gets_the_firewall_and_its_delete_removes_it(dev):
    for host in ("rpi1", "rpi2", "rpi3"):
        assert f"ip saddr != {HEAD_ADDRESS} reject" in create(dev, f"{host}-exporters")
        delete = plain(dev.by_name(f"{host}-exporters").inputs["delete"])
        assert f"nft delete table inet {firewall.TABLE}" in delete


# ---- the login and TLS -----------------------------------------------------------------------
def test_prometheus_and_alertmanager_ask_for_tls_and_the_login(dev):
    for step in (f"{HEAD}-prometheus", f"{HEAD}-alertmanager"):
        script = create(dev, step)
        assert "--web.config.file=/etc/prometheus/hpc-web/web.yml" in script
        assert "--web.listen-address=127.0.0.1:" in script  # dev sets no adminNetworks
    opened = run({"hpc:monitoring": {"adminNetworks": ["192.168.0.64/28"]}})
    assert "--web.listen-address=0.0.0.0:9090" in create(opened, f"{HEAD}-prometheus")
    assert "ip saddr != { 192.168.0.64/28 } reject" in create(opened, f"{HEAD}-exporters")


def test_the_password_reaches_the_head_only_as_a_secret(dev):
    only_on_stdin(dev, f"{HEAD}-monitoring-web")


def test_prometheus_scrapes_itself_and_alertmanager_over_tls_with_the_login():
    spec = MonitoringSpec(cluster="c", head="h1", hosts=(HostTarget("h1", "10.0.0.1"),))
    doc = yaml.safe_load(render_prometheus.prometheus_config(spec))
    own = next(j for j in doc["scrape_configs"] if j["job_name"] == "prometheus")
    assert own["scheme"] == "https" and own["basic_auth"]["password_file"]
    am = doc["alerting"]["alertmanagers"][0]
    assert am["scheme"] == "https" and am["tls_config"]["ca_file"]


# ---- webhook URLs stay out of Alertmanager ------------------------------------------------------
def test_no_webhook_url_is_in_alertmanager_s_config(dev):
    am = plain(dev.by_name(f"{HEAD}-alertmanager").inputs["stdin"])
    assert "example.invalid" not in am
    urls = {c["url"] for r in yaml.safe_load(am)["receivers"] for c in r.get("webhook_configs", [])}
    assert f"http://127.0.0.1:{ALERT_RELAY_PORT}/cluster-admins" in urls
    assert f"http://127.0.0.1:{ALERT_RELAY_PORT}/watchdog" in urls
    assert all(u.startswith("http://127.0.0.1:") for u in urls)
    relay = dev.by_name(f"{HEAD}-alert-relay")
    assert json.loads(plain(relay.inputs["stdin"])) == {"cluster-admins": WEBHOOK, "watchdog": WATCHDOG}
    assert relay.inputs["stdin"] != plain(relay.inputs["stdin"])
    for r in dev.resources:
        assert "secret-path-xyz" not in str(plain(r.inputs.get("create", ""))), r.name


@pytest.mark.skipif(not shutil.which("amtool"), reason="amtool (Debian: prometheus-alertmanager) is required")
def test_the_relayed_config_passes_amtool(dev, tmp_path):
    (tmp_path / "am.yml").write_text(plain(dev.by_name(f"{HEAD}-alertmanager").inputs["stdin"]))
    proc = subprocess.run(["amtool", "check-config", str(tmp_path / "am.yml")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---- the config's refusals -----------------------------------------------------------------------
def test_admin_networks_that_hold_jobs_or_pods_are_refused():
    found = problems({"hpc:monitoring": {"adminNetworks": ["192.168.0.192/26"]}})  # holds containerRange
    assert "monitoring login" in found["hpc:monitoring.adminNetworks[0]"]
    found = problems({"hpc:monitoring": {"adminNetworks": ["10.0.0.0/8"]}})  # holds k3s's 10.42.0.0/16
    assert "k3s's pod network" in found["hpc:monitoring.adminNetworks[0]"]
    found = problems({"hpc:monitoring": {"adminNetworks": ["192.168.0.300/24"]}})
    assert "hpc:monitoring.adminNetworks[0]" in found


def test_a_missing_monitoring_password_is_refused_unless_monitoring_is_off():
    assert "required secret is missing" in problems({"hpc:monitoringPassword": None})["hpc:monitoringPassword"]
    run({"hpc:monitoring": {"enabled": False}, "hpc:monitoringPassword": None})


@pytest.mark.parametrize(("value", "fragment"), [("short-pw-9", "at least 16"),
                                                 ("a-long-enough-pass\tword", "one line"),
                                                 ("changeme", "placeholder")])  # fmt: skip
def test_a_weak_monitoring_password_is_refused_and_never_shown(value, fragment):
    found = problems({}, {"hpc:monitoringPassword": value})
    assert fragment in found["hpc:monitoringPassword"], found
    assert value not in " ".join(found.values())
