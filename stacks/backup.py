"""Composition of the backups: the ``BackupPlan`` from ``hpc:backup`` and the Slurm tier's
paths, and the component on the head after its container and its mount."""

from __future__ import annotations

import pulumi

from components.backup.component import Backups, BackupsArgs
from components.backup.steps import BackupPlan
from components.remote import Ssh
from components.slurm.render import ACCOUNTING_DB
from components.slurm.steps import HEAD_CONTAINER
from stacks.config import ClusterConfig, ClusterSecrets
from stacks.config_backup import target_of


def plan_of(cfg: ClusterConfig) -> BackupPlan:
    b = cfg.backup
    assert b.target is not None  # the config requires it when backups are enabled
    target = target_of(b.target)
    return BackupPlan(
        head=cfg.slurm_head.name,
        repository=target.repository,
        sftp_command=target.sftp_command,
        container=HEAD_CONTAINER,
        database=ACCOUNTING_DB,
        state_dir=cfg.slurm.state_path,
        volume_mount=cfg.storage.mount_point,
        paths=tuple(b.paths),
        excludes=tuple(b.exclude),
        keep_last=b.keep.last,
        keep_hourly=b.keep.hourly,
        keep_daily=b.keep.daily,
        keep_weekly=b.keep.weekly,
        keep_monthly=b.keep.monthly,
        on_calendar=b.on_calendar,
        max_age_s=b.max_age_s,
    )


def build_backup(cfg: ClusterConfig, secrets: ClusterSecrets, ssh: Ssh, after: list[pulumi.Resource]) -> None:
    if not cfg.backup.enabled:
        return
    assert secrets.backup_password is not None  # config.load requires it with backups
    Backups("backup", BackupsArgs(plan=plan_of(cfg), ssh=ssh, password=secrets.backup_password, after=after))
