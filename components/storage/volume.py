"""GlusterVolume: the trusted pool, the replicated volume and its options."""

from __future__ import annotations

import pulumi
from pydantic import Field

from components import remote
from components.base import Args
from components.remote import Ssh
from components.storage import render_gluster
from components.storage.contract import NetworkStorage
from components.storage.spec import VolumeSpec


class GlusterVolumeArgs(Args):
    ssh: Ssh = Field(description="Connection to the storage host that runs the gluster CLI.")
    spec: VolumeSpec = Field(description="What the volume must look like.")
    contract: NetworkStorage = Field(description="How consumers mount it once it is ready.")
    protect: bool = Field(description="Protect the volume step from deletion.")
    daemons: list[pulumi.Resource] = Field(description="Steps that leave glusterd running on each node.")
    bricks: list[pulumi.Resource] = Field(description="Steps that prepare each node's brick directory.")


class GlusterVolume(pulumi.ComponentResource):
    """A replicated Gluster volume across the storage nodes.

    Children: ``<name>-peers`` (probe what the pool does not know, wait until connected),
    ``<name>-volume`` (create after checking every brick host is connected, or verify; start;
    wait for a brick quorum; never deletes data unless allowed), ``<name>-options`` (quorum,
    owner uid/gid, extras; canonical names; removed options reset)."""

    network_storage: pulumi.Output[NetworkStorage]
    """The mount contract, resolved once the volume is started and its options applied."""

    def __init__(self, name: str, args: GlusterVolumeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("hpc:storage:GlusterVolume", name, None, opts)
        first = args.ssh.name
        others = [b.address for b in args.spec.bricks if b.host != first]
        others = sorted(set(others), key=others.index)
        peers = remote.run(
            f"{name}-peers",
            args.ssh,
            render_gluster.peers(first, args.spec.name, others),
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.daemons),
        )
        self.volume = remote.run(
            f"{name}-volume",
            args.ssh,
            render_gluster.volume(first, args.spec),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[peers, *args.bricks],
                protect=args.protect,
                retain_on_delete=not args.spec.allow_destroy,
            ),
        )
        self.options = remote.run(
            f"{name}-options",
            args.ssh,
            render_gluster.options(first, args.spec.name, args.spec.options),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.volume]),
        )
        contract = args.contract
        self.network_storage = self.options.id.apply(lambda _: contract)
        self.register_outputs({"networkStorage": self.network_storage.apply(lambda c: c.model_dump())})
