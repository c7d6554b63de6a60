"""GPU memory capacity model for vLLM servers sharing GPUs (pure, no Pulumi).

vLLM takes ``gpu_memory_utilization`` of each GPU it runs on and must fit, inside that share,
its weights (split across ``tensor_parallel_size`` GPUs), the KV cache for at least one sequence
of ``max_model_len`` tokens, and a runtime overhead. Nothing checks this before load time: vLLM
fails when the model starts. This model checks it when the stack is validated:

* weights = parameters x bytes per parameter of ``dtype``;
* KV cache per token = 2 (K and V) x layers x KV heads x head dim x bytes of ``kv_cache_dtype``,
  for the model shapes known below (others: no KV term, "where known");
* overhead per GPU = 1 GiB (CUDA context, activations under profiling) + 0.5 GiB for CUDA graphs
  unless ``enforce_eager``;
* per GPU, the fractions of the models placed on it must stay at or below 1 - ``GPU_HEADROOM``:
  5 % is kept for what vLLM does not count (other processes' CUDA contexts, fragmentation);
* per host, the model pods' CPU and memory requests (what the Kubernetes scheduler reserves) must
  fit the host: its threads and its memory less the kubelet's default eviction reserve (100 MiB).
  Else the scheduler leaves a model Pending ("Insufficient memory"), proven on a real scheduler.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GIB = 1024**3
GPU_HEADROOM = 0.05
OVERHEAD_BYTES = 1 * GIB
CUDA_GRAPH_BYTES = GIB // 2
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
KV_DTYPE_BYTES = {"fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}
MODEL_CPU_REQUEST = 4  # CPUs a model pod requests (its limit is twice that)
HOST_MEMORY_BASE_GIB = 8  # host memory beyond the weights, which pass through it while loading
HOST_MEMORY_MIN_GIB = 16
KUBELET_EVICTION_MIB = 100  # the kubelet's default eviction-hard memory.available<100Mi


def host_memory_gib(weight_gib: float) -> int:
    """Host memory a model pod requests (and is limited to), from its weights' size."""
    return max(HOST_MEMORY_MIN_GIB, math.ceil(weight_gib) + HOST_MEMORY_BASE_GIB)


@dataclass(frozen=True)
class ModelShape:
    """What the KV cache size depends on, and the model's native context length."""

    layers: int
    kv_heads: float  # an average for models whose layers differ (DeciLM)
    head_dim: int
    max_len: int
    heads: int  # num_attention_heads: tensor parallelism must divide it


# From the models' published configs (config.json: num_hidden_layers, num_key_value_heads,
# head_dim or hidden_size / num_attention_heads, max_position_embeddings).
KNOWN_SHAPES: dict[str, ModelShape] = {
    "meta-llama/Meta-Llama-3-8B-Instruct": ModelShape(32, 8, 128, 8192, 32),
    "meta-llama/Meta-Llama-3-70B-Instruct": ModelShape(80, 8, 128, 8192, 64),
    "google/gemma-1.1-7b-it": ModelShape(28, 16, 256, 8192, 16),
    "Deci/DeciLM-7B-instruct": ModelShape(32, 4, 128, 8192, 32),
    "microsoft/Phi-3-mini-128k-instruct": ModelShape(32, 32, 96, 131072, 32),
    "stabilityai/stablelm-2-1_6b-chat": ModelShape(24, 32, 64, 4096, 32),
    "mistralai/Mixtral-8x7B-Instruct-v0.1": ModelShape(32, 8, 128, 32768, 32),
}


@dataclass(frozen=True)
class ModelLoad:
    """One model as the capacity model sees it."""

    name: str
    model_id: str
    params_billion: float
    dtype: str
    kv_cache_dtype: str
    max_model_len: int | None
    tensor_parallel_size: int
    gpu_index: int
    gpu_memory_utilization: float
    enforce_eager: bool

    @property
    def gpus(self) -> range:
        return range(self.gpu_index, self.gpu_index + self.tensor_parallel_size)

    @property
    def weight_bytes(self) -> float:
        return self.params_billion * 1e9 * DTYPE_BYTES[self.dtype]

    @property
    def context(self) -> int | None:
        shape = KNOWN_SHAPES.get(self.model_id)
        return self.max_model_len or (shape.max_len if shape else None)

    @property
    def kv_bytes(self) -> float:
        """KV cache for one sequence of the full context (0 when the shape is unknown)."""
        shape = KNOWN_SHAPES.get(self.model_id)
        if shape is None or self.context is None:
            return 0.0
        per_token = 2 * shape.layers * shape.kv_heads * shape.head_dim
        per_token *= KV_DTYPE_BYTES.get(self.kv_cache_dtype, DTYPE_BYTES[self.dtype])
        return per_token * self.context

    def need_per_gpu(self) -> float:
        overhead = OVERHEAD_BYTES + (0 if self.enforce_eager else CUDA_GRAPH_BYTES)
        return (self.weight_bytes + self.kv_bytes) / self.tensor_parallel_size + overhead

    def granted_per_gpu(self, gpu_memory_bytes: float) -> float:
        return self.gpu_memory_utilization * gpu_memory_bytes


@dataclass(frozen=True)
class Problem:
    """A capacity violation: which model (and GPU), and why."""

    model: str
    field: str
    message: str


# The model cache holds each model's repository as Hugging Face downloads it: the weights, and in
# many repositories a second copy in another format (Meta's original/*.pth beside the
# safetensors), hence twice the weights.
CACHE_WEIGHT_COPIES = 2


def model_cache_needed_gib(weights_bytes: float) -> int:
    """The model cache, in GiB, that models whose weights take ``weights_bytes`` need."""
    return math.ceil(CACHE_WEIGHT_COPIES * weights_bytes / GIB)


def check_host(
    models: list[ModelLoad],
    gpu_count: int,
    gpu_memory_bytes: float,
    cpus: int | None = None,
    memory_mib: int | None = None,
) -> list[Problem]:
    """Every capacity problem of the models placed on one host: its GPUs, and its CPUs and
    memory when given."""
    problems = [] if cpus is None or memory_mib is None else check_host_resources(models, cpus, memory_mib)
    per_gpu: dict[int, list[ModelLoad]] = {}
    for m in models:
        if m.tensor_parallel_size > gpu_count:
            problems.append(
                Problem(
                    m.name,
                    "tensorParallelSize",
                    f"model {m.name}: tensor_parallel_size {m.tensor_parallel_size} exceeds the "
                    f"host's {gpu_count} GPUs",
                )
            )
            continue
        if m.gpus.stop > gpu_count:
            problems.append(
                Problem(
                    m.name,
                    "gpuIndex",
                    f"model {m.name}: GPUs {m.gpus.start}..{m.gpus.stop - 1} do not exist on a "
                    f"host with {gpu_count} GPUs",
                )
            )
            continue
        need, granted = m.need_per_gpu(), m.granted_per_gpu(gpu_memory_bytes)
        if need > granted:
            problems.append(
                Problem(
                    m.name,
                    "gpuMemoryUtilization",
                    f"model {m.name} needs {need / GIB:.1f} GiB per GPU (weights "
                    f"{m.weight_bytes / GIB / m.tensor_parallel_size:.1f}, KV cache "
                    f"{m.kv_bytes / GIB / m.tensor_parallel_size:.1f}) but "
                    f"gpu_memory_utilization {m.gpu_memory_utilization} grants "
                    f"{granted / GIB:.1f} GiB",
                )
            )
        for g in m.gpus:
            per_gpu.setdefault(g, []).append(m)
    limit = 1 - GPU_HEADROOM
    for g, placed in sorted(per_gpu.items()):
        total = sum(m.gpu_memory_utilization for m in placed)
        if total > limit + 1e-9:
            names = ", ".join(m.name for m in placed)
            problems.append(
                Problem(
                    placed[-1].name,
                    "gpuMemoryUtilization",
                    f"model {placed[-1].name}: GPU {g} is shared by {names} with "
                    f"gpu_memory_utilization summing to {total:.2f}, above "
                    f"{limit:.2f} (1 - {GPU_HEADROOM} headroom)",
                )
            )
    return problems


def check_host_resources(models: list[ModelLoad], cpus: int, memory_mib: int) -> list[Problem]:
    """The model pods' requests against what the scheduler can give on the host."""
    if not models:
        return []
    last = models[-1].name
    problems = []
    memory = sum(host_memory_gib(m.weight_bytes / GIB) for m in models)
    allocatable = (memory_mib - KUBELET_EVICTION_MIB) / 1024
    if memory > allocatable:
        problems.append(
            Problem(
                last,
                "host",
                f"model {last}: the {len(models)} models on this host request {memory} GiB of host "
                f"memory but it has {allocatable:.1f} GiB to give (the scheduler would leave one Pending)",
            )
        )
    if MODEL_CPU_REQUEST * len(models) > cpus:
        problems.append(
            Problem(
                last,
                "host",
                f"model {last}: the {len(models)} models on this host request "
                f"{MODEL_CPU_REQUEST * len(models)} CPUs but it has {cpus} (the scheduler would leave one Pending)",
            )
        )
    return problems
