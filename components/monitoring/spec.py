"""What monitoring watches, derived from the stack: targets, racks, thresholds and their sources.

Every threshold an alert uses is here, with where it comes from; the alert rules
(``components.monitoring.rules``) and the README's alert table read them from this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Ports (Debian's defaults for each exporter; DCGM exporter's own default).
NODE_PORT = 9100
IPMI_PORT = 9290
DCGM_PORT = 9400
PROMETHEUS_PORT = 9090
ALERTMANAGER_PORT = 9093
ALERT_DRAIN_PORT = 9095  # the head's alert receiver that drains Slurm nodes (loopback only)
ALERT_DRAIN_TOKEN = "/etc/prometheus/hpc-alert-drain.token"  # made on the head, never leaves it
ALERT_RELAY_PORT = 9096  # the head's relay to the site's webhooks, whose URLs stay in 0600 files (loopback)
ALERT_RELAY_DIR = "/etc/prometheus/hpc-webhooks"  # <receiver>.url, 0600 root: never in a UI or a config
# TLS and basic auth of Prometheus and Alertmanager (their --web.config.file): made on the head.
WEB_DIR = "/etc/prometheus/hpc-web"
WEB_CONFIG = f"{WEB_DIR}/web.yml"
WEB_CERT = f"{WEB_DIR}/cert.pem"  # self-signed, made on the head; its key never leaves it
WEB_KEY = f"{WEB_DIR}/key.pem"
WEB_PASSWORD = f"{WEB_DIR}/password"  # Prometheus's own copy, to reach itself and Alertmanager
WEB_USER = "admin"  # the login; its password is hpc:monitoringPassword
# node exporter's textfile collector directory on Debian: collectors write <name>.prom there.
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"


@dataclass(frozen=True)
class Threshold:
    value: float
    unit: str
    source: str


THRESHOLDS: dict[str, Threshold] = {
    "inlet_c": Threshold(22, "°C", "spec sheet (EPYC 9452P): ambient intake must stay below 22 °C"),
    "internal_ambient_c": Threshold(
        35, "°C", "ML-PROD-V4 sheet, 5.1: internal ambient above 35 °C degrades SSDs and capacitors"
    ),
    "gpu_temp_c": Threshold(
        85, "°C", "assumption: a margin below the A100/H100 slowdown temperature (about 87-90 °C, nvidia-smi -q)"
    ),
    "nvme_wear_ratio": Threshold(0.8, "ratio", "issue 16 / ML-PROD-V4 sheet 5.4: predict NVMe end of life (80 % used)"),
    "model_ttft_p95_s": Threshold(
        2.0, "s", "assumption: p95 time to first token above 2 s makes the chat UI feel broken"
    ),
    "drained_hours": Threshold(6, "h", "assumption: a drain that outlives a working day is forgotten"),
    "nfs_probe_stale_s": Threshold(600, "s", "the probe runs every 2 min; 5 missed runs"),
    "exhaust_c": Threshold(
        50,
        "°C",
        "assumption: the sheets' 22 °C inlet plus the 15-25 °C rise of an air-cooled GPU server at full "
        "load (a healthy busy 5.5 kW node exhausts at 33-37 °C); the BMC's own critical thresholds alert separately",
    ),
    "textfile_stale_s": Threshold(600, "s", "the collectors run every 1-2 min; 5 missed runs"),
    "disk_free_ratio": Threshold(
        0.05, "ratio", "assumption: under 5 % free, slurmd, Docker and journald start failing"
    ),
    "disk_filling_ratio": Threshold(0.25, "ratio", "assumption: a disk with a quarter free is not yet worth a page"),
    "memory_available_ratio": Threshold(
        0.05, "ratio", "assumption: under 5 % available the kernel reclaims hard and the OOM killer is near"
    ),
    "clock_offset_s": Threshold(
        0.05, "s", "assumption: well inside munge's 300 s credential window and Slurm's job timing; NTP keeps 1 ms"
    ),
    "edac_correctable_per_h": Threshold(
        10, "errors/h", "assumption: a DIMM logging more than a few corrected errors an hour is failing"
    ),
}


@dataclass(frozen=True)
class HostTarget:
    name: str
    address: str
    rack: str | None = None
    gpus: int = 0
    bmc: bool = False  # has a BMC the IPMI exporter reads (every server profile; not a Pi)


@dataclass(frozen=True)
class ModelTarget:
    """A model server's metrics, as Prometheus reaches them: through k3s's Traefik at
    ``address``:``port`` (``MonitoringSpec.model_scheme``), on ``path``, with the monitoring login."""

    name: str
    host: str  # the inference host that serves it (a label)
    address: str
    port: int
    path: str = "/metrics"


@dataclass(frozen=True)
class MonitoringSpec:
    cluster: str
    head: str
    hosts: tuple[HostTarget, ...]
    models: tuple[ModelTarget, ...] = ()
    model_scheme: str = "http"
    rack_budgets_w: dict[str, int] = field(default_factory=dict)
    scrape_interval: str = "30s"
    retention: str = "30d"
    volume: str = "gv0"
    mount_point: str = "/srv/gfsv"
    nfs_server: str = ""
    nfs_pseudo: str = "/gv"
    gpu_metrics: str = "nvidia-smi"  # "nvidia-smi": this project's collector; "dcgm": the site's DCGM exporter
    admin_networks: tuple[str, ...] = ()  # besides loopback, who may reach Prometheus and Alertmanager

    @property
    def head_address(self) -> str:
        return next(h.address for h in self.hosts if h.name == self.head)
