"""Remote steps of the monitoring tier (pure): exporters and collectors on every host,
Prometheus, Alertmanager and the dashboards on the Slurm head.

Packages come from Debian (pinned by the release series like the rest of the hosts' packages):
``prometheus-node-exporter`` with Debian's textfile collectors (``nvme_metrics.sh`` on a timer:
NVMe wear and data units written), ``prometheus-ipmi-exporter`` on hosts with a BMC,
``prometheus`` and ``prometheus-alertmanager`` on the head. Prometheus runs on the head, not in
k3s: it must keep watching when k3s or the inference tier is what broke, and the head is the one
host every tier already depends on. The collectors (``collectors/``) run from systemd timers
and write into node exporter's textfile directory. Every config is checked by the tool that
reads it (``promtool``, ``amtool``) before it replaces the running one; a refusal quotes the tool.
Deleting a step stops what it started and removes its files; the metrics history
(/var/lib/prometheus) is kept.
"""

from __future__ import annotations

from pathlib import Path

from components.monitoring import dashboards, exporter_config, firewall
from components.monitoring.spec import (
    ALERT_DRAIN_PORT,
    ALERT_DRAIN_TOKEN,
    ALERT_RELAY_DIR,
    ALERT_RELAY_PORT,
    ALERTMANAGER_PORT,
    DCGM_PORT,
    IPMI_PORT,
    NODE_PORT,
    PROMETHEUS_PORT,
    TEXTFILE_DIR,
    WEB_CERT,
    WEB_CONFIG,
    WEB_DIR,
    WEB_KEY,
    WEB_PASSWORD,
    WEB_USER,
)
from components.scripts import Raw, RemoteScript, fill, put_file, script

COLLECTORS = Path(__file__).with_name("collectors")
PROGRAMS = Path(__file__).with_name("programs")
SCRIPTS = Path(__file__).with_name("scripts")
EXPORTER_READY_TIMEOUT_S = 30  # an exporter answers within seconds of its start
LIBEXEC = "/usr/local/libexec/hpc-cluster"
UNIT_DIR = "/etc/systemd/system"
DASHBOARD_DIR = "/etc/hpc-cluster/grafana/dashboards"
CERT_DAYS = 825  # the longest lifetime clients accept for a server certificate
CERT_RENEW_DAYS = 30  # a run within this many days of expiry makes a new one
RELAYED_RECEIVERS = ("cluster-admins", "watchdog")
COLLECTOR_FILES = ("gluster_metrics.py", "nfs_probe.sh", "slurm_metrics.sh", "gpu_metrics.sh")


def _step(host: str, name: str, body: str, undo: str) -> RemoteScript:
    """``<host>-<name>``: its create script and its delete script."""
    step = f"{host}-{name}"
    return RemoteScript(step, host, script(host, step, body), script(host, f"{step}-delete", undo))


def collector_text(name: str) -> str:
    return (COLLECTORS / name).read_text()


def _timer(name: str, description: str, command: str, every: str) -> str:
    service = f"[Unit]\nDescription={description} (hpc-cluster)\n\n[Service]\nType=oneshot\nExecStart={command}\n"
    timer = (
        f"[Unit]\nDescription={description} every {every} (hpc-cluster)\n\n"
        f"[Timer]\nOnBootSec=1min\nOnUnitActiveSec={every}\n\n[Install]\nWantedBy=timers.target\n"
    )
    unit = f"{UNIT_DIR}/hpc-{name}"
    return put_file(f"{unit}.service", "0644", service) + put_file(f"{unit}.timer", "0644", timer)


def exporters(
    host: str,
    *,
    bmc: bool,
    storage_volume: str | None,
    probe: tuple[str, str] | None,
    slurm_container: str | None,
    prometheus_address: str,
    gpus: int = 0,
    gpu_metrics: str = "nvidia-smi",
    admin_networks: tuple[str, ...] | None = None,
) -> RemoteScript:
    """node exporter (+ NVMe collector) everywhere, IPMI exporter with a BMC, and the host's
    collectors: Gluster health (``storage_volume``), the NFS probe (``probe``: mount point and
    the export's nfs:// URL), Slurm states (``slurm_container``) and, on a host with ``gpus``,
    GPU health from nvidia-smi and the kernel log (plus the DCGM counters file the site's DCGM
    exporter reads when ``gpu_metrics`` is ``dcgm``). The host firewall lets only
    ``prometheus_address`` reach the exporters; on the head (``admin_networks`` given, maybe
    empty) Prometheus and Alertmanager answer loopback and those networks only."""
    packages = [
        "prometheus-node-exporter",
        "prometheus-node-exporter-collectors",
        "nvme-cli",
        "jq",
        "moreutils",
        "curl",
        "nftables",
    ]
    if bmc:
        packages.append("prometheus-ipmi-exporter")
    if probe:
        packages.append("libnfs-utils")
    units = ["prometheus-node-exporter", "prometheus-node-exporter-nvme.timer"]
    collectors = []
    timers = []
    if storage_volume:
        collectors.append(put_file(f"{LIBEXEC}/gluster_metrics.py", "0755", collector_text("gluster_metrics.py")))
        collectors.append(
            _timer(
                "gluster-metrics",
                "Gluster health metrics",
                f"{LIBEXEC}/gluster_metrics.py {storage_volume} {TEXTFILE_DIR}/gluster.prom",
                "1min",
            )
        )
        timers.append("hpc-gluster-metrics.timer")
    if probe:
        mount, url = probe
        collectors.append(put_file(f"{LIBEXEC}/nfs_probe.sh", "0755", collector_text("nfs_probe.sh")))
        collectors.append(
            _timer(
                "nfs-probe",
                "NFS read/write consistency probe",
                f"{LIBEXEC}/nfs_probe.sh {host} {mount} {url} {TEXTFILE_DIR}/nfs_probe.prom",
                "2min",
            )
        )
        timers.append("hpc-nfs-probe.timer")
    if slurm_container:
        collectors.append(put_file(f"{LIBEXEC}/slurm_metrics.sh", "0755", collector_text("slurm_metrics.sh")))
        collectors.append(
            _timer(
                "slurm-metrics",
                "Slurm node and job metrics",
                f"{LIBEXEC}/slurm_metrics.sh {slurm_container} {TEXTFILE_DIR}/slurm.prom",
                "1min",
            )
        )
        timers.append("hpc-slurm-metrics.timer")
    if gpus:
        collectors.append(put_file(f"{LIBEXEC}/gpu_metrics.sh", "0755", collector_text("gpu_metrics.sh")))
        collectors.append(
            _timer(
                "gpu-metrics", "GPU health metrics", f"{LIBEXEC}/gpu_metrics.sh {gpus} {TEXTFILE_DIR}/gpu.prom", "1min"
            )
        )
        timers.append("hpc-gpu-metrics.timer")
    services = [*units, *(["prometheus-ipmi-exporter"] if bmc else []), *timers]
    ipmi_wait = (
        f'hpc_wait {EXPORTER_READY_TIMEOUT_S} "the IPMI exporter on :{IPMI_PORT}" '
        f"curl -fsS -o /dev/null http://127.0.0.1:{IPMI_PORT}/metrics"
    )
    body = fill(
        SCRIPTS / "exporters.sh",
        packages=packages,
        textfile_dir=TEXTFILE_DIR,
        libexec=LIBEXEC,
        collectors=Raw("".join(c + "\n" for c in collectors)),
        services=Raw("".join(f"hpc_service_up {u}\n" for u in services)),
        timeout=EXPORTER_READY_TIMEOUT_S,
        node_port=NODE_PORT,
        ipmi_wait=Raw(ipmi_wait if bmc else ""),
        node_defaults=Raw(exporter_config.node_exporter_defaults().rstrip()),
        ipmi=Raw(_ipmi_setup() if bmc else ""),
        dcgm=Raw(
            put_file(exporter_config.DCGM_COUNTERS, "0644", exporter_config.dcgm_counters())
            if gpus and gpu_metrics == "dcgm"
            else ""
        ),
        firewall=Raw(_firewall(prometheus_address, admin_networks)),
    )
    undo = fill(
        SCRIPTS / "exporters-delete.sh",
        stop_timers=Raw("".join(f"hpc_service_down {t}\n" for t in timers)),
        collectors=[f"{LIBEXEC}/{n}" for n in COLLECTOR_FILES],
        unit_dir=UNIT_DIR,
        textfile_dir=TEXTFILE_DIR,
        table=firewall.TABLE,
        unit=firewall.UNIT,
        rules_file=firewall.RULES_FILE,
    )
    return _step(host, "exporters", body, undo)


def _firewall(prometheus_address: str, admin_networks: tuple[str, ...] | None) -> str:
    head = admin_networks is not None
    text = firewall.rules(
        exporter_ports=(NODE_PORT, IPMI_PORT, DCGM_PORT),
        prometheus_address=prometheus_address,
        ui_ports=(PROMETHEUS_PORT, ALERTMANAGER_PORT) if head else (),
        admin_networks=admin_networks or (),
    )
    return fill(
        SCRIPTS / "monitoring-firewall.sh",
        rules=Raw(text.rstrip()),
        rules_file=firewall.RULES_FILE,
        table=firewall.TABLE,
        unit=firewall.UNIT,
        unit_text=Raw(firewall.unit().rstrip()),
        unit_dir=UNIT_DIR,
    ).rstrip()


def _ipmi_setup() -> str:
    files = [
        (exporter_config.IPMI_CONFIG, exporter_config.ipmi_config()),
        ("/etc/default/prometheus-ipmi-exporter", exporter_config.ipmi_defaults()),
        (f"{UNIT_DIR}/prometheus-ipmi-exporter.service.d/hpc-cluster.conf", exporter_config.ipmi_unit_dropin()),
        ("/etc/udev/rules.d/60-hpc-ipmi.rules", exporter_config.ipmi_udev_rule()),
    ]
    mark = "if hpc_file_changed; then ipmi_changed=1; fi\n"
    lines = "".join(put_file(path, "0644", text) + mark for path, text in files)
    return fill(SCRIPTS / "ipmi-exporter.sh", user=exporter_config.IPMI_USER, files=Raw(lines.rstrip()))


def listen_address(admin_networks: tuple[str, ...]) -> str:
    """Loopback only unless admins reach the head over a network (the firewall then keeps
    everyone else out; TLS and the login apply everywhere)."""
    return "0.0.0.0" if admin_networks else "127.0.0.1"


def prometheus(
    host: str, config: str, rules: str, retention: str, admin_networks: tuple[str, ...] = ()
) -> RemoteScript:
    """Prometheus on the head: config and rules checked by promtool before they replace the
    running ones; a reload (SIGHUP), not a restart, when only they changed. It asks for TLS and
    the login (``--web.config.file``) and listens where ``listen_address`` says."""
    args = (
        f"--storage.tsdb.retention.time={retention} --web.config.file={WEB_CONFIG} "
        f"--web.listen-address={listen_address(admin_networks)}:{PROMETHEUS_PORT}"
    )
    body = fill(SCRIPTS / "prometheus.sh", config=Raw(config.rstrip()), rules=Raw(rules.rstrip()), args=Raw(args),
                user=WEB_USER, password_file=WEB_PASSWORD, cert=WEB_CERT, port=PROMETHEUS_PORT)  # fmt: skip
    undo = (
        "hpc_service_down prometheus\n"
        "rm -f /etc/prometheus/hpc-rules.yml\n"
        'echo "hpc: kept /var/lib/prometheus (the metrics history) and /etc/prometheus/prometheus.yml"\n'
    )
    return _step(host, "prometheus", body, undo)


def alertmanager(host: str, admin_networks: tuple[str, ...] = ()) -> RemoteScript:
    """Alertmanager on the head, one instance (no cluster port), with TLS and the login; its
    config (no secrets: webhooks go through the relay) arrives on stdin and is checked by amtool
    before it replaces the running one."""
    args = (
        f"--web.config.file={WEB_CONFIG} --web.listen-address={listen_address(admin_networks)}:{ALERTMANAGER_PORT} "
        "--cluster.listen-address="
    )
    body = fill(SCRIPTS / "alertmanager.sh", args=Raw(args), user=WEB_USER, password_file=WEB_PASSWORD,
                cert=WEB_CERT, port=ALERTMANAGER_PORT)  # fmt: skip
    return _step(host, "alertmanager", body, "hpc_service_down prometheus-alertmanager\n")


def monitoring_web(host: str, address: str) -> RemoteScript:
    """TLS and the login of Prometheus and Alertmanager on the head; the password (a secret)
    arrives on stdin."""
    names = ["localhost", host]
    ips = ["127.0.0.1", address]
    san = ",".join([*(f"DNS:{n}" for n in names), *(f"IP:{a}" for a in ips)])
    shown = ",".join([*(f"DNS:{n}" for n in names), *(f"IPAddress:{a}" for a in ips)])
    common = {"dir": WEB_DIR}
    body = fill(
        SCRIPTS / "monitoring-web.sh",
        cert=WEB_CERT,
        key=WEB_KEY,
        config=WEB_CONFIG,
        password=WEB_PASSWORD,
        user=WEB_USER,
        head=host,
        san=san,
        san_shown=shown,
        days=CERT_DAYS,
        renew_s=CERT_RENEW_DAYS * 86400,
        renew_days=CERT_RENEW_DAYS,
        **common,
    )
    return _step(host, "monitoring-web", body, fill(SCRIPTS / "monitoring-web-delete.sh", **common))


def alert_relay(host: str) -> RemoteScript:
    """The relay from Alertmanager to the site's webhooks, whose URLs (secrets) arrive on stdin
    as JSON and stay in root's files on the head."""
    unit = (
        "[Unit]\nDescription=Relay from Alertmanager to the site's webhooks (hpc-cluster)\n"
        "After=network.target\n\n[Service]\n"
        f"ExecStart=/usr/bin/python3 {LIBEXEC}/alert_relay.py 127.0.0.1 {ALERT_RELAY_PORT} {ALERT_DRAIN_TOKEN} "
        f"{ALERT_RELAY_DIR}\nRestart=on-failure\nNoNewPrivileges=yes\nProtectSystem=strict\nProtectHome=yes\n"
        "PrivateTmp=yes\n\n[Install]\nWantedBy=multi-user.target\n"
    )
    common = {"libexec": LIBEXEC, "unit_dir": UNIT_DIR, "url_dir": ALERT_RELAY_DIR}
    body = fill(
        SCRIPTS / "alert-relay.sh",
        program=Raw((PROGRAMS / "alert_relay.py").read_text().rstrip()),
        unit=Raw(unit.rstrip()),
        timeout=EXPORTER_READY_TIMEOUT_S,
        port=ALERT_RELAY_PORT,
        token=ALERT_DRAIN_TOKEN,
        receivers=list(RELAYED_RECEIVERS),
        **common,
    )
    return _step(host, "alert-relay", body, fill(SCRIPTS / "alert-relay-delete.sh", **common))


def alert_drain(host: str, container: str) -> RemoteScript:
    """The receiver that drains the Slurm node a ``drain="true"`` alert names, through the head
    container's ``scontrol``; root (it runs ``docker exec``), loopback only, behind a token."""
    unit = (
        "[Unit]\nDescription=Alertmanager receiver that drains faulty Slurm nodes (hpc-cluster)\n"
        "After=network.target docker.service\n\n[Service]\n"
        f"ExecStart=/usr/bin/python3 {LIBEXEC}/alert_drain.py 127.0.0.1 {ALERT_DRAIN_PORT} {container} "
        f"{ALERT_DRAIN_TOKEN}\nRestart=on-failure\nNoNewPrivileges=yes\n\n[Install]\nWantedBy=multi-user.target\n"
    )
    common = {"libexec": LIBEXEC, "unit_dir": UNIT_DIR, "token": ALERT_DRAIN_TOKEN}
    body = fill(
        SCRIPTS / "alert-drain.sh",
        program=Raw((PROGRAMS / "alert_drain.py").read_text().rstrip()),
        unit=Raw(unit.rstrip()),
        timeout=EXPORTER_READY_TIMEOUT_S,
        port=ALERT_DRAIN_PORT,
        **common,
    )
    return _step(host, "alert-drain", body, fill(SCRIPTS / "alert-drain-delete.sh", **common))


def dashboard_files(host: str) -> RemoteScript:
    """The dashboards and a provisioning file for the site's Grafana (pointed at this head's
    Prometheus as the default data source)."""
    provisioning = (
        "apiVersion: 1\nproviders:\n  - name: hpc-cluster\n    type: file\n    disableDeletion: true\n"
        f"    options:\n      path: {DASHBOARD_DIR}\n"
    )
    body = f"hpc_dir {DASHBOARD_DIR} 0755 0:0\n" + put_file(
        "/etc/hpc-cluster/grafana/provisioning.yml", "0644", provisioning
    )
    for name, text in sorted(dashboards.files().items()):
        body += put_file(f"{DASHBOARD_DIR}/{name}", "0644", text)
    undo = f'rm -rf {DASHBOARD_DIR} /etc/hpc-cluster/grafana/provisioning.yml\nhpc_changed "removed the dashboards"\n'
    return _step(host, "dashboards", body, undo)
