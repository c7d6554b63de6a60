"""Composition: builds the tiers in order from the validated config, passing outputs along.

Tiers do not know each other; this module hands each what it needs: the storage tier's
``network_storage`` to every consumer, the head's address to workers, the k3s provider to
workloads. Per-host work depends only on its host, the storage contract and the head.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_docker as docker

from components import accounts
from components.accounts import SharedDir
from components.remote import Ssh
from components.slurm.head import SlurmHead, SlurmHeadArgs
from components.slurm.images import HostDockerArgs
from components.slurm.worker import GpuWorker, GpuWorkerArgs
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
from components.storage import render as storage_render
from stacks.config import ClusterConfig, ClusterSecrets, HostConfig, Role
from stacks.slurm_spec import cluster_spec

NFS_MOUNT_VERSION = "4.1"


@dataclass
class Cluster:
    """What the composition built, for exports and tests."""

    network_storage: pulumi.Output[NetworkStorage]
    storage_nodes: dict[str, StorageNode] = field(default_factory=dict)
    mounts: dict[str, ClientMount] = field(default_factory=dict)
    nfs: dict[str, NfsGateway] = field(default_factory=dict)
    slurm_head: SlurmHead | None = None
    workers: dict[str, GpuWorker] = field(default_factory=dict)


def ssh_for(host: HostConfig, secrets: ClusterSecrets) -> Ssh:
    return Ssh(
        name=host.name,
        address=str(host.address),
        user=host.ssh_user,
        port=host.ssh_port,
        private_key=secrets.ssh_private_key,
    )


def shared_layout(cfg: ClusterConfig) -> tuple[SharedDir, ...]:
    """Directories the other tiers keep on the shared volume."""
    dirs = [
        SharedDir("home", 0o755, 0, 0),
        SharedDir("munge", 0o700, accounts.MUNGE_UID, accounts.MUNGE_GID),
        SharedDir("slurm", 0o755, accounts.SLURM_UID, accounts.SLURM_GID),
    ]
    if cfg.with_role(Role.K3S_SERVER):
        # NFS CSI volumes are created by a squashed root: the parent belongs to nobody.
        dirs.append(SharedDir("k8s", 0o755, accounts.NOBODY_UID, accounts.NOBODY_GID))
    return tuple(dirs)


def storage_contract(cfg: ClusterConfig) -> NetworkStorage:
    servers = tuple(str(h.address) for h in cfg.with_role(Role.STORAGE))
    st = cfg.storage
    return NetworkStorage(
        servers=servers,
        volume=st.volume,
        local_mount=st.mount_point,
        mount_options=storage_render.fstab_line(list(servers), st.volume, st.mount_point).split()[3],
        nfs_server=str(cfg.ganesha_hosts[0].address),
        nfs_export=st.export_pseudo,
        nfs_version=NFS_MOUNT_VERSION if 4 in st.nfs_versions else "3",
    )


def build_storage(cfg: ClusterConfig, secrets: ClusterSecrets) -> Cluster:
    st = cfg.storage
    storage_hosts = cfg.with_role(Role.STORAGE)
    protect = not st.allow_destroy
    nodes = {
        h.name: StorageNode(
            h.name,
            StorageNodeArgs(
                ssh=ssh_for(h, secrets),
                brick_path=st.brick_path,
                allow_destroy=st.allow_destroy,
                protect=protect,
            ),
        )
        for h in storage_hosts
    }
    spec = storage_render.VolumeSpec(
        name=st.volume,
        replica=st.replica,
        arbiter=st.arbiter,
        bricks=tuple(storage_render.Brick(h.name, str(h.address), st.brick_path) for h in storage_hosts),
        options=tuple(storage_render.volume_options(st.owner_uid, st.owner_gid, st.options).items()),
        allow_destroy=st.allow_destroy,
    )
    volume = GlusterVolume(
        st.volume,
        GlusterVolumeArgs(
            ssh=ssh_for(storage_hosts[0], secrets),
            spec=spec,
            contract=storage_contract(cfg),
            protect=protect,
            daemons=[n.glusterd for n in nodes.values()],
            bricks=[n.brick for n in nodes.values()],
        ),
    )
    cluster = Cluster(network_storage=volume.network_storage, storage_nodes=nodes)
    export = storage_render.ExportSpec(
        volume=st.volume,
        pseudo=st.export_pseudo,
        nfs_versions=tuple(st.nfs_versions),
        clients=tuple(cfg.nfs_clients),
        squash=st.squash,
        grace=st.nfs_grace,
    )
    for h in cfg.ganesha_hosts:
        cluster.nfs[h.name] = NfsGateway(
            f"{h.name}-nfs",
            NfsGatewayArgs(ssh=ssh_for(h, secrets), export=export, network_storage=volume.network_storage),
        )
    layout = shared_layout(cfg)
    for h in cfg.hosts:
        cluster.mounts[h.name] = ClientMount(
            f"{h.name}-mount",
            ClientMountArgs(ssh=ssh_for(h, secrets), network_storage=volume.network_storage, layout=layout),
        )
    return cluster


def docker_for(cfg: ClusterConfig, host: HostConfig) -> HostDockerArgs:
    """The host's Docker daemon over SSH (keys from the SSH agent) and its macvlan settings."""
    provider = docker.Provider(
        f"{host.name}-docker",
        host=f"ssh://{host.ssh_user}@{host.address}:{host.ssh_port}",
        ssh_opts=["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"],
    )
    net = cfg.network
    return HostDockerArgs(
        provider=provider,
        parent_interface=net.parent_interface,
        subnet=str(net.subnet),
        gateway=str(net.gateway),
        ip_range=str(net.container_range),
        registry=cfg.slurm.registry,
        arch=host.hardware.arch,
    )


def build_slurm(cfg: ClusterConfig, secrets: ClusterSecrets, cluster: Cluster) -> None:
    head = cfg.slurm_head
    spec = cluster_spec(cfg)
    cluster.slurm_head = SlurmHead(
        head.name,
        SlurmHeadArgs(
            ssh=ssh_for(head, secrets),
            docker=docker_for(cfg, head),
            network_storage=cluster.network_storage,
            host_mount=cluster.mounts[head.name].mount,
            spec=spec,
            container_address=str(head.container_address),
            state_path=cfg.slurm.state_path,
            db_path=cfg.slurm.db_path,
            allow_destroy=cfg.slurm.allow_destroy,
        ),
    )
    for h in cfg.with_role(Role.GPU_WORKER):
        cluster.workers[h.name] = GpuWorker(
            h.name,
            GpuWorkerArgs(
                ssh=ssh_for(h, secrets),
                head_ssh=ssh_for(head, secrets),
                docker=docker_for(cfg, h),
                network_storage=cluster.network_storage,
                host_mount=cluster.mounts[h.name].mount,
                hardware=h.hardware,
                container_address=str(h.container_address),
                head_name=head.name,
                head_address=str(head.container_address),
            ),
        )


def build(cfg: ClusterConfig, secrets: ClusterSecrets) -> Cluster:
    """Every tier, in data-flow order."""
    cluster = build_storage(cfg, secrets)
    build_slurm(cfg, secrets, cluster)
    return cluster
