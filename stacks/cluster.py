"""Composition: builds the tiers in order from the validated config, passing outputs along.

Tiers do not know each other; this module hands each what it needs: the storage tier's
``network_storage`` to every consumer, the head's address to workers, the k3s provider to
workloads. Per-host work depends only on its host, the storage contract and the head.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import IPv4Address

import pulumi
import pulumi_docker as docker

from components import accounts, hostkeys
from components.accounts import SharedDir
from components.k8s.addons import ClusterAddons, ClusterAddonsArgs
from components.k8s.cluster import K3sCluster, K3sClusterArgs, K3sNode
from components.people.accounts import People, PeopleArgs
from components.people.render import Group, Person
from components.preflight import HostPreflight, HostPreflightArgs
from components.remote import Ssh
from components.slurm import smoke
from components.slurm.head import SlurmHead, SlurmHeadArgs
from components.slurm.images import HostDockerArgs
from components.slurm.job_checks import JobChecks
from components.slurm.login import LoginNode, LoginNodeArgs
from components.slurm.worker import CpuWorker, GpuWorker, GpuWorkerArgs
from components.storage import (
    ClientMount,
    ClientMountArgs,
    GlusterVolume,
    GlusterVolumeArgs,
    NetworkStorage,
    NfsGateway,
    NfsGatewayArgs,
    StorageNode,
    StorageNodeArgs,
)
from components.storage import spec as storage_spec
from stacks.backup import build_backup
from stacks.config import WORKER_ROLES, ClusterConfig, ClusterSecrets, HostConfig, Role
from stacks.inference import build_inference
from stacks.monitoring import build_monitoring
from stacks.slurm_spec import cluster_spec
from stacks.slurm_spec import workers as slurm_workers

NFS_MOUNT_VERSION = "4.1"
INFERENCE_NAMESPACE = "inference"


@dataclass
class Cluster:
    """What the composition built, for exports and tests."""

    network_storage: pulumi.Output[NetworkStorage]
    storage_nodes: dict[str, StorageNode] = field(default_factory=dict)
    mounts: dict[str, ClientMount] = field(default_factory=dict)
    nfs: dict[str, NfsGateway] = field(default_factory=dict)
    slurm_head: SlurmHead | None = None
    workers: dict[str, GpuWorker] = field(default_factory=dict)  # CpuWorker is a GpuWorker without GPUs
    logins: dict[str, LoginNode] = field(default_factory=dict)
    docker: dict[str, HostDockerArgs] = field(default_factory=dict)
    k3s: K3sCluster | None = None
    people: People | None = None
    inference_check: pulumi.Output[str] | None = None
    slurm_check: pulumi.Output[str] | None = None
    access: Access | None = None
    urls: dict[str, str] = field(default_factory=dict)


DOCKER_ROLES = (Role.SLURM_HEAD, Role.GPU_WORKER, Role.CPU_WORKER, Role.LOGIN, Role.K3S_SERVER)
GPU_ROLES = (Role.GPU_WORKER, Role.INFERENCE)


class Access:
    """How the program reaches each host: SSH with the pinned host key, every step of a host
    behind that host's preflight (``components.preflight``)."""

    def __init__(self, cfg: ClusterConfig, secrets: ClusterSecrets):
        self.secrets = secrets
        ldap = cfg.identity.ldap
        # every Slurm container reads the external directory, if the stack names one
        self.directory = {"directory": ldap.directory() if ldap else None,
                          "directory_password": secrets.ldap_bind_password}  # fmt: skip
        self.preflight: dict[str, pulumi.Resource] = {}
        for h in cfg.hosts:
            check = HostPreflight(
                f"{h.name}-preflight",
                HostPreflightArgs(
                    ssh=self._ssh(h, []),
                    docker=any(h.has(r) for r in DOCKER_ROLES),
                    nvidia=any(h.has(r) for r in GPU_ROLES),
                    nvidia_docker=h.has(Role.GPU_WORKER) and bool(h.gpu_owners()[0]),
                    fuse=any(h.has(r) for r in WORKER_ROLES),
                ),
            )
            self.preflight[h.name] = check.step

    def _ssh(self, host: HostConfig, after: list[pulumi.Resource]) -> Ssh:
        return Ssh(
            name=host.name,
            address=str(host.address),
            user=host.ssh_user,
            port=host.ssh_port,
            private_key=self.secrets.ssh_private_key,
            host_key=host.host_key,
            after=after,
        )

    def ssh(self, host: HostConfig) -> Ssh:
        return self._ssh(host, [self.preflight[host.name]])


def shared_layout(cfg: ClusterConfig) -> tuple[SharedDir, ...]:
    """Directories the other tiers keep on the shared volume."""
    dirs = [
        SharedDir("home", 0o755, 0, 0),
    ]
    if cfg.with_role(Role.K3S_SERVER):
        # NFS CSI volumes are created by a squashed root: the parent belongs to nobody.
        dirs.append(SharedDir("k8s", 0o755, accounts.NOBODY_UID, accounts.NOBODY_GID))
    return tuple(dirs)


def storage_contract(cfg: ClusterConfig) -> NetworkStorage:
    servers = tuple(storage_spec.storage_servers([str(h.address) for h in cfg.with_role(Role.STORAGE)]))
    st = cfg.storage
    return NetworkStorage(
        servers=servers,
        volume=st.volume,
        local_mount=st.mount_point,
        mount_options=storage_spec.fstab_line(list(servers), st.volume, st.mount_point).split()[3],
        nfs_server=str(cfg.ganesha_hosts[0].address),
        nfs_export=st.export_pseudo,
        nfs_version=NFS_MOUNT_VERSION if 4 in st.nfs_versions else "3",
        root_owner=f"{st.owner_uid}:{st.owner_gid}",
    )


def brick_layout(cfg: ClusterConfig) -> tuple[storage_spec.Brick, ...]:
    """Bricks grouped into replica sets in stack-file order; inside a set, and the sets among
    themselves, in address order: reordering hosts changes nothing unless it moves a host to
    another replica set (a real layout change, which the volume step refuses)."""
    st = cfg.storage
    per_set = st.bricks_per_set
    bricks = [storage_spec.Brick(h.name, str(h.address), st.brick_path) for h in cfg.with_role(Role.STORAGE)]
    by_address = lambda b: IPv4Address(b.address)  # noqa: E731
    sets = [sorted(bricks[i : i + per_set], key=by_address) for i in range(0, len(bricks), per_set)]
    return tuple(b for group in sorted(sets, key=lambda g: IPv4Address(g[0].address)) for b in group)


def build_storage(cfg: ClusterConfig, access: Access) -> Cluster:
    st = cfg.storage
    storage_hosts = cfg.with_role(Role.STORAGE)
    protect = not st.allow_destroy
    nodes = {
        h.name: StorageNode(
            h.name,
            StorageNodeArgs(
                ssh=access.ssh(h),
                brick_path=st.brick_path,
                allow_destroy=st.allow_destroy,
                protect=protect,
            ),
        )
        for h in storage_hosts
    }
    spec = storage_spec.VolumeSpec(
        name=st.volume,
        replica=st.replica,
        arbiter=st.arbiter,
        bricks=brick_layout(cfg),
        options=storage_spec.volume_options(st.owner_uid, st.owner_gid, cfg.host_addresses, st.options),
        allow_destroy=st.allow_destroy,
    )
    volume = GlusterVolume(
        st.volume,
        GlusterVolumeArgs(
            ssh=access.ssh(cfg.storage_cli_host),
            spec=spec,
            contract=storage_contract(cfg),
            protect=protect,
            daemons=[n.glusterd for n in nodes.values()],
            bricks=[n.brick for n in nodes.values()],
        ),
    )
    cluster = Cluster(network_storage=volume.network_storage, storage_nodes=nodes)
    export = storage_spec.ExportSpec(
        volume=st.volume,
        pseudo=st.export_pseudo,
        nfs_versions=tuple(st.nfs_versions),
        clients=tuple(cfg.nfs_clients),
        squash=st.squash,
        grace=st.nfs_grace,
        allow_no_root_squash=st.allow_no_root_squash,
    )
    for h in cfg.ganesha_hosts:
        cluster.nfs[h.name] = NfsGateway(
            f"{h.name}-nfs",
            NfsGatewayArgs(ssh=access.ssh(h), export=export, network_storage=volume.network_storage),
        )
    layout = shared_layout(cfg)
    for h in cfg.hosts:
        cluster.mounts[h.name] = ClientMount(
            f"{h.name}-mount",
            ClientMountArgs(ssh=access.ssh(h), network_storage=volume.network_storage, layout=layout),
        )
    return cluster


def docker_for(cfg: ClusterConfig, host: HostConfig, cluster: Cluster) -> HostDockerArgs:
    """The host's Docker daemon over SSH (keys from the SSH agent) and its macvlan settings;
    one provider per host, shared by the tiers."""
    if host.name in cluster.docker:
        return cluster.docker[host.name]
    provider = docker.Provider(
        f"{host.name}-docker",
        host=f"ssh://{host.ssh_user}@{host.address}:{host.ssh_port}",
        ssh_opts=(
            hostkeys.ssh_options(str(host.address), host.ssh_port, host.host_key)
            if host.host_key
            else ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"]
        ),
        # Docker is checked by the host's preflight before the provider is used.
        opts=pulumi.ResourceOptions(depends_on=[cluster.access.preflight[host.name]] if cluster.access else None),
    )
    net = cfg.network
    cluster.docker[host.name] = HostDockerArgs(
        provider=provider,
        parent_interface=net.parent_interface,
        subnet=str(net.subnet),
        gateway=str(net.gateway),
        ip_range=str(net.container_range),
        registry=cfg.slurm.registry,
        arch=host.hardware.arch,
    )
    return cluster.docker[host.name]


def build_slurm(cfg: ClusterConfig, access: Access, cluster: Cluster) -> None:
    head = cfg.slurm_head
    spec = cluster_spec(cfg)
    job_checks = {
        h.name: JobChecks(
            f"{h.name}-job-checks",
            access.ssh(h),
            len(h.gpu_owners()[0]) if h.has(Role.GPU_WORKER) else 0,
            spec.health,
        )
        for h in slurm_workers(cfg)
        if spec.health.job_gpu_checks
    }
    cluster.slurm_head = SlurmHead(
        head.name,
        SlurmHeadArgs(
            ssh=access.ssh(head),
            docker=docker_for(cfg, head, cluster),
            network_storage=cluster.network_storage,
            host_mount=cluster.mounts[head.name].mount,
            spec=spec,
            container_address=str(head.container_address),
            state_path=cfg.slurm.state_path,
            db_path=cfg.slurm.db_path,
            allow_destroy=cfg.slurm.allow_destroy,
            migrate=cfg.slurm.migrate,
            job_checks=[s for c in job_checks.values() for s in c.steps],
            pushed_roles=[r for r, on in (("worker", slurm_workers(cfg)), ("login", cfg.with_role(Role.LOGIN))) if on],
            **access.directory,
        ),
    )
    for h in slurm_workers(cfg):
        kind = CpuWorker if h.has(Role.CPU_WORKER) else GpuWorker
        cluster.workers[h.name] = kind(
            h.name,
            GpuWorkerArgs(
                ssh=access.ssh(h),
                head_ssh=access.ssh(head),
                docker=docker_for(cfg, h, cluster),
                network_storage=cluster.network_storage,
                host_mount=cluster.mounts[h.name].mount,
                hardware=h.hardware,
                gpu_indexes=h.gpu_owners()[0] if h.has(Role.GPU_WORKER) else (),
                container_address=str(h.container_address),
                head_name=head.name,
                head_address=str(head.container_address),
                head_container=cluster.slurm_head.container,
                munge_key=cluster.slurm_head.munge_key,
                image=cluster.slurm_head.images.get("worker"),
                max_unavailable=cfg.slurm.max_unavailable,
                drain_timeout_s=cfg.slurm.drain_timeout_seconds,
                health=spec.health,
                job_checks=job_checks[h.name].steps if h.name in job_checks else [],
                **access.directory,
            ),
        )
    if cluster.workers:  # one real job per partition once every node is back in service
        cluster.slurm_check = smoke.SmokeTest(
            "slurm-smoke-test",
            access.ssh(head),
            spec,
            after=[w.resume for w in cluster.workers.values()],
            triggers=[cluster.slurm_head.container.id, *(w.container.id for w in cluster.workers.values())],
        ).verdict


def build_login(cfg: ClusterConfig, access: Access, cluster: Cluster) -> None:
    head = cfg.slurm_head
    assert cluster.slurm_head is not None
    for h in cfg.with_role(Role.LOGIN):
        cluster.logins[h.name] = LoginNode(
            h.name,
            LoginNodeArgs(
                ssh=access.ssh(h),
                docker=docker_for(cfg, h, cluster),
                network_storage=cluster.network_storage,
                host_mount=cluster.mounts[h.name].mount,
                munge_key=cluster.slurm_head.munge_key,
                container_address=str(h.container_address),
                head_name=head.name,
                head_address=str(head.container_address),
                image=cluster.slurm_head.images.get("login"),
                **access.directory,
            ),
        )


def build_people(cfg: ClusterConfig, access: Access, cluster: Cluster) -> None:
    """Users and groups on every host, homes, Slurm associations (when the stack lists users)."""
    people = cfg.people
    if not people.users:
        return
    assert cluster.slurm_head is not None
    head = cfg.slurm_head
    cluster.people = People(
        "people",
        PeopleArgs(
            people=tuple(
                Person(u.name, u.uid, people.gid_of(u.group), tuple(u.groups), tuple(u.ssh_keys), u.slurm_account)
                for u in people.users
            ),
            groups=tuple(Group(g.name, g.gid) for g in people.groups),
            home_root=f"{cfg.storage.mount_point}/home",
            hosts=[access.ssh(h) for h in cfg.hosts],
            head=access.ssh(head),
            head_mount=cluster.mounts[head.name].mount,
        ),
    )


def build_k8s(cfg: ClusterConfig, access: Access, cluster: Cluster) -> None:
    servers = cfg.with_role(Role.K3S_SERVER)
    if not servers:
        return
    server = servers[0]
    cluster.k3s = K3sCluster(
        "k3s",
        K3sClusterArgs(
            version=cfg.k3s.version,
            server=K3sNode(ssh=access.ssh(server), hardware=server.hardware),
            agents=[K3sNode(ssh=access.ssh(h), hardware=h.hardware) for h in cfg.with_role(Role.K3S_AGENT)],
        ),
    )
    provider = cluster.k3s.provider
    addons = ClusterAddons(
        "addons",
        ClusterAddonsArgs(
            provider=provider,
            network_storage=cluster.network_storage,
            namespace=INFERENCE_NAMESPACE,
            model_cache_gib=cfg.inference.model_cache_gib,
            retain_volumes=cfg.is_prod,
        ),
    )
    if cfg.inference.models:
        docker_provider = docker_for(cfg, server, cluster).provider
        cluster.urls, cluster.inference_check = build_inference(
            cfg,
            secrets=access.secrets,
            ssh=access.ssh,
            people=cluster.people,
            server=server,
            provider=provider,
            addons=addons,
            docker_provider=docker_provider,
        )


def build(cfg: ClusterConfig, secrets: ClusterSecrets) -> Cluster:
    """Every tier, in data-flow order."""
    access = Access(cfg, secrets)
    cluster = build_storage(cfg, access)
    cluster.access = access
    build_slurm(cfg, access, cluster)
    build_login(cfg, access, cluster)
    build_people(cfg, access, cluster)
    build_k8s(cfg, access, cluster)
    build_monitoring(
        cfg,
        secrets,
        ssh={h.name: access.ssh(h) for h in cfg.hosts},
        mounts={name: m.mount for name, m in cluster.mounts.items()},
        head_container=cluster.slurm_head.container if cluster.slurm_head else None,
    )
    if cluster.slurm_head is not None:
        head = cfg.slurm_head
        build_backup(cfg, secrets, access.ssh(head), [cluster.slurm_head.container, cluster.mounts[head.name].mount])
    return cluster
