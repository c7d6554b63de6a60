"""LoginNode: where researchers SSH in (keys only) and submit jobs: a container on its host."""

from __future__ import annotations

import pulumi
import pulumi_docker as docker
from pydantic import Field

from components.remote import Ssh
from components.slurm import render, steps
from components.slurm.images import HostDockerArgs, macvlan_network, pulled_image, slurm_image
from components.slurm.munge import ACCOUNTS_VOLUME, MUNGE_VOLUME, DirectoryArgs, directory_step, munge_key_step
from components.slurm.steps import LOGIN_CONTAINER
from components.storage.contract import NetworkStorage

HOST_KEYS_DIR = "/var/lib/hpc-cluster/login-ssh"  # on the host: replacing the container keeps them


class LoginNodeArgs(DirectoryArgs):
    ssh: Ssh = Field(description="Connection to the login host.")
    docker: HostDockerArgs = Field(description="The login host's Docker provider and network.")
    network_storage: pulumi.Output[NetworkStorage] = Field(description="The shared volume's contract.")
    host_mount: pulumi.Resource = Field(description="The step that mounts the shared volume on this host.")
    munge_key: pulumi.Output[str] = Field(description="The cluster's munge key, base64 (secret).")
    container_address: str = Field(description="The login container's address: where users SSH to.")
    head_name: str = Field(description="The Slurm head's host name.")
    head_address: str = Field(description="The head container's address (configless server).")
    image: pulumi.Output[str] | None = Field(
        default=None, description="The login image by digest in the registry; None: build on this host."
    )


class LoginNode(pulumi.ComponentResource):
    """Children: ``<name>-munge-key-file`` (the key on this host's disk), the macvlan network, the
    image (built here, or pulled by digest), the ``slurm-login`` container: sshd with the users'
    keys only (no passwords, no root), the Slurm client tools configured by sackd from the
    controller, the users' homes from the shared volume, their accounts from the host."""

    address: str
    """Where users SSH to."""

    def __init__(self, name: str, args: LoginNodeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("hpc:slurm:LoginNode", name, None, opts)
        self.address = args.container_address
        munge = munge_key_step(f"{name}-munge-key-file", args.ssh, args.network_storage, args.munge_key, self)
        directory, directory_volumes = directory_step(
            f"{name}-directory", args.ssh, args.directory, args.directory_password, self
        )
        network = macvlan_network(f"{name}-macvlan", args.docker, self)
        if args.image is not None:
            image: pulumi.Output[str] = pulled_image(f"{name}-image", args.image, args.docker, self).repo_digest
        else:
            image = slurm_image(f"{name}-image", "login", args.docker, self).image_name
        volumes = args.network_storage.apply(
            lambda ns: [
                MUNGE_VOLUME,
                ACCOUNTS_VOLUME,
                docker.ContainerVolumeArgs(host_path=f"{ns.local_mount}/home", container_path="/home"),
                docker.ContainerVolumeArgs(host_path=HOST_KEYS_DIR, container_path="/var/lib/hpc-login/ssh"),
                *directory_volumes,
            ]
        )
        docker.Container(
            f"{name}-container",
            name=LOGIN_CONTAINER,
            image=image,
            hostname=args.ssh.name,
            command=["login"],
            envs=[f"SLURM_CONF_SERVER={args.head_address}:{render.SLURMCTLD_PORT}"],
            hosts=[docker.ContainerHostArgs(host=args.head_name, ip=args.head_address)],
            networks_advanced=[
                docker.ContainerNetworksAdvancedArgs(name=network.name, ipv4_address=args.container_address)
            ],
            volumes=volumes,
            restart="unless-stopped",
            stop_timeout=steps.CONTAINER_STOP_TIMEOUT_S,
            must_run=True,
            opts=pulumi.ResourceOptions(
                parent=self, provider=args.docker.provider, depends_on=[args.host_mount, munge, *directory]
            ),
        )
        self.register_outputs({"address": self.address})


__all__ = ["LOGIN_CONTAINER", "LoginNode", "LoginNodeArgs"]
