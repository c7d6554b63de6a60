"""JobChecks: the GPU checks slurmd runs around every job (slurm.conf's ``Prolog``/``Epilog``),
installed on one slurmd node's host before anything names them.

Slurm 24.11 fails every job's prolog on a node where a configured ``Prolog`` is missing, and a
glob that matches nothing fails the same way ("Unable to create list of paths", measured on the
lab's slurmd), draining the node with "Prolog error". So these steps are a component of their
own, made before the Slurm head: the head's slurm.conf step (which adds the lines) and the
node's container both depend on them, on a new cluster and when an existing one gains the
checks. Deleting them runs after the head's slurm.conf no longer names them.
"""

from __future__ import annotations

import pulumi

from components import remote
from components.remote import Ssh
from components.slurm import render_health, steps


class JobChecks(pulumi.ComponentResource):
    """Children: ``<host>-gpu-prolog`` and ``<host>-gpu-epilog``."""

    TYPE = "hpc:compute:JobChecks"

    def __init__(
        self,
        name: str,
        ssh: Ssh,
        gpus: int,
        health: render_health.Health,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(self.TYPE, name, None, opts)
        host = ssh.name
        self.steps: list[pulumi.Resource] = [
            remote.run(
                f"{host}-gpu-{phase}",
                ssh,
                steps.job_check(host, phase, render_health.job_check(host, gpus, phase, health.epilog_wait_s)),
                opts=pulumi.ResourceOptions(parent=self),
            )
            for phase in render_health.JOB_PHASES
        ]
        self.register_outputs({})
