"""What a Slurm container gets from its host: the munge key (one step per host, the key from stdin),
the cluster's accounts (NSS extrausers files the people tier writes) and, with an external
directory, SSSD's settings (one step per host, the bind password from stdin), all read-only."""

from __future__ import annotations

import pulumi
import pulumi_docker as docker
from pydantic import Field

from components import remote
from components.base import Args
from components.people import sssd
from components.people.render import ACCOUNTS_DIR, CONTAINER_ACCOUNTS
from components.remote import Ssh
from components.slurm import steps
from components.storage.contract import NetworkStorage

# Read-only, root's: the entrypoint installs the key into the container's own /etc/munge as munge.
MUNGE_VOLUME = docker.ContainerVolumeArgs(host_path=steps.MUNGE_DIR, container_path=steps.MUNGE_DIR, read_only=True)
# The cluster's users and groups (the same ids everywhere), seen live by NSS extrausers.
ACCOUNTS_VOLUME = docker.ContainerVolumeArgs(host_path=ACCOUNTS_DIR, container_path=CONTAINER_ACCOUNTS, read_only=True)
# SSSD's settings for an external directory; the entrypoint installs them and starts sssd.
DIRECTORY_VOLUME = docker.ContainerVolumeArgs(
    host_path=sssd.SSSD_HOST_DIR, container_path=sssd.SSSD_CONTAINER_DIR, read_only=True
)


def munge_key_step(
    name: str,
    ssh: Ssh,
    network_storage: pulumi.Output[NetworkStorage],
    key_base64: pulumi.Output[str],
    parent: pulumi.Resource,
) -> pulumi.Resource:
    """Write the key (a secret Output, base64) to the host's own disk through stdin."""
    step = network_storage.apply(lambda ns: steps.munge_key(ssh.name, ns.local_mount))
    return remote.run_output(
        name, ssh, step, stdin=key_base64, secret_stdin=True, opts=pulumi.ResourceOptions(parent=parent)
    )


class DirectoryArgs(Args):
    """The external directory a Slurm container reads users from (none: only hpc:users)."""

    directory: sssd.Directory | None = Field(default=None, description="An LDAP directory read by SSSD, if any.")
    directory_password: pulumi.Output[str] | None = Field(default=None, description="Its bind password (secret).")


def directory_step(
    name: str,
    ssh: Ssh,
    directory: sssd.Directory | None,
    password: pulumi.Output[str] | None,
    parent: pulumi.Resource,
) -> tuple[list[pulumi.Resource], list[docker.ContainerVolumeArgs]]:
    """With an external directory: the step writing SSSD's settings to this host (the bind
    password, a secret Output, through stdin) and the container's volume for them."""
    if directory is None:
        return [], []
    if directory.binds and password is None:
        raise ValueError(f"{name}: the directory binds as {directory.bind_dn} but no password was given")
    step = sssd.directory_step(ssh.name, directory, steps.SLURM_CONTAINERS)
    stdin = password if directory.binds else None
    run = remote.run(
        name, ssh, step, stdin=stdin, secret_stdin=directory.binds, opts=pulumi.ResourceOptions(parent=parent)
    )
    return [run], [DIRECTORY_VOLUME]
