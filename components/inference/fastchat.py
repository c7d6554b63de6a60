"""FastChat: controller and Gradio web UI over every model, the shared inference Secrets, the check."""

from __future__ import annotations

import hashlib

import pulumi
import pulumi_docker as docker
import pulumi_kubernetes as k8s
import pulumi_random as random
from pydantic import Field

from components import remote
from components.base import Args
from components.inference import render
from components.remote import Ssh
from components.scripts import Raw, RemoteScript, fill, script
from components.slurm.images import IMAGES_DIR, PLATFORMS, context_hash

API_KEY_LENGTH = 40
FASTCHAT_CONTEXT = IMAGES_DIR / "fastchat"
CONTROLLER_PORT = 21001
API_KEY_SECRET = "vllm-api-key"
KEY_DIGEST_ANNOTATION = "hpc-cluster.io/api-key-digest"
HF_TOKEN_SECRET = "hf-token"


class FastChatArgs(Args):
    provider: k8s.Provider = Field(description="The cluster's Kubernetes provider.")
    namespace: pulumi.Output[str] = Field(description="Namespace of the inference workloads.")
    models: list[render.ModelServer] = Field(description="Every served model.")
    hf_token: pulumi.Output[str] | None = Field(description="Hugging Face token (secret).")
    server_ssh: Ssh = Field(description="Connection to the k3s server host (image import, check).")
    docker_provider: docker.Provider = Field(description="Docker on the k3s server host.")
    arch: str = Field(description="CPU architecture of the k3s server host.")
    server_name: str = Field(description="Node name of the k3s server.")
    webui_port: int = Field(description="Port of the Gradio web UI.")


def import_image(host: str, image: str) -> RemoteScript:
    """Copy an image Docker built on the host into k3s's containerd (no registry needed)."""
    create = script(host, f"{host}-fastchat-import", fill(render.SCRIPTS / "fastchat-import.sh", image=Raw(image)))
    delete = script(host, f"{host}-fastchat-import-delete", f'k3s ctr images rm "docker.io/{image}" || true\n')
    return RemoteScript(f"{host}-fastchat-import", host, create, delete)


class FastChat(pulumi.ComponentResource):
    """FastChat in front of the vLLM servers.

    Children: ``<name>-api-key`` (RandomPassword) and the ``vllm-api-key`` and ``hf-token``
    Secrets, the ``api-endpoints`` ConfigMap (rendered from the model list, key as placeholder),
    the image (built on the k3s server, imported into k3s), controller and web UI Deployments
    and Services; ``check`` runs after the models are deployed and prints a JSON verdict."""

    api_key: pulumi.Output[str]
    """The vLLM API key (secret)."""
    key_digest: pulumi.Output[str]
    """A digest of the key for pod-template annotations (rotation rolls the pods)."""
    secrets: list[pulumi.Resource]
    """The Secrets model servers read (API key, Hugging Face token)."""

    def __init__(self, name: str, args: FastChatArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("hpc:inference:FastChat", name, None, opts)
        opt = pulumi.ResourceOptions(parent=self, provider=args.provider)
        key = random.RandomPassword(
            f"{name}-api-key", length=API_KEY_LENGTH, special=False, opts=pulumi.ResourceOptions(parent=self)
        )
        self.api_key = pulumi.Output.secret(key.result)
        # A digest of the key (not the key) on the pod templates: a rotated key rolls the pods
        # that read it from the Secret, which they do only at start.
        self.key_digest: pulumi.Output[str] = pulumi.Output.unsecret(
            key.result.apply(lambda k: hashlib.sha256(k.encode()).hexdigest()[:16])
        )
        md = lambda n: k8s.meta.v1.ObjectMetaArgs(name=n, namespace=args.namespace)  # noqa: E731
        self.secrets: list[pulumi.Resource] = [
            k8s.core.v1.Secret(
                f"{name}-api-key-secret",
                metadata=md(API_KEY_SECRET),
                string_data={"key": self.api_key},
                opts=opt,
            )
        ]
        if args.hf_token is not None:
            self.secrets.append(
                k8s.core.v1.Secret(
                    f"{name}-hf-token",
                    metadata=md(HF_TOKEN_SECRET),
                    string_data={"token": args.hf_token},
                    opts=opt,
                )
            )
        endpoints = k8s.core.v1.ConfigMap(
            f"{name}-api-endpoints",
            metadata=md("api-endpoints"),
            data={"api_endpoints.json": render.api_endpoints(args.models)},
            opts=opt,
        )
        image_name = f"hpc-cluster/fastchat:{context_hash(FASTCHAT_CONTEXT)}"
        image = docker.Image(
            f"{name}-image",
            image_name=image_name,
            build=docker.DockerBuildArgs(
                context=str(FASTCHAT_CONTEXT.relative_to(IMAGES_DIR.parent)),
                dockerfile=str((FASTCHAT_CONTEXT / "Dockerfile").relative_to(IMAGES_DIR.parent)),
                platform=PLATFORMS[args.arch],
            ),
            skip_push=True,
            opts=pulumi.ResourceOptions(parent=self, provider=args.docker_provider),
        )
        imported = remote.run(
            f"{name}-import",
            args.server_ssh,
            import_image(args.server_ssh.name, image_name),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[image]),
        )
        key_env = k8s.core.v1.EnvVarArgs(
            name="VLLM_API_KEY",
            value_from=k8s.core.v1.EnvVarSourceArgs(
                secret_key_ref=k8s.core.v1.SecretKeySelectorArgs(name=API_KEY_SECRET, key="key")
            ),
        )
        for role, port, env, mounts, volumes in (
            ("controller", CONTROLLER_PORT, [], [], []),
            (
                "webui",
                args.webui_port,
                [key_env],
                [k8s.core.v1.VolumeMountArgs(name="endpoints", mount_path="/etc/fastchat", read_only=True)],
                [
                    k8s.core.v1.VolumeArgs(
                        name="endpoints",
                        config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(name=endpoints.metadata.name),
                    )
                ],
            ),
        ):
            app = f"fastchat-{role}"
            labels = {"app": app}
            k8s.apps.v1.Deployment(
                f"{name}-{role}",
                metadata=md(app),
                spec=k8s.apps.v1.DeploymentSpecArgs(
                    replicas=1,
                    selector=k8s.meta.v1.LabelSelectorArgs(match_labels=labels),
                    template=k8s.core.v1.PodTemplateSpecArgs(
                        metadata=k8s.meta.v1.ObjectMetaArgs(
                            labels=labels, annotations={KEY_DIGEST_ANNOTATION: self.key_digest} if env else None
                        ),
                        spec=k8s.core.v1.PodSpecArgs(
                            node_selector={"kubernetes.io/hostname": args.server_name},
                            automount_service_account_token=False,  # FastChat never calls the Kubernetes API
                            containers=[
                                k8s.core.v1.ContainerArgs(
                                    name=role,
                                    image=image_name,
                                    image_pull_policy="IfNotPresent",
                                    args=[role],
                                    ports=[k8s.core.v1.ContainerPortArgs(container_port=port, name="http")],
                                    env=env,
                                    volume_mounts=mounts,
                                    resources=k8s.core.v1.ResourceRequirementsArgs(
                                        requests={"cpu": "250m", "memory": "512Mi"},
                                        limits={"cpu": "2", "memory": "2Gi"},
                                    ),
                                    readiness_probe=k8s.core.v1.ProbeArgs(
                                        tcp_socket=k8s.core.v1.TCPSocketActionArgs(port=port),
                                        period_seconds=10,
                                    ),
                                    security_context=k8s.core.v1.SecurityContextArgs(
                                        run_as_non_root=True,
                                        allow_privilege_escalation=False,
                                        capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
                                        seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
                                    ),
                                )
                            ],
                            volumes=volumes,
                        ),
                    ),
                ),
                opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[imported]),
            )
            k8s.core.v1.Service(
                f"{name}-{role}-service",
                metadata=md(app),
                spec=k8s.core.v1.ServiceSpecArgs(
                    selector=labels,
                    ports=[k8s.core.v1.ServicePortArgs(port=port, target_port=port, name="http")],
                ),
                opts=opt,
            )
        self._args = args
        self.register_outputs({})

    def check(self, name: str, after: list[pulumi.Resource]) -> pulumi.Output[str]:
        """Query every model's /v1/models from the k3s server once ``after`` exist."""
        a = self._args
        cmd = remote.run_output(
            name,
            a.server_ssh,
            a.namespace.apply(lambda ns: render.validation(a.server_ssh.name, ns, a.models)),
            stdin=self.api_key,
            secret_stdin=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=after),
        )
        return cmd.stdout
