"""StorageNode: one Gluster server (glusterd and its brick directory) over SSH."""

from __future__ import annotations

import pulumi
from pydantic import Field

from components import remote
from components.base import Args
from components.remote import Ssh
from components.storage import render_gluster


class StorageNodeArgs(Args):
    ssh: Ssh = Field(description="Connection to the storage host.")
    brick_path: str = Field(description="Brick directory on this host.")
    allow_destroy: bool = Field(description="Whether deleting the node may remove brick data.")
    protect: bool = Field(description="Protect the brick step from deletion (pulumi protect).")


class StorageNode(pulumi.ComponentResource):
    """A Gluster server.

    Children: ``<name>-glusterd`` (install and run glusterd, install the glusterq helper),
    ``<name>-brick`` (brick directory, a failed create's stale stamp cleared; its delete keeps
    the data unless allowed)."""

    glusterd: pulumi.Resource
    """The step that leaves glusterd installed, enabled and answering."""
    brick: pulumi.Resource
    """The step that prepares the brick directory."""

    def __init__(self, name: str, args: StorageNodeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("hpc:storage:StorageNode", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        host = args.ssh.name
        self.glusterd = remote.run(f"{name}-glusterd", args.ssh, render_gluster.glusterd(host), opts=child)
        self.brick = remote.run(
            f"{name}-brick",
            args.ssh,
            render_gluster.brick(host, args.brick_path, args.allow_destroy),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[self.glusterd],  # it asks glusterd (via glusterq) which volume ids exist
                protect=args.protect,
                retain_on_delete=not args.allow_destroy,
            ),
        )
        self.register_outputs({"glusterd": self.glusterd.id, "brick": self.brick.id})
