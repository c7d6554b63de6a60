"""ClientMount: the shared volume mounted on one cluster host, with the tiers' directories."""

from __future__ import annotations

import pulumi
from pydantic import Field

from components import remote
from components.accounts import SharedDir
from components.base import Args
from components.remote import Ssh
from components.storage import render_mount
from components.storage.contract import NetworkStorage


class ClientMountArgs(Args):
    ssh: Ssh = Field(description="Connection to the host.")
    network_storage: pulumi.Output[NetworkStorage] = Field(description="The volume's contract.")
    layout: tuple[SharedDir, ...] = Field(description="Directories to keep at the volume's top.")


class ClientMount(pulumi.ComponentResource):
    """The Gluster volume in /etc/fstab and mounted on one host.

    Children: ``<name>-fstab`` (fstab entry with backup volfile servers; the live mount made to
    match it, another volume on the mount point remounted; shared directories)."""

    mount: pulumi.Resource
    """The step that leaves the volume mounted."""

    def __init__(self, name: str, args: ClientMountArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("hpc:storage:ClientMount", name, None, opts)
        host, address = args.ssh.name, args.ssh.address
        layout = args.layout
        step = args.network_storage.apply(
            lambda ns: render_mount.client_mount(
                host, list(ns.servers), ns.volume, ns.local_mount, layout, ns.root_owner, address
            )
        )
        self.mount = remote.run_output(f"{name}-fstab", args.ssh, step, opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({"mount": self.mount.id})
