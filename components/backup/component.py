"""The backups as a resource: ``<head>-backup`` (``hpc:backup:Backups``) on the Slurm head,
after its container (the DB dump runs in it) and its mount of the shared volume; the
repository password reaches the head only on stdin."""

from __future__ import annotations

import pulumi
from pydantic import Field

from components import remote
from components.backup import steps
from components.base import Args
from components.remote import Ssh


class BackupsArgs(Args):
    plan: steps.BackupPlan = Field(description="What to back up, where, how often, how long.")
    ssh: Ssh = Field(description="The Slurm head.")
    password: pulumi.Output[str] = Field(description="The repository password (secret).")
    after: list[pulumi.Resource] = Field(default_factory=list, description="The head container, its mount.")


class Backups(pulumi.ComponentResource):
    def __init__(self, name: str, args: BackupsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("hpc:backup:Backups", name, None, opts)
        step = steps.backup(args.plan)
        self.step = remote.run(
            step.step,
            args.ssh,
            step,
            stdin=args.password,
            secret_stdin=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.after),
        )
        self.register_outputs({})
