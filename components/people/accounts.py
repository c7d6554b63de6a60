"""People: the cluster's users and groups on every host, and their homes."""

from __future__ import annotations

import pulumi
from pydantic import Field

from components import remote
from components.base import Args
from components.people import render
from components.remote import Ssh


class PeopleArgs(Args):
    people: tuple[render.Person, ...] = Field(description="Users, with numeric ids and keys.")
    groups: tuple[render.Group, ...] = Field(description="Groups.")
    home_root: str = Field(description="Where homes live on the hosts: the shared volume's home directory.")
    hosts: list[Ssh] = Field(description="Every host of the cluster.")
    head: Ssh = Field(description="The Slurm head host (homes and accounting run there).")
    head_mount: pulumi.Resource = Field(description="The step that mounts the shared volume on the head.")


class People(pulumi.ComponentResource):
    """Children: ``<host>-accounts`` on every host (account files for the containers, the same
    users and groups on the host) and ``<head>-homes`` (homes on the shared volume, 0700). Their
    Slurm associations are the SlurmHead's ``<head>-slurm-accounting`` step."""

    accounts: dict[str, pulumi.Resource]
    """Each host's accounts step."""
    homes: pulumi.Resource
    """The step that creates the homes on the shared volume."""

    def __init__(self, name: str, args: PeopleArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("hpc:people:People", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.accounts = {
            ssh.name: remote.run(
                f"{ssh.name}-accounts",
                ssh,
                render.host_accounts(ssh.name, args.people, args.groups, args.home_root),
                opts=child,
            )
            for ssh in args.hosts
        }
        head = args.head.name
        self.homes = remote.run(
            f"{head}-homes",
            args.head,
            render.homes(head, args.people, args.home_root),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.head_mount, self.accounts[head]]),
        )
        self.register_outputs({})
