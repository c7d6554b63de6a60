"""Pure renderers for inference: vLLM server arguments, FastChat's api_endpoints.json, the check.

api_endpoints.json names every model's OpenAI endpoint for FastChat's web server. The API key is
a secret, so the file carries ``API_KEY_PLACEHOLDER``; the FastChat image's entrypoint replaces
it from its environment (a Kubernetes Secret) when the container starts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from components.scripts import Raw, RemoteScript, fill, no_undo, script

SCRIPTS = Path(__file__).with_name("scripts")
API_KEY_PLACEHOLDER = "@@VLLM_API_KEY@@"
MODEL_CACHE_MOUNT = "/models"
CHECK_TIMEOUT_S = 10


@dataclass(frozen=True)
class ModelServer:
    """One vLLM OpenAI server, as the renderers need it."""

    name: str
    display_name: str
    model_id: str
    port: int
    dtype: str
    gpu_memory_utilization: float
    kv_cache_dtype: str
    max_model_len: int | None
    tensor_parallel_size: int
    enforce_eager: bool
    trust_remote_code: bool
    params_billion: float = 0.0
    gpu_index: int = 0

    @property
    def gpus(self) -> range:
        """The GPUs it runs on: gpu_index .. gpu_index + tensor_parallel_size - 1."""
        return range(self.gpu_index, self.gpu_index + self.tensor_parallel_size)

    @property
    def service_url(self) -> str:
        return f"http://{self.name}:{self.port}/v1/"


def vllm_args(m: ModelServer) -> list[str]:
    """``vllm serve`` arguments; the API key comes from $VLLM_API_KEY, never an argument."""
    args = [
        m.model_id,
        "--served-model-name",
        m.model_id,
        "--host",
        "0.0.0.0",
        "--port",
        str(m.port),
        "--dtype",
        m.dtype,
        "--gpu-memory-utilization",
        f"{m.gpu_memory_utilization:g}",
        "--tensor-parallel-size",
        str(m.tensor_parallel_size),
        "--disable-log-requests",
    ]
    if m.kv_cache_dtype != "auto":
        args += ["--kv-cache-dtype", m.kv_cache_dtype]
    if m.max_model_len:
        args += ["--max-model-len", str(m.max_model_len)]
    if m.enforce_eager:
        args.append("--enforce-eager")
    if m.trust_remote_code:
        args.append("--trust-remote-code")
    return args


def readiness_command(port: int) -> list[str]:
    """Probe /v1/models with the API key from the container's environment."""
    code = (
        "import os, urllib.request as u; "
        f"u.urlopen(u.Request('http://127.0.0.1:{port}/v1/models', "
        "headers={'Authorization': 'Bearer ' + os.environ['VLLM_API_KEY']}), timeout=5)"
    )
    return ["python3", "-c", code]


def api_endpoints(models: list[ModelServer]) -> str:
    """FastChat's api_endpoints.json for the given models (display name -> endpoint)."""
    doc = {
        m.display_name: {
            "model_name": m.model_id,
            "api_key": API_KEY_PLACEHOLDER,
            "api_type": "openai",
            "api_base": m.service_url,
            "anony_only": False,
        }
        for m in models
    }
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"


def validation(host: str, namespace: str, models: list[ModelServer]) -> RemoteScript:
    """After deployment: query every model's /v1/models from the k3s server; print a JSON verdict.

    The API key comes on stdin and reaches curl through a file descriptor, never an argument."""
    checks = Raw("\n".join(f"check {m.name} {m.port} {m.model_id}" for m in models))
    create = script(
        host,
        f"{host}-inference-check",
        fill(SCRIPTS / "inference-check.sh", namespace=namespace, timeout=CHECK_TIMEOUT_S, checks=checks),
        extra_headers={"secret-stdin": "api-key"},
        stdout_is_output=True,
    )
    delete = no_undo(host, f"{host}-inference-check")
    return RemoteScript(f"{host}-inference-check", host, create, delete)
