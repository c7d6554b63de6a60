"""Prometheus and Alertmanager configuration, rendered from the ``MonitoringSpec``.

Scrape jobs: ``node`` (every host: node exporter, and through its textfile collector the NVMe
wear, Gluster, NFS-probe and Slurm collectors), ``ipmi`` (hosts with a BMC: inlet/exhaust
temperature, fans, PSU power, DCMI power), ``dcgm`` (GPU hosts, when the site runs NVIDIA's DCGM
exporter: ``gpuMetrics: dcgm``; otherwise GPU health comes through node exporter), ``vllm``
(each model server's ``/metrics`` through k3s's Traefik, with the monitoring login) and
``prometheus`` itself (over TLS, with the password: it asks the same login of itself as of
anyone, and so does Alertmanager). Every target carries ``host`` (and ``rack``) labels, so alerts and
dashboards name machines as the stack does, never by address.
"""

from __future__ import annotations

from typing import Any

import yaml

from components.monitoring.spec import (
    ALERT_DRAIN_PORT,
    ALERT_DRAIN_TOKEN,
    ALERT_RELAY_PORT,
    ALERTMANAGER_PORT,
    DCGM_PORT,
    IPMI_PORT,
    NODE_PORT,
    PROMETHEUS_PORT,
    WEB_CERT,
    WEB_PASSWORD,
    WEB_USER,
    HostTarget,
    MonitoringSpec,
)

RULE_FILE = "/etc/prometheus/hpc-rules.yml"
HEADER = "# Managed by hpc-cluster (Pulumi): components/monitoring/render_prometheus.py\n"


def _static(hosts: list[HostTarget], port: int) -> list[dict[str, Any]]:
    out = []
    for h in hosts:
        labels = {"host": h.name} | ({"rack": h.rack} if h.rack else {})
        out.append({"targets": [f"{h.address}:{port}"], "labels": labels})
    return out


# How Prometheus reaches itself and Alertmanager: TLS against the head's own certificate, and the
# login (the password file is made on the head from hpc:monitoringPassword).
SELF_CLIENT: dict[str, Any] = {
    "scheme": "https",
    "tls_config": {"ca_file": WEB_CERT},
    "basic_auth": {"username": WEB_USER, "password_file": WEB_PASSWORD},
}


def scrape_jobs(spec: MonitoringSpec) -> list[dict[str, Any]]:
    hosts = list(spec.hosts)
    jobs: list[dict[str, Any]] = [
        {"job_name": "prometheus", **SELF_CLIENT, "static_configs": [{"targets": [f"127.0.0.1:{PROMETHEUS_PORT}"]}]},
        {"job_name": "node", "static_configs": _static(hosts, NODE_PORT)},
    ]
    if bmc := [h for h in hosts if h.bmc]:
        jobs.append({"job_name": "ipmi", "static_configs": _static(bmc, IPMI_PORT)})
    if spec.gpu_metrics == "dcgm" and (gpu := [h for h in hosts if h.gpus]):
        jobs.append({"job_name": "dcgm", "static_configs": _static(gpu, DCGM_PORT)})
    if spec.models:
        jobs.append(
            {
                "job_name": "vllm",
                # through k3s's Traefik with the monitoring login: no model server has a port of its own
                "scheme": spec.model_scheme,
                "basic_auth": {"username": WEB_USER, "password_file": WEB_PASSWORD},
                "static_configs": [
                    {
                        "targets": [f"{m.address}:{m.port}"],
                        "labels": {"host": m.host, "model": m.name, "__metrics_path__": m.path},
                    }
                    for m in spec.models
                ],
            }
        )
    return jobs


def prometheus_config(spec: MonitoringSpec) -> str:
    doc = {
        "global": {
            "scrape_interval": spec.scrape_interval,
            "evaluation_interval": spec.scrape_interval,
            "external_labels": {"cluster": spec.cluster},
        },
        "rule_files": [RULE_FILE],
        "alerting": {
            "alertmanagers": [{**SELF_CLIENT, "static_configs": [{"targets": [f"127.0.0.1:{ALERTMANAGER_PORT}"]}]}]
        },
        "scrape_configs": scrape_jobs(spec),
    }
    return HEADER + yaml.safe_dump(doc, sort_keys=False)


def _relayed(name: str) -> dict[str, Any]:
    """A receiver that posts to the head's relay, which forwards to the URL only the head holds."""
    return {
        "name": name,
        "webhook_configs": [
            {
                "url": f"http://127.0.0.1:{ALERT_RELAY_PORT}/{name}",
                "send_resolved": name != "watchdog",
                "http_config": {"authorization": {"type": "Bearer", "credentials_file": ALERT_DRAIN_TOKEN}},
            }
        ],
    }


def alertmanager_config(spec: MonitoringSpec, webhook: bool, watchdog: bool = False) -> str:
    """Every alert to the site's webhook, critical ones repeated hourly; without a webhook
    (``webhook`` False), alerts are kept in Alertmanager's UI only. The always-firing ``Watchdog``
    goes every minute to the dead-man's switch (when ``watchdog``), which pages when it stops
    hearing it, and never to the admins. Both URLs are secrets: Alertmanager posts to the head's
    relay (``programs/alert_relay.py``), so no URL is in this config, its UI or its API. Alerts
    labelled ``drain="true"`` go first to the head's receiver, which drains the node they name."""
    receiver: dict[str, Any] = _relayed("cluster-admins") if webhook else {"name": "cluster-admins"}
    drain = {  # the head's receiver (programs/alert_drain.py), with the token only the head holds
        "name": "slurm-drain",
        "webhook_configs": [
            {
                "url": f"http://127.0.0.1:{ALERT_DRAIN_PORT}/",
                "send_resolved": False,
                "http_config": {"authorization": {"type": "Bearer", "credentials_file": ALERT_DRAIN_TOKEN}},
            }
        ],
    }
    watchdog_receiver: dict[str, Any] = _relayed("watchdog") if watchdog else {"name": "watchdog"}
    doc = {
        "route": {
            "receiver": "cluster-admins",
            "group_by": ["alertname", "host"],
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "4h",
            "routes": [
                {
                    "matchers": ['alertname="Watchdog"'],
                    "receiver": "watchdog",
                    "group_wait": "0s",
                    "group_interval": "1m",
                    "repeat_interval": "1m",
                },
                {  # a node-fault alert drains its node, then goes on to the admins
                    "matchers": ['drain="true"'],
                    "receiver": "slurm-drain",
                    "group_by": ["alertname", "host", "gpu"],
                    "group_wait": "0s",
                    "repeat_interval": "10m",
                    "continue": True,
                },
                {"matchers": ['severity="critical"'], "receiver": "cluster-admins", "repeat_interval": "1h"},
            ],
        },
        "inhibit_rules": [
            {  # a host that is down explains every other alert of that host
                "source_matchers": ['alertname="HostDown"'],
                "target_matchers": ['alertname!="HostDown"'],
                "equal": ["host"],
            }
        ],
        "receivers": [receiver, drain, watchdog_receiver],
    }
    return HEADER + yaml.safe_dump(doc, sort_keys=False)
