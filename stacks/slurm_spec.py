"""From the validated config to the Slurm renderers' plain spec (no Pulumi here)."""

from __future__ import annotations

from components.slurm.render import ClusterSpec, NodeSpec, PartitionSpec
from stacks.config import ClusterConfig, HostConfig, Role


def node_spec(host: HostConfig) -> NodeSpec:
    hw = host.hardware
    assert hw.gpus is not None and host.container_address is not None  # guaranteed by the config rules
    return NodeSpec(
        name=host.name,
        address=str(host.container_address),
        sockets=hw.sockets,
        cores_per_socket=hw.cores_per_socket,
        threads_per_core=hw.threads_per_core,
        real_memory_mib=hw.real_memory_mib,
        gres_type=hw.gpus.gres_type,
        gpus=hw.gpus.count,
    )


def cluster_spec(cfg: ClusterConfig) -> ClusterSpec:
    workers = cfg.with_role(Role.GPU_WORKER)
    names = tuple(h.name for h in workers)
    head = cfg.slurm_head
    return ClusterSpec(
        cluster_name=cfg.slurm.cluster_name,
        head_name=head.name,
        head_address=str(head.container_address),
        nodes=tuple(node_spec(h) for h in workers),
        partitions=tuple(
            PartitionSpec(p.name, tuple(p.hosts) if p.hosts else names, p.default, p.max_time)
            for p in cfg.slurm.partitions
        ),
        cgroup=cfg.cgroup_enforcement,
        enforce_associations=cfg.enforce_associations,
    )
