"""InferenceHost: the vLLM OpenAI servers of one host, as Deployments pinned to it."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from components.base import Args
from components.hardware import NVIDIA_RUNTIME
from components.inference import capacity, download, keys, render
from components.inference.fastchat import API_KEY_SECRET, HF_TOKEN_SECRET, KEY_DIGEST_ANNOTATION

VLLM_IMAGE = "vllm/vllm-openai:v0.27.1@sha256:0a51ea5b4ae2dc5d81890e5173f54203d2a3ae0cfffe51b8fd2afd4391bfd967"
SHM_SIZE = "16Gi"
CAPACITY_ANNOTATION = "capacity.hpc-cluster.io"
CPU_REQUEST, CPU_LIMIT = str(capacity.MODEL_CPU_REQUEST), str(2 * capacity.MODEL_CPU_REQUEST)
SCRATCH_MOUNT, SCRATCH_SIZE = "/tmp", "8Gi"
# The uid root squash gives the NFS CSI driver's directories, so the model cache on the RWX volume
# is writable without root; any non-root uid works where the site's export maps ids otherwise.
MODEL_SERVER_UID = 65534
SECURITY_CONTEXT = k8s.core.v1.SecurityContextArgs(
    run_as_non_root=True,
    run_as_user=MODEL_SERVER_UID,
    run_as_group=MODEL_SERVER_UID,
    allow_privilege_escalation=False,
    read_only_root_filesystem=True,
    capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
    seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
)


class InferenceHostArgs(Args):
    provider: k8s.Provider = Field(description="The cluster's Kubernetes provider.")
    namespace: pulumi.Output[str] = Field(description="Namespace of the inference workloads.")
    node_name: str = Field(description="Kubernetes node the servers are pinned to.")
    models: list[render.ModelServer] = Field(description="The models this host serves.")
    weight_gib: dict[str, float] = Field(description="Model name -> weight size in GiB (capacity model).")
    model_cache_claim: pulumi.Output[str] = Field(description="RWX PVC holding the Hugging Face cache.")
    has_hf_token: bool = Field(description="Whether the hf-token Secret exists.")
    key_digest: pulumi.Output[str] = Field(description="Digest of the accepted API keys: a change rolls the pods.")


class InferenceHost(pulumi.ComponentResource):
    """vLLM servers on one host.

    Children per model: ``<host>-<model>-download`` Job (components/inference/download.py: the
    only pod with the HF token), ``<host>-<model>`` Deployment (created once the Job completed;
    no token, ``HF_HUB_OFFLINE``, no service account token; pinned to the node, nvidia RuntimeClass,
    pinned to its GPUs (NVIDIA_VISIBLE_DEVICES), requests and limits, readiness on
    /v1/models with the API key; every accepted key from the ``vllm-api-keys`` Secret's file
    (``--config``, components/inference/keys.py); non-root, no privilege escalation, no
    capabilities, read-only root filesystem with /tmp as scratch; its own directory of the model
    cache on the RWX PVC) and ``<host>-<model>-service``."""

    deployments: dict[str, k8s.apps.v1.Deployment]

    def __init__(self, name: str, args: InferenceHostArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("hpc:inference:InferenceHost", name, None, opts)
        opt = pulumi.ResourceOptions(parent=self, provider=args.provider)
        self.deployments = {}
        for m in args.models:
            labels = {"app": m.name, "hpc-cluster.io/model": m.name}
            memory = f"{capacity.host_memory_gib(args.weight_gib[m.name])}Gi"
            env = [
                k8s.core.v1.EnvVarArgs(name="HF_HOME", value=render.MODEL_CACHE_MOUNT),
                # the root filesystem is read-only: everything vLLM writes besides the cache goes to /tmp
                k8s.core.v1.EnvVarArgs(name="HOME", value=f"{SCRATCH_MOUNT}/home"),
                k8s.core.v1.EnvVarArgs(name="XDG_CACHE_HOME", value=f"{SCRATCH_MOUNT}/cache"),
                k8s.core.v1.EnvVarArgs(name="XDG_CONFIG_HOME", value=f"{SCRATCH_MOUNT}/config"),
                # the GPUs the capacity model placed this model on, and only those (the NVIDIA
                # container runtime exposes exactly these devices: placement is real, not advisory)
                k8s.core.v1.EnvVarArgs(name="NVIDIA_VISIBLE_DEVICES", value=",".join(map(str, m.gpus))),
                k8s.core.v1.EnvVarArgs(name="NVIDIA_DRIVER_CAPABILITIES", value="compute,utility"),
                k8s.core.v1.EnvVarArgs(
                    name="VLLM_API_KEY",
                    value_from=k8s.core.v1.EnvVarSourceArgs(
                        secret_key_ref=k8s.core.v1.SecretKeySelectorArgs(name=API_KEY_SECRET, key="key")
                    ),
                ),
            ]
            # the weights come from the download Job's cache; this pod has no token and no egress
            env.append(k8s.core.v1.EnvVarArgs(name="HF_HUB_OFFLINE", value="1"))
            job = download.download_job(
                f"{name}-{m.name}-download",
                m,
                namespace=args.namespace,
                node_name=args.node_name,
                image=VLLM_IMAGE,
                cache_claim=args.model_cache_claim,
                hf_token_secret=HF_TOKEN_SECRET if args.has_hf_token else None,
                scratch=(SCRATCH_MOUNT, SCRATCH_SIZE),
                security_context=SECURITY_CONTEXT,
                opts=opt,
            )
            self.deployments[m.name] = k8s.apps.v1.Deployment(
                f"{name}-{m.name}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=m.name,
                    namespace=args.namespace,
                    labels=labels,
                    # capacity-model inputs the gpu-memory-budget policy re-checks
                    annotations={
                        f"{CAPACITY_ANNOTATION}/params-billion": f"{m.params_billion:g}",
                        f"{CAPACITY_ANNOTATION}/gpu-index": str(m.gpu_index),
                    },
                ),
                spec=k8s.apps.v1.DeploymentSpecArgs(
                    replicas=1,
                    strategy=k8s.apps.v1.DeploymentStrategyArgs(type="Recreate"),  # GPUs are not doubled
                    selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"app": m.name}),
                    template=k8s.core.v1.PodTemplateSpecArgs(
                        metadata=k8s.meta.v1.ObjectMetaArgs(
                            labels=labels, annotations={KEY_DIGEST_ANNOTATION: args.key_digest}
                        ),
                        spec=k8s.core.v1.PodSpecArgs(
                            node_selector={"kubernetes.io/hostname": args.node_name},
                            runtime_class_name=NVIDIA_RUNTIME,
                            automount_service_account_token=False,  # it runs the model repo's code
                            containers=[
                                k8s.core.v1.ContainerArgs(
                                    name="vllm",
                                    image=VLLM_IMAGE,
                                    command=["vllm", "serve"],
                                    # every accepted key (service and users) from the Secret's file
                                    args=[*render.vllm_args(m), "--config", f"{keys.KEYS_MOUNT}/{keys.KEYS_FILE}"],
                                    # no hostPort: every way in is Traefik's (Prometheus too: exposure.py)
                                    ports=[k8s.core.v1.ContainerPortArgs(container_port=m.port, name="http")],
                                    env=env,
                                    resources=k8s.core.v1.ResourceRequirementsArgs(
                                        requests={"cpu": CPU_REQUEST, "memory": memory},
                                        limits={"cpu": CPU_LIMIT, "memory": memory},
                                    ),
                                    readiness_probe=k8s.core.v1.ProbeArgs(
                                        exec_=k8s.core.v1.ExecActionArgs(command=render.readiness_command(m.port)),
                                        initial_delay_seconds=30,
                                        period_seconds=10,
                                        timeout_seconds=8,
                                        failure_threshold=90,
                                    ),
                                    security_context=SECURITY_CONTEXT,
                                    volume_mounts=[
                                        # each model sees (and may write) only its own cache directory
                                        k8s.core.v1.VolumeMountArgs(
                                            name="model-cache", mount_path=render.MODEL_CACHE_MOUNT, sub_path=m.name
                                        ),
                                        k8s.core.v1.VolumeMountArgs(name="shm", mount_path="/dev/shm"),
                                        k8s.core.v1.VolumeMountArgs(name="scratch", mount_path=SCRATCH_MOUNT),
                                        k8s.core.v1.VolumeMountArgs(
                                            name="api-keys", mount_path=keys.KEYS_MOUNT, read_only=True
                                        ),
                                    ],
                                )
                            ],
                            volumes=[
                                k8s.core.v1.VolumeArgs(
                                    name="model-cache",
                                    persistent_volume_claim=k8s.core.v1.PersistentVolumeClaimVolumeSourceArgs(
                                        claim_name=args.model_cache_claim
                                    ),
                                ),
                                k8s.core.v1.VolumeArgs(
                                    name="shm",
                                    empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(
                                        medium="Memory", size_limit=SHM_SIZE
                                    ),
                                ),
                                k8s.core.v1.VolumeArgs(
                                    name="scratch",
                                    empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit=SCRATCH_SIZE),
                                ),
                                k8s.core.v1.VolumeArgs(
                                    name="api-keys",
                                    secret=k8s.core.v1.SecretVolumeSourceArgs(
                                        # root's file, readable by the non-root server (no fsGroup:
                                        # it would chown the model cache); only this pod mounts it
                                        secret_name=keys.USER_KEYS_SECRET,
                                        default_mode=0o444,
                                    ),
                                ),
                            ],
                        ),
                    ),
                ),
                opts=pulumi.ResourceOptions.merge(opt, pulumi.ResourceOptions(depends_on=[job])),
            )
            k8s.core.v1.Service(
                f"{name}-{m.name}-service",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=m.name, namespace=args.namespace, labels=labels),
                spec=k8s.core.v1.ServiceSpecArgs(
                    selector={"app": m.name},
                    ports=[k8s.core.v1.ServicePortArgs(port=m.port, target_port=m.port, name="http")],
                ),
                opts=opt,
            )
        self.register_outputs({})
