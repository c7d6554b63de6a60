"""Composition of the monitoring tier: the ``MonitoringSpec`` from the stack config, and the
component wired to the hosts, the mounts (the NFS probe) and the Slurm head container."""

from __future__ import annotations

import pulumi

from components.inference.exposure import metrics_path
from components.monitoring.component import Monitoring, MonitoringArgs
from components.monitoring.spec import HostTarget, ModelTarget, MonitoringSpec
from components.remote import Ssh
from components.slurm.steps import HEAD_CONTAINER
from stacks.config import ClusterConfig, ClusterSecrets, Role


def model_targets(cfg: ClusterConfig, tls: bool) -> tuple[ModelTarget, ...]:
    """Each model's metrics through k3s's Traefik: the public name (or the k3s server's address),
    port 443 with the site's certificate, 80 without (components/inference/exposure.py)."""
    servers = cfg.with_role(Role.K3S_SERVER)
    if not cfg.inference.models or not servers:
        return ()
    endpoint = cfg.inference.public_host or str(servers[0].address)
    port = 443 if tls else 80
    return tuple(ModelTarget(m.name, m.host, endpoint, port, metrics_path(m.name)) for m in cfg.inference.models)


def spec_of(cfg: ClusterConfig, *, tls: bool) -> MonitoringSpec:
    """``tls``: the stack has the site's certificate (the models' metrics come over HTTPS)."""
    gateway = cfg.ganesha_hosts[0]
    return MonitoringSpec(
        cluster=cfg.slurm.cluster_name,
        head=cfg.slurm_head.name,
        hosts=tuple(
            HostTarget(
                name=h.name,
                address=str(h.address),
                rack=h.rack,
                gpus=h.hardware.gpus.count if h.hardware.gpus else 0,
                bmc=h.hardware.bmc,
            )
            for h in cfg.hosts
        ),
        models=model_targets(cfg, tls),
        model_scheme="https" if tls else "http",
        rack_budgets_w={name: r.power_budget_w for name, r in cfg.racks.items()},
        scrape_interval=cfg.monitoring.scrape_interval,
        retention=cfg.monitoring.retention,
        volume=cfg.storage.volume,
        mount_point=cfg.storage.mount_point,
        nfs_server=str(gateway.address),
        nfs_pseudo=cfg.storage.export_pseudo,
        gpu_metrics=cfg.monitoring.gpu_metrics,
        admin_networks=tuple(str(n) for n in cfg.monitoring.admin_networks),
    )


def build_monitoring(
    cfg: ClusterConfig,
    secrets: ClusterSecrets,
    ssh: dict[str, Ssh],
    mounts: dict[str, pulumi.Resource],
    head_container: pulumi.Resource | None,
) -> None:
    """The monitoring tier: on every host (``ssh``) after its shared mount (``mounts``: the NFS
    probe reads it), the Slurm collector after the head's container."""
    if not cfg.monitoring.enabled:
        return
    spec = spec_of(cfg, tls=secrets.tls_certificate is not None)
    after: dict[str, list[pulumi.Resource]] = {name: [mount] for name, mount in mounts.items()}
    if head_container is not None:
        after.setdefault(spec.head, []).append(head_container)
    assert secrets.monitoring_password is not None  # config.load requires it with monitoring
    if secrets.alert_webhook_url is None:
        pulumi.log.warn("hpc:alertWebhookUrl is not set: alerts are shown in Alertmanager only, nobody is paged")
    Monitoring(
        "monitoring",
        MonitoringArgs(
            spec=spec,
            hosts=ssh,
            after=after,
            probe_url=f"nfs://{spec.nfs_server}{spec.nfs_pseudo}",
            storage_cli_host=cfg.storage_cli_host.name,
            slurm_container=HEAD_CONTAINER,
            password=secrets.monitoring_password,
            webhook_url=secrets.alert_webhook_url,
            watchdog_url=secrets.watchdog_webhook_url,
        ),
    )
