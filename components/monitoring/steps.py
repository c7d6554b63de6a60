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

from components.monitoring import dashboards
from components.monitoring.spec import IPMI_PORT, NODE_PORT, TEXTFILE_DIR
from components.scripts import RemoteScript, put_file, script

COLLECTORS = Path(__file__).with_name("collectors")
LIBEXEC = "/usr/local/libexec/hpc-cluster"
UNIT_DIR = "/etc/systemd/system"
DASHBOARD_DIR = "/etc/hpc-cluster/grafana/dashboards"


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
) -> RemoteScript:
    """node exporter (+ NVMe collector) everywhere, IPMI exporter with a BMC, and the host's
    collectors: Gluster health (``storage_volume``), the NFS probe (``probe``: mount point and
    the export's nfs:// URL) and Slurm states (``slurm_container``)."""
    packages = [
        "prometheus-node-exporter",
        "prometheus-node-exporter-collectors",
        "nvme-cli",
        "jq",
        "moreutils",
        "curl",
    ]
    if bmc:
        packages.append("prometheus-ipmi-exporter")
    if probe:
        packages.append("libnfs-utils")
    units = ["prometheus-node-exporter", "prometheus-node-exporter-nvme.timer"]
    body = [f"hpc_install {' '.join(packages)}", f"hpc_dir {TEXTFILE_DIR} 0755 0:0", f"hpc_dir {LIBEXEC} 0755 0:0"]
    timers = []
    if storage_volume:
        body.append(put_file(f"{LIBEXEC}/gluster_metrics.py", "0755", collector_text("gluster_metrics.py")))
        body.append(
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
        body.append(put_file(f"{LIBEXEC}/nfs_probe.sh", "0755", collector_text("nfs_probe.sh")))
        body.append(
            _timer(
                "nfs-probe",
                "NFS read/write consistency probe",
                f"{LIBEXEC}/nfs_probe.sh {host} {mount} {url} {TEXTFILE_DIR}/nfs_probe.prom",
                "2min",
            )
        )
        timers.append("hpc-nfs-probe.timer")
    if slurm_container:
        body.append(put_file(f"{LIBEXEC}/slurm_metrics.sh", "0755", collector_text("slurm_metrics.sh")))
        body.append(
            _timer(
                "slurm-metrics",
                "Slurm node and job metrics",
                f"{LIBEXEC}/slurm_metrics.sh {slurm_container} {TEXTFILE_DIR}/slurm.prom",
                "1min",
            )
        )
        timers.append("hpc-slurm-metrics.timer")
    body.append('if [ "$HPC_CHANGED" = 1 ]; then systemctl daemon-reload; fi')
    for unit in [*units, *(["prometheus-ipmi-exporter"] if bmc else []), *timers]:
        body.append(f"hpc_service_up {unit}")
    body.append(
        f'hpc_wait 30 "node exporter on :{NODE_PORT}" curl -fsS -o /dev/null http://127.0.0.1:{NODE_PORT}/metrics'
    )
    if bmc:
        body.append(
            f'hpc_wait 30 "the IPMI exporter on :{IPMI_PORT}" curl -fsS -o /dev/null http://127.0.0.1:{IPMI_PORT}/metrics'
        )
    ours = " ".join(f"{LIBEXEC}/{n}" for n in ("gluster_metrics.py", "nfs_probe.sh", "slurm_metrics.sh"))
    undo = "".join(f"hpc_service_down {t}\n" for t in timers)
    undo += f"rm -f {ours} {UNIT_DIR}/hpc-gluster-metrics.* {UNIT_DIR}/hpc-nfs-probe.* {UNIT_DIR}/hpc-slurm-metrics.*\n"
    undo += f"rm -f {TEXTFILE_DIR}/gluster.prom {TEXTFILE_DIR}/nfs_probe.prom {TEXTFILE_DIR}/slurm.prom\n"
    undo += 'systemctl daemon-reload\nhpc_changed "removed the hpc-cluster collectors (exporter packages kept)"\n'
    return _step(host, "exporters", "\n".join(body) + "\n", undo)


def prometheus(host: str, config: str, rules: str, retention: str) -> RemoteScript:
    """Prometheus on the head: config and rules checked by promtool before they replace the
    running ones; a reload (SIGHUP), not a restart, when only they changed."""
    body = f"""hpc_install prometheus
staged=$(mktemp -d)
trap 'rm -rf "$staged"' EXIT
cat > "$staged/prometheus.yml" <<'HPC_FILE_END'
{config.rstrip()}
HPC_FILE_END
cat > "$staged/hpc-rules.yml" <<'HPC_FILE_END'
{rules.rstrip()}
HPC_FILE_END
sed -i "s#/etc/prometheus/hpc-rules.yml#$staged/hpc-rules.yml#" "$staged/prometheus.yml"
out=$(promtool check config "$staged/prometheus.yml" 2>&1) \\
  || hpc_fail "promtool refused the rendered config: $out"
sed -i "s#$staged/hpc-rules.yml#/etc/prometheus/hpc-rules.yml#" "$staged/prometheus.yml"
hpc_put_file /etc/prometheus/hpc-rules.yml 0644 0:0 < "$staged/hpc-rules.yml"
reload=$HPC_FILE_CHANGED
hpc_put_file /etc/prometheus/prometheus.yml 0644 0:0 < "$staged/prometheus.yml"
[ "$HPC_FILE_CHANGED" = 1 ] && reload=1
hpc_put_file /etc/default/prometheus 0644 0:0 <<'HPC_FILE_END'
# Managed by hpc-cluster (Pulumi)
ARGS="--storage.tsdb.retention.time={retention} --web.listen-address=:9090"
HPC_FILE_END
if [ "$HPC_FILE_CHANGED" = 1 ] && systemctl is-active --quiet prometheus; then
  systemctl restart prometheus
  hpc_changed "restarted prometheus (retention or listen address changed)"
elif [ "$reload" = 1 ] && systemctl is-active --quiet prometheus; then
  systemctl reload prometheus
  hpc_changed "reloaded prometheus"
fi
hpc_service_up prometheus
"""
    undo = (
        "hpc_service_down prometheus\n"
        "rm -f /etc/prometheus/hpc-rules.yml\n"
        'echo "hpc: kept /var/lib/prometheus (the metrics history) and /etc/prometheus/prometheus.yml"\n'
    )
    return _step(host, "prometheus", body, undo)


def alertmanager(host: str) -> RemoteScript:
    """Alertmanager on the head; its config (the webhook URL is a secret) arrives on stdin and is
    checked by amtool before it replaces the running one."""
    body = """hpc_install prometheus-alertmanager
staged=$(mktemp)
trap 'rm -f "$staged"' EXIT
cat > "$staged"
out=$(amtool check-config "$staged" 2>&1) || hpc_fail "amtool refused the rendered config: $out"
gid=$(getent group prometheus | cut -d: -f3) || hpc_fail "no prometheus group: the package did not install"
hpc_put_file /etc/prometheus/alertmanager.yml 0640 "0:$gid" < "$staged"
if [ "$HPC_FILE_CHANGED" = 1 ] && systemctl is-active --quiet prometheus-alertmanager; then
  systemctl reload prometheus-alertmanager
  hpc_changed "reloaded alertmanager"
fi
hpc_service_up prometheus-alertmanager
"""
    undo = "hpc_service_down prometheus-alertmanager\n"
    return _step(host, "alertmanager", body, undo)


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
