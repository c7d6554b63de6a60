"""SlurmHead: slurmctld (configless), slurmdbd and MariaDB in one container on the head host."""

from __future__ import annotations

import pulumi
import pulumi_docker as docker
import pulumi_random as random
from pydantic import Field

from components import remote
from components.remote import Ssh
from components.slurm import render, render_scheduling, steps
from components.slurm.images import HostDockerArgs, image_ref, macvlan_network, slurm_image
from components.slurm.munge import ACCOUNTS_VOLUME, MUNGE_VOLUME, DirectoryArgs, directory_step, munge_key_step
from components.storage.contract import NetworkStorage

MUNGE_KEY_BYTES = 1024
# Where the accounting step lived before it moved here: the root's hpc:people:People "people".
OLD_ACCOUNTING_PARENT = ("people", "hpc:people:People")
DB_PASSWORD_LENGTH = 40


class SlurmHeadArgs(DirectoryArgs):
    ssh: Ssh = Field(description="Connection to the head host.")
    docker: HostDockerArgs = Field(description="The head host's Docker provider and network.")
    network_storage: pulumi.Output[NetworkStorage] = Field(description="The shared volume's contract.")
    host_mount: pulumi.Resource = Field(description="The step that mounts the shared volume on the head host.")
    spec: render.ClusterSpec = Field(description="What slurm.conf describes.")
    container_address: str = Field(description="The head container's macvlan address.")
    state_path: str = Field(description="Host path of slurmctld's StateSaveLocation.")
    db_path: str = Field(description="Host path of the accounting database.")
    allow_destroy: bool = Field(description="Whether deleting the stack may remove state and DB.")
    migrate: bool = Field(default=False, description="Copy state and DB to changed paths instead of refusing.")
    job_checks: list[pulumi.Resource] = Field(
        default_factory=list, description="Every slurmd node's prolog/epilog steps: slurm.conf names them only after."
    )
    pushed_roles: list[str] = Field(default_factory=list, description="Roles whose image this host builds and pushes.")


class SlurmHead(pulumi.ComponentResource):
    """The Slurm controller.

    Children: ``<name>-munge-key`` (RandomBytes) and ``<name>-db-password`` (RandomPassword),
    ``<name>-munge-key-file`` step (the key on this host's disk), ``<name>-slurm-secrets`` (DB password
    file, slurmdbd.conf), ``<name>-slurm-state`` (durable, protected), one step per config file
    (reconfigures a running controller), the macvlan network, the image (with a registry also the
    workers' image, pushed by digest), the container, ``<name>-slurm-accounting`` (QoS, the
    account tree, users' associations) and ``<name>-slurm-reservations``."""

    address: str
    """Address of the head container (slurmctld, slurmdbd)."""
    munge_key: pulumi.Output[str]
    """The cluster's munge key, base64 (secret): every Slurm host writes it to its own disk."""
    images: dict[str, pulumi.Output[str]]
    """With a registry: the other roles' images (worker, login) by digest, built once on this
    host; else empty (each host builds its own)."""
    container: docker.Container
    """The head container."""
    config_steps: list[pulumi.Resource]
    """Steps that install slurm.conf, gres.conf and cgroup.conf."""
    accounting: pulumi.Resource
    """The step that puts QoS, accounts and users' associations into slurmdbd."""

    def __init__(self, name: str, args: SlurmHeadArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("hpc:slurm:SlurmHead", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        host = args.ssh.name
        self.address = args.container_address
        key = random.RandomBytes(f"{name}-munge-key", length=MUNGE_KEY_BYTES, opts=child)
        password = random.RandomPassword(f"{name}-db-password", length=DB_PASSWORD_LENGTH, special=False, opts=child)

        self.munge_key = pulumi.Output.secret(key.base64)
        munge = munge_key_step(f"{name}-munge-key-file", args.ssh, args.network_storage, self.munge_key, self)
        directory, directory_volumes = directory_step(
            f"{name}-directory", args.ssh, args.directory, args.directory_password, self
        )
        secrets = remote.run(
            f"{name}-slurm-secrets",
            args.ssh,
            steps.head_secrets(host),
            stdin=password.result,
            secret_stdin=True,
            opts=child,
        )
        protect = not args.allow_destroy
        state = remote.run(
            f"{name}-slurm-state",
            args.ssh,
            steps.state_dirs(host, args.state_path, args.db_path, args.allow_destroy, args.migrate),
            opts=pulumi.ResourceOptions(parent=self, protect=protect, retain_on_delete=protect),
        )
        files = {
            "slurm.conf": render.slurm_conf(args.spec),
            "gres.conf": render.gres_conf(args.spec.nodes),
            "cgroup.conf": render.cgroup_conf(args.spec.cgroup),
        }
        # slurm.conf first: the other files are only read along with it (reconfigure/restart).
        self.config_steps = []
        for fname, text in files.items():
            self.config_steps.append(
                remote.run(
                    f"{name}-{fname.replace('.', '-')}",
                    args.ssh,
                    steps.config_file(host, fname, text),
                    opts=pulumi.ResourceOptions(
                        parent=self, depends_on=self.config_steps[:1] if self.config_steps else args.job_checks
                    ),
                )
            )
        network = macvlan_network(f"{name}-macvlan", args.docker, self)
        image = slurm_image(f"{name}-image", "head", args.docker, self)
        registry = args.docker.registry
        # With a registry, the other roles' images are built once, here, and pulled by digest.
        self.images: dict[str, pulumi.Output[str]] = {
            role: image_ref(slurm_image(f"{name}-{role}-image", role, args.docker, self), registry)
            for role in (args.pushed_roles if registry else [])
        }
        volumes = [
            docker.ContainerVolumeArgs(host_path=steps.CONFIG_DIR, container_path="/etc/slurm", read_only=True),
            docker.ContainerVolumeArgs(
                host_path=steps.DB_PASSWORD_FILE,
                container_path="/run/secrets/slurm-db-password",
                read_only=True,
            ),
            docker.ContainerVolumeArgs(host_path=args.state_path, container_path=render.STATE_DIR),
            docker.ContainerVolumeArgs(host_path=args.db_path, container_path="/var/lib/mysql"),
        ]
        shared = args.network_storage.apply(
            lambda ns: [
                MUNGE_VOLUME,
                ACCOUNTS_VOLUME,
                docker.ContainerVolumeArgs(host_path=f"{ns.local_mount}/home", container_path="/home"),
                *directory_volumes,
            ]
        )
        self.container = docker.Container(
            f"{name}-container",
            name=steps.HEAD_CONTAINER,
            image=image_ref(image, registry),
            hostname=host,
            command=["head"],
            networks_advanced=[docker.ContainerNetworksAdvancedArgs(name=network.name, ipv4_address=self.address)],
            volumes=shared.apply(lambda s: [*volumes, *s]),
            restart="unless-stopped",
            stop_timeout=steps.CONTAINER_STOP_TIMEOUT_S,
            must_run=True,
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.docker.provider,
                depends_on=[args.host_mount, munge, *directory, secrets, state, *self.config_steps],
            ),
        )
        after_container = pulumi.ResourceOptions(parent=self, depends_on=[self.container])
        self.accounting = remote.run(
            f"{name}-slurm-accounting",
            args.ssh,
            render_scheduling.accounting(host, steps.HEAD_CONTAINER, args.spec.cluster_name, args.spec.scheduling),
            # the step was the People component's before the scheduling policy: same resource
            opts=pulumi.ResourceOptions.merge(
                after_container,
                pulumi.ResourceOptions(
                    aliases=[pulumi.Alias(parent=pulumi.resource.create_urn(*OLD_ACCOUNTING_PARENT))]
                ),
            ),
        )
        remote.run(
            f"{name}-slurm-reservations",
            args.ssh,
            render_scheduling.reservations(host, steps.HEAD_CONTAINER, args.spec.scheduling),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.accounting]),
        )
        self.register_outputs({"address": self.address, "container": self.container.id})
