"""The monitoring tier as resources: ``<host>-exporters`` on every host (with the firewall that
keeps them to Prometheus), ``<head>-monitoring-web`` (TLS and the login, from the password
secret), ``<head>-alert-drain`` (the receiver that drains faulty nodes), ``<head>-alert-relay``
(the site's webhook URLs, secrets, kept on the head), ``<head>-alertmanager``,
``<head>-prometheus`` and ``<head>-dashboards``."""

from __future__ import annotations

import json

import pulumi
from pydantic import Field

from components import remote
from components.base import Args
from components.monitoring import render_prometheus, rules, steps
from components.monitoring.spec import MonitoringSpec
from components.remote import Ssh


class MonitoringArgs(Args):
    spec: MonitoringSpec = Field(description="Targets, racks, intervals.")
    hosts: dict[str, Ssh] = Field(description="Every host, by name.")
    after: dict[str, list[pulumi.Resource]] = Field(
        default_factory=dict, description="Per host, what its collectors need first (the mount, the head container)."
    )
    probe_url: str | None = Field(default=None, description="nfs:// URL of the export, for the NFS probe.")
    storage_cli_host: str | None = Field(default=None, description="The storage host that reports Gluster health.")
    slurm_container: str = Field(description="Name of the Slurm head container (the Slurm collector).")
    password: pulumi.Output[str] = Field(description="The monitoring login's password (secret).")
    webhook_url: pulumi.Output[str] | None = Field(default=None, description="Alertmanager webhook (secret).")
    watchdog_url: pulumi.Output[str] | None = Field(
        default=None, description="Dead-man's switch that hears the Watchdog alert every minute (secret)."
    )


class Monitoring(pulumi.ComponentResource):
    def __init__(self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("hpc:monitoring:Monitoring", name, None, opts)
        spec = args.spec
        exporters = []
        for h in spec.hosts:
            step = steps.exporters(
                h.name,
                bmc=h.bmc,
                storage_volume=spec.volume if h.name == args.storage_cli_host else None,
                probe=(spec.mount_point, args.probe_url) if args.probe_url else None,
                slurm_container=args.slurm_container if h.name == spec.head else None,
                prometheus_address=spec.head_address,
                gpus=h.gpus,
                gpu_metrics=spec.gpu_metrics,
                admin_networks=spec.admin_networks if h.name == spec.head else None,
            )
            exporters.append(
                remote.run(
                    step.step,
                    args.hosts[h.name],
                    step,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=args.after.get(h.name, [])),
                )
            )
        head = args.hosts[spec.head]
        after = pulumi.ResourceOptions(parent=self, depends_on=exporters)
        web_step = steps.monitoring_web(spec.head, spec.head_address)
        web = remote.run(web_step.step, head, web_step, stdin=args.password, secret_stdin=True, opts=after)
        drain_step = steps.alert_drain(spec.head, args.slurm_container)
        drain = remote.run(drain_step.step, head, drain_step, opts=after)
        relay_step = steps.alert_relay(spec.head)
        urls: pulumi.Output[str] = pulumi.Output.secret(
            pulumi.Output.all(args.webhook_url, args.watchdog_url).apply(_relay_urls)
        )
        relay = remote.run(
            relay_step.step,
            head,
            relay_step,
            stdin=urls,
            secret_stdin=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[drain]),
        )
        alert_step = steps.alertmanager(spec.head, spec.admin_networks)
        am_config = render_prometheus.alertmanager_config(
            spec, webhook=args.webhook_url is not None, watchdog=args.watchdog_url is not None
        )
        alertmanager = remote.run(
            alert_step.step,
            head,
            alert_step,
            stdin=am_config,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*exporters, web, drain, relay]),
        )
        prom = steps.prometheus(
            spec.head, render_prometheus.prometheus_config(spec), rules.rule_file(spec), spec.retention,
            spec.admin_networks,
        )  # fmt: skip
        remote.run(prom.step, head, prom, opts=pulumi.ResourceOptions(parent=self, depends_on=[web, alertmanager]))
        dash = steps.dashboard_files(spec.head)
        remote.run(dash.step, head, dash, opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({})


def _relay_urls(urls: list[str | None]) -> str:
    """The relay step's stdin: each relayed receiver's URL, or null where the stack sets none."""
    return json.dumps({"cluster-admins": urls[0], "watchdog": urls[1]}, sort_keys=True)
