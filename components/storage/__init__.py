"""Storage tier: Gluster servers, the replicated volume, NFS-Ganesha and client mounts."""

from components.storage.contract import NetworkStorage
from components.storage.mount import ClientMount, ClientMountArgs
from components.storage.nfs import NfsGateway, NfsGatewayArgs
from components.storage.node import StorageNode, StorageNodeArgs
from components.storage.volume import GlusterVolume, GlusterVolumeArgs

__all__ = [
    "ClientMount",
    "ClientMountArgs",
    "GlusterVolume",
    "GlusterVolumeArgs",
    "NetworkStorage",
    "NfsGateway",
    "NfsGatewayArgs",
    "StorageNode",
    "StorageNodeArgs",
]
