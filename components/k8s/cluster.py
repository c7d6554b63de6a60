"""K3sCluster: the k3s server and agents over SSH, and the Kubernetes provider built from it."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random
from pulumi_command import remote as command_remote
from pydantic import Field

from components import remote
from components.base import Args
from components.hardware import HardwareProfile
from components.k8s import render
from components.remote import Ssh

TOKEN_LENGTH = 48
LABEL_PREFIX = "hpc-cluster.io"


class K3sNode(Args):
    ssh: Ssh = Field(description="Connection to the node.")
    hardware: HardwareProfile = Field(description="The node's profile (labels).")


class K3sClusterArgs(Args):
    version: str = Field(description="Pinned k3s release.")
    server: K3sNode = Field(description="The server node.")
    agents: list[K3sNode] = Field(description="Agent nodes.")


def node_labels(hw: HardwareProfile) -> dict[str, str]:
    """Labels from the hardware profile (GPU model, count, memory)."""
    if hw.gpus is None:
        return {f"{LABEL_PREFIX}/gpu-count": "0"}
    return {
        f"{LABEL_PREFIX}/gpu-model": hw.gpus.gres_type,
        f"{LABEL_PREFIX}/gpu-count": str(hw.gpus.count),
        f"{LABEL_PREFIX}/gpu-memory-gib": str(int(hw.gpus.memory_gib)),
        "nvidia.com/gpu.present": "true",
    }


class K3sCluster(pulumi.ComponentResource):
    """k3s from the pinned release binary.

    Children: ``<name>-token`` (RandomPassword join token, stdin only), ``<server>-k3s`` and one
    ``<agent>-k3s`` per agent, ``<server>-kubeconfig`` (read back as a secret), the
    ``<name>-k8s`` provider every workload uses, and one ``<node>-labels`` NodePatch per node."""

    provider: k8s.Provider
    """Explicit Kubernetes provider for this cluster (kubeconfig is secret)."""

    def __init__(self, name: str, args: K3sClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("hpc:k8s:K3sCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        token = random.RandomPassword(f"{name}-token", length=TOKEN_LENGTH, special=False, opts=child)
        s = args.server.ssh
        server = remote.run(
            f"{s.name}-k3s",
            s,
            render.install(
                s.name,
                "server",
                args.version,
                args.server.hardware.arch,
                render.server_config(s.name, s.address),
            ),
            stdin=token.result,
            secret_stdin=True,
            opts=child,
        )
        agents = [
            remote.run(
                f"{a.ssh.name}-k3s",
                a.ssh,
                render.install(
                    a.ssh.name,
                    "agent",
                    args.version,
                    a.hardware.arch,
                    render.agent_config(a.ssh.name, a.ssh.address, s.address),
                ),
                stdin=token.result,
                secret_stdin=True,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[server]),
            )
            for a in args.agents
        ]
        step = render.read_kubeconfig(s.name, s.address)
        kubeconfig = command_remote.Command(
            f"{s.name}-kubeconfig",
            connection=s.connection(),
            create=s.wrap(step.create),
            logging=command_remote.Logging.NONE,
            add_previous_output_in_env=False,
            opts=s.options(
                pulumi.ResourceOptions(parent=self, depends_on=[server], additional_secret_outputs=["stdout"])
            ),
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=kubeconfig.stdout.apply(pulumi.Output.secret),
            enable_server_side_apply=True,
            opts=child,
        )
        for node, joined in [(args.server, server), *zip(args.agents, agents, strict=True)]:
            k8s.core.v1.NodePatch(
                f"{node.ssh.name}-labels",
                metadata=k8s.meta.v1.ObjectMetaPatchArgs(name=node.ssh.name, labels=node_labels(node.hardware)),
                opts=pulumi.ResourceOptions(parent=self, provider=self.provider, depends_on=[joined]),
            )
        self.register_outputs({})
