"""Composition of the inference tier on k3s: FastChat, the users' API keys, the model servers of
each inference host, their exposure through Traefik and the NetworkPolicies around them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pulumi

from components.inference.capacity import GIB
from components.inference.exposure import Exposure, ExposureArgs
from components.inference.fastchat import CONTROLLER_PORT, FastChat, FastChatArgs
from components.inference.host import InferenceHost, InferenceHostArgs
from components.inference.keys import ApiKeys, ApiKeysArgs, KeyHolder
from components.inference.network import NetworkPolicies, NetworkPoliciesArgs
from components.inference.render import ModelServer
from components.k8s.addons import ClusterAddons
from components.monitoring.spec import WEB_USER
from stacks.config import ClusterConfig, HostConfig, ModelConfig, Role
from stacks.config_site import K3S_POD_NETWORK, K3S_SERVICE_NETWORK

if TYPE_CHECKING:
    import pulumi_docker as docker
    import pulumi_kubernetes as k8s

    from components.people.accounts import People
    from components.remote import Ssh
    from stacks.config import ClusterSecrets


def model_server(m: ModelConfig) -> ModelServer:
    return ModelServer(
        name=m.name,
        display_name=m.display_name,
        model_id=m.model_id,
        port=m.port,
        dtype=m.dtype,
        gpu_memory_utilization=m.gpu_memory_utilization,
        kv_cache_dtype=m.kv_cache_dtype,
        max_model_len=m.max_model_len,
        tensor_parallel_size=m.tensor_parallel_size,
        enforce_eager=m.enforce_eager,
        trust_remote_code=m.trust_remote_code,
        params_billion=m.params_billion,
        gpu_index=m.gpu_index,
    )


def key_holders(cfg: ClusterConfig) -> tuple[KeyHolder, ...]:
    people = cfg.people
    return tuple(KeyHolder(u.name, u.uid, people.gid_of(u.group), u.api_key_rotation) for u in people.users)


def build_inference(
    cfg: ClusterConfig,
    secrets: ClusterSecrets,
    ssh: Callable[[HostConfig], Ssh],
    people: People | None,
    server: HostConfig,
    provider: k8s.Provider,
    addons: ClusterAddons,
    docker_provider: docker.Provider,
) -> tuple[dict[str, str], pulumi.Output[str]]:
    """Everything that serves the models (the stack lists some): ``ssh`` connects to a host,
    ``people`` made the homes the users' keys go to (none: no users), ``docker_provider`` is
    Docker on the k3s server, where FastChat's image is built. Returns the public URLs and the
    post-deploy check's verdict."""
    models = cfg.inference.models
    namespace = addons.namespace.metadata.name
    servers_by_name = {m.name: model_server(m) for m in models}
    fastchat = FastChat(
        "fastchat",
        FastChatArgs(
            provider=provider,
            namespace=namespace,
            models=list(servers_by_name.values()),
            hf_token=secrets.hf_token,
            server_ssh=ssh(server),
            docker_provider=docker_provider,
            arch=server.hardware.arch,
            server_name=server.name,
            webui_port=cfg.inference.webui_port,
        ),
        opts=pulumi.ResourceOptions(depends_on=[addons]),
    )
    keys = ApiKeys(
        "api-keys",
        ApiKeysArgs(
            provider=provider,
            namespace=namespace,
            holders=key_holders(cfg),
            service_key=fastchat.api_key,
            head=ssh(cfg.slurm_head) if people is not None else None,
            home_root=f"{cfg.storage.mount_point}/home",
            after=[people.homes] if people is not None else [],
        ),
        opts=pulumi.ResourceOptions(depends_on=[addons]),
    )
    deployments: list[pulumi.Resource] = []
    for host in cfg.with_role(Role.INFERENCE):
        placed = [m for m in models if m.host == host.name]
        if not placed:
            continue
        ih = InferenceHost(
            f"{host.name}-inference",
            InferenceHostArgs(
                provider=provider,
                namespace=namespace,
                node_name=host.name,
                models=[servers_by_name[m.name] for m in placed],
                weight_gib={m.name: m.load().weight_bytes / GIB for m in placed},
                model_cache_claim=addons.model_cache.metadata.name,
                has_hf_token=secrets.hf_token is not None,
                key_digest=keys.digest,
            ),
            # the Secrets, not the FastChat component: its check waits for these Deployments
            opts=pulumi.ResourceOptions(depends_on=[*fastchat.secrets, *keys.secrets, addons.model_cache]),
        )
        deployments.extend(ih.deployments.values())
    exposure = Exposure(
        "public",
        ExposureArgs(
            provider=provider,
            namespace=namespace,
            public_host=cfg.inference.public_host or str(server.address),
            models=list(servers_by_name.values()),
            webui_service="fastchat-webui",
            webui_port=cfg.inference.webui_port,
            tls_certificate=secrets.tls_certificate,
            tls_key=secrets.tls_key,
            metrics_user=WEB_USER,
            metrics_password=secrets.monitoring_password if cfg.monitoring.enabled else None,
        ),
        opts=pulumi.ResourceOptions(depends_on=[addons, *keys.secrets]),
    )
    NetworkPolicies(
        "inference-network",
        NetworkPoliciesArgs(
            provider=provider,
            namespace=namespace,
            model_ports=[m.port for m in models],
            webui_port=cfg.inference.webui_port,
            controller_port=CONTROLLER_PORT,
            server_address=str(server.address),
            cluster_subnet=str(cfg.network.subnet),
            unreachable=[str(n) for n in (K3S_POD_NETWORK, K3S_SERVICE_NETWORK, cfg.network.container_range)],
        ),
        opts=pulumi.ResourceOptions(depends_on=[addons]),
    )
    return exposure.urls, fastchat.check("inference-check", deployments)
