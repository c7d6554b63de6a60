"""SmokeTest: the post-deploy check, one real job per partition once every node is up, and an
MPI job across two nodes of the largest partition. Its verdict is a stack output
(``slurmCheck``); a failed job fails the ``up`` with one line naming the partition and the node
(components/slurm/scripts/smoke-test.sh)."""

from __future__ import annotations

import pulumi

from components import remote
from components.remote import Ssh
from components.slurm import steps
from components.slurm.render import ClusterSpec


def partitions(spec: ClusterSpec) -> list[tuple[str, bool]]:
    """Each partition with nodes, and whether it has GPUs (its job then asks for one)."""
    gpus = {n.name for n in spec.nodes if n.gpus}
    return [(p.name, any(n in gpus for n in p.nodes)) for p in spec.partitions if p.nodes]


def mpi_partition(spec: ClusterSpec) -> str | None:
    """Where the MPI job runs: the partition with the most nodes (the first of equals), if it has
    two; a cluster of one-node partitions has no MPI check."""
    best = max(spec.partitions, key=lambda p: len(p.nodes), default=None)
    return best.name if best is not None and len(best.nodes) >= 2 else None


class SmokeTest(pulumi.ComponentResource):
    """Child: ``<head>-slurm-smoke-test``, on the head, after ``after`` (the nodes' resume steps),
    run again whenever ``triggers`` (the Slurm containers' ids: a new image or spec) change."""

    TYPE = "hpc:slurm:SmokeTest"

    verdict: pulumi.Output[str]
    """The JSON verdict: per partition its result (ok, busy, failed), node and job."""

    def __init__(
        self,
        name: str,
        head_ssh: Ssh,
        spec: ClusterSpec,
        *,
        after: list[pulumi.Resource],
        triggers: list[pulumi.Input[str]],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(self.TYPE, name, None, opts)
        cmd = remote.run_with_triggers(
            f"{head_ssh.name}-slurm-smoke-test",
            head_ssh,
            steps.smoke_test(head_ssh.name, partitions(spec), mpi_partition(spec)),
            triggers,
            opts=pulumi.ResourceOptions(parent=self, depends_on=after),
        )
        self.verdict = cmd.stdout
        self.register_outputs({"verdict": self.verdict})
