"""From the validated config to the Slurm renderers' plain spec (no Pulumi here)."""

from __future__ import annotations

from components.slurm import render_scheduling as rs
from components.slurm.render import ClusterSpec, NodeSpec, PartitionSpec
from components.slurm.render_health import Health
from stacks.config import ClusterConfig, HostConfig, Role
from stacks.config_scheduling import SLURM_QOS


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


def scheduling(cfg: ClusterConfig) -> rs.Scheduling:
    """The stack's scheduling policy (hpc:slurm.scheduling) as the renderers take it."""
    s = cfg.slurm.scheduling
    qos = tuple(
        rs.Qos(q.name, q.priority, q.max_wall, q.max_gpus_per_user, q.max_gpus_per_account, q.max_gpus,
               q.usage_factor, tuple(q.preempts))
        for q in s.qos
    )  # fmt: skip
    every_qos = tuple(dict.fromkeys([SLURM_QOS, *(q.name for q in s.qos)]))
    accounts = []
    for a in s.account_list([u.slurm_account for u in cfg.users]):
        allowed = tuple(a.qos) if a.qos is not None else every_qos
        default = a.default_qos or (SLURM_QOS if SLURM_QOS in allowed else allowed[0])
        accounts.append(rs.Account(a.name, a.parent or "root", a.shares, allowed, default, a.max_gpus,
                                   a.holds_all_gpus))  # fmt: skip
    every_worker = tuple(h.name for h in workers(cfg))
    reservations = tuple(
        rs.Reservation(r.name, tuple(r.nodes or every_worker), r.start, r.duration, tuple(r.accounts),
                       tuple(r.users), tuple(r.flags))
        for r in s.reservations
    )  # fmt: skip
    p = s.priority
    return rs.Scheduling(
        priority=rs.Priority(
            p.fairshare, p.age, p.qos, p.job_size, p.partition, p.decay_half_life, p.max_age, p.calc_period_minutes
        ),
        preemption=s.preemption,
        enforce=cfg.enforce_associations,
        qos=qos,
        accounts=tuple(accounts),
        users=tuple((u.name, u.slurm_account) for u in cfg.users),
        reservations=reservations,
    )


def partition_billing(cfg: ClusterConfig, members: tuple[str, ...]) -> str:
    """TRESBillingWeights of a partition: the stack's weights; a GPU costs, unless the stack
    says, as many CPUs as its node has per GPU (the most among the partition's nodes)."""
    b = cfg.slurm.scheduling.billing
    specs = [node_spec(cfg.host(n)) for n in members]
    per_gpu = [n.cpus / n.gpus for n in specs if n.gpus]
    gpu = b.gpu if b.gpu is not None else (max(per_gpu) if per_gpu else None)
    return rs.billing(b.cpu, b.memory_gib, gpu if per_gpu else None)


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
            PartitionSpec(p.name, members[i], i == default, p.max_time, partition_billing(cfg, members[i]))
            for i, p in enumerate(cfg.slurm.partitions)
        ),
        cgroup=cfg.cgroup_enforcement,
        scheduling=scheduling(cfg),
        health=health(cfg),
    )


def health(cfg: ClusterConfig) -> Health:
    h = cfg.slurm.health
    return Health(
        h.enabled,
        h.interval_seconds,
        tuple(h.node_states),
        h.cycle,
        h.min_free_mib,
        h.job_gpu_checks,
        h.epilog_wait_seconds,
    )
