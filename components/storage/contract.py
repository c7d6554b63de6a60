"""The storage tier's promise to every other tier: how to mount the shared volume."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class NetworkStorage(BaseModel):
    """What a consumer needs to mount the shared volume (one contract, not typed twice)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    servers: tuple[str, ...] = Field(description="Gluster servers; the first serves the volfile.")
    volume: str = Field(description="Gluster volume name (the remote mount).")
    local_mount: str = Field(description="Where hosts mount the volume.")
    fs_type: str = Field(default="glusterfs", description="Filesystem type for the native mount.")
    mount_options: str = Field(description="fstab options of the native mount.")
    nfs_server: str = Field(description="Address of the NFS-Ganesha server.")
    nfs_export: str = Field(description="NFSv4 pseudo path of the export.")
    nfs_version: str = Field(description="NFS version clients mount (e.g. '4.1').")
    root_owner: str = Field(default="0:0", description="uid:gid of the volume root (mode 0755): root unless set.")
