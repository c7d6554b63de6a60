"""From the validated config to the Slurm renderers' plain spec (no Pulumi here)."""

from __future__ import annotations

from components.slurm.render import ClusterSpec, NodeSpec, PartitionSpec
from stacks.config import ClusterConfig, HostConfig, Role


def node_spec(host: HostConfig) -> NodeSpec:
    """A worker as Slurm sees it: the GPUs it owns (not those serving models), or none."""
    hw = host.hardware
    assert host.container_address is not None  # guaranteed by the config rules
    slurm_gpus, _ = host.gpu_owners()
    return NodeSpec(
        name=host.name,
        address=str(host.container_address),
        sockets=hw.sockets,
        cores_per_socket=hw.cores_per_socket,
        threads_per_core=hw.threads_per_core,
        real_memory_mib=hw.real_memory_mib,
        gres_type=hw.gpus.gres_type if hw.gpus and slurm_gpus and host.has(Role.GPU_WORKER) else None,
        gpu_indexes=slurm_gpus if host.has(Role.GPU_WORKER) else (),
    )


def workers(cfg: ClusterConfig) -> list[HostConfig]:
    """Every Slurm compute node, GPU workers first, in stack order."""
    return [*cfg.with_role(Role.GPU_WORKER), *cfg.with_role(Role.CPU_WORKER)]


def cluster_spec(cfg: ClusterConfig) -> ClusterSpec:
    nodes = workers(cfg)
    by_kind = {
        "gpu": tuple(h.name for h in cfg.with_role(Role.GPU_WORKER)),
        "cpu": tuple(h.name for h in cfg.with_role(Role.CPU_WORKER)),
    }
    head = cfg.slurm_head
    members = [tuple(p.hosts) if p.hosts else by_kind[p.kind] for p in cfg.slurm.partitions]
    # The default partition is the stack's, unless it has no nodes (say, no GPU workers in a lab
    # of CPU-only boards): then the first partition that has some.
    default = next((i for i, p in enumerate(cfg.slurm.partitions) if p.default and members[i]), None)
    if default is None:
        default = next((i for i, m in enumerate(members) if m), 0)
    return ClusterSpec(
        cluster_name=cfg.slurm.cluster_name,
        head_name=head.name,
        head_address=str(head.container_address),
        nodes=tuple(node_spec(h) for h in nodes),
        partitions=tuple(
            PartitionSpec(p.name, members[i], i == default, p.max_time) for i, p in enumerate(cfg.slurm.partitions)
        ),
        cgroup=cfg.cgroup_enforcement,
        enforce_associations=cfg.enforce_associations,
    )
