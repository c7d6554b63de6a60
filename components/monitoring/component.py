"""The monitoring tier as resources: ``<host>-exporters`` on every host, ``<head>-prometheus``,
``<head>-alert-drain`` (the receiver that drains faulty nodes), ``<head>-alertmanager`` (its
config a secret when a webhook is set) and ``<head>-dashboards``."""

from __future__ import annotations

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
                gpus=h.gpus,
                gpu_metrics=spec.gpu_metrics,
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
        drain_step = steps.alert_drain(spec.head, args.slurm_container)
        drain = remote.run(drain_step.step, head, drain_step, opts=after)
        alert_step = steps.alertmanager(spec.head)
        secret = args.webhook_url is not None or args.watchdog_url is not None
        am_config: pulumi.Input[str] = (
            render_prometheus.alertmanager_config(spec, None)
            if not secret  # with a webhook the config holds its URL: a secret end to end
            else pulumi.Output.secret(
                pulumi.Output.all(args.webhook_url, args.watchdog_url).apply(
                    lambda urls: render_prometheus.alertmanager_config(spec, urls[0], urls[1])
                )
            )
        )
        alertmanager = remote.run(
            alert_step.step,
            head,
            alert_step,
            stdin=am_config,
            secret_stdin=secret,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*exporters, drain]),
        )
        prom = steps.prometheus(
            spec.head, render_prometheus.prometheus_config(spec), rules.rule_file(spec), spec.retention
        )
        remote.run(prom.step, head, prom, opts=pulumi.ResourceOptions(parent=self, depends_on=[alertmanager]))
        dash = steps.dashboard_files(spec.head)
        remote.run(dash.step, head, dash, opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({})
