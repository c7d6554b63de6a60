"""NfsGateway: NFS-Ganesha exporting the Gluster volume (FSAL_GLUSTER) from one storage host."""

from __future__ import annotations

import pulumi
from pydantic import Field

from components import remote
from components.base import Args
from components.remote import Ssh
from components.storage import render_ganesha
from components.storage.contract import NetworkStorage
from components.storage.spec import ExportSpec


class NfsGatewayArgs(Args):
    ssh: Ssh = Field(description="Connection to the storage host that runs NFS-Ganesha.")
    export: ExportSpec = Field(description="What to export, to whom.")
    network_storage: pulumi.Output[NetworkStorage] = Field(
        description="The volume's contract: the gateway starts once the volume is ready."
    )


class NfsGateway(pulumi.ComponentResource):
    """NFS-Ganesha on one storage host.

    Children: ``<name>-install`` (packages), ``<name>-config`` (boot-order drop-in; ganesha.conf
    through stdin, export changes applied in place, a restart only for other settings; fails
    unless Ganesha itself serves the export, repairing one that started before the volume)."""

    config: pulumi.Resource
    """The step that installs ganesha.conf and keeps NFS-Ganesha running."""

    def __init__(self, name: str, args: NfsGatewayArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("hpc:storage:NfsGateway", name, None, opts)
        host = args.ssh.name
        versions = args.export.nfs_versions
        install = remote.run(
            f"{name}-install",
            args.ssh,
            render_ganesha.ganesha_install(host, versions),
            opts=pulumi.ResourceOptions(parent=self),
        )
        conf = render_ganesha.ganesha_conf(args.export, args.ssh.address)
        step = render_ganesha.ganesha_config(host, conf, args.export.volume, versions, args.export.allow_no_root_squash)
        # Ganesha must start after the volume and its owner options exist (data flow, not order).
        stdin = args.network_storage.apply(lambda _: conf)
        self.config = remote.run(
            f"{name}-config",
            args.ssh,
            step,
            stdin=stdin,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[install]),
        )
        self.register_outputs({"config": self.config.id})
