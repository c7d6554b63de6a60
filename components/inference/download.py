"""The one-shot Job that downloads a model's weights: the only pod that holds the HF token.

The serving pods run ``--trust-remote-code`` for some models: code from the model's repository
runs in them. So they get no token, no egress (``models-egress``) and no service account token;
they read the weights from the cache the Job filled, with ``HF_HUB_OFFLINE=1``. The Job runs the
serving image's own ``huggingface_hub`` (no second image to pin) with the same non-root security
context, into the same per-model directory of the RWX cache; its egress (``downloads-egress``) is
DNS and HTTPS to the Internet only, never the pod or service networks or a site network.

A Job's pod template cannot change, so a changed download (another model id) replaces the Job
(delete first: the name stays). The engine waits for the Job to complete (the provider's Job
awaiter) before it creates the model's Deployment; the timeout is long enough for the largest
weights on a slow link.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.inference import render

DOWNLOAD_LABEL = "hpc-cluster.io/download"
DOWNLOAD_TIMEOUT = "6h"
BACKOFF_LIMIT = 4
RESOURCES = k8s.core.v1.ResourceRequirementsArgs(
    requests={"cpu": "1", "memory": "2Gi"}, limits={"cpu": "2", "memory": "4Gi"}
)
# snapshot_download resumes a partial download: a retried pod continues where the last one stopped
DOWNLOAD_CODE = (
    "import sys; from huggingface_hub import snapshot_download; print(snapshot_download(sys.argv[1]), flush=True)"
)


def job_name(model: str) -> str:
    return f"download-{model}"


def download_job(
    name: str,
    m: render.ModelServer,
    *,
    namespace: pulumi.Input[str],
    node_name: str,
    image: str,
    cache_claim: pulumi.Input[str],
    hf_token_secret: str | None,
    scratch: tuple[str, str],
    security_context: k8s.core.v1.SecurityContextArgs,
    opts: pulumi.ResourceOptions,
) -> k8s.batch.v1.Job:
    """The Job filling ``m``'s cache directory; pinned to the serving node, which pulls the image once."""
    scratch_mount, scratch_size = scratch
    env = [
        k8s.core.v1.EnvVarArgs(name="HF_HOME", value=render.MODEL_CACHE_MOUNT),
        k8s.core.v1.EnvVarArgs(name="HOME", value=f"{scratch_mount}/home"),
        k8s.core.v1.EnvVarArgs(name="HF_HUB_DISABLE_TELEMETRY", value="1"),
    ]
    if hf_token_secret is not None:
        env.append(
            k8s.core.v1.EnvVarArgs(
                name="HF_TOKEN",
                value_from=k8s.core.v1.EnvVarSourceArgs(
                    secret_key_ref=k8s.core.v1.SecretKeySelectorArgs(name=hf_token_secret, key="token")
                ),
            )
        )
    labels = {"app": job_name(m.name), DOWNLOAD_LABEL: m.name}
    return k8s.batch.v1.Job(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=job_name(m.name), namespace=namespace, labels=labels),
        spec=k8s.batch.v1.JobSpecArgs(
            backoff_limit=BACKOFF_LIMIT,
            template=k8s.core.v1.PodTemplateSpecArgs(
                metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels),
                spec=k8s.core.v1.PodSpecArgs(
                    restart_policy="OnFailure",
                    node_selector={"kubernetes.io/hostname": node_name},
                    automount_service_account_token=False,
                    containers=[
                        k8s.core.v1.ContainerArgs(
                            name="download",
                            image=image,
                            command=["python3", "-c", DOWNLOAD_CODE, m.model_id],
                            env=env,
                            resources=RESOURCES,
                            security_context=security_context,
                            volume_mounts=[
                                k8s.core.v1.VolumeMountArgs(
                                    name="model-cache", mount_path=render.MODEL_CACHE_MOUNT, sub_path=m.name
                                ),
                                k8s.core.v1.VolumeMountArgs(name="scratch", mount_path=scratch_mount),
                            ],
                        )
                    ],
                    volumes=[
                        k8s.core.v1.VolumeArgs(
                            name="model-cache",
                            persistent_volume_claim=k8s.core.v1.PersistentVolumeClaimVolumeSourceArgs(
                                claim_name=cache_claim
                            ),
                        ),
                        k8s.core.v1.VolumeArgs(
                            name="scratch", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit=scratch_size)
                        ),
                    ],
                ),
            ),
        ),
        opts=pulumi.ResourceOptions.merge(
            opts,
            pulumi.ResourceOptions(
                delete_before_replace=True,
                custom_timeouts=pulumi.CustomTimeouts(create=DOWNLOAD_TIMEOUT, update=DOWNLOAD_TIMEOUT),
            ),
        ),
    )
