"""What a Slurm container gets from its host: the munge key (one step per host, the key from stdin)
and the cluster's accounts (NSS extrausers files the people tier writes), both read-only."""

from __future__ import annotations

import pulumi
import pulumi_docker as docker

from components import remote
from components.people.render import ACCOUNTS_DIR, CONTAINER_ACCOUNTS
from components.remote import Ssh
from components.slurm import steps
from components.storage.contract import NetworkStorage

# Read-only: munged reads the key and keeps its seed under /run/munge.
MUNGE_VOLUME = docker.ContainerVolumeArgs(host_path=steps.MUNGE_DIR, container_path="/etc/munge", read_only=True)
# The cluster's users and groups (the same ids everywhere), seen live by NSS extrausers.
ACCOUNTS_VOLUME = docker.ContainerVolumeArgs(host_path=ACCOUNTS_DIR, container_path=CONTAINER_ACCOUNTS, read_only=True)


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
