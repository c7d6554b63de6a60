"""Value checks that need domain tables: a model's native context and attention heads.

vLLM refuses ``--max-model-len`` above the model's ``max_position_embeddings`` (unless forced
with an environment override this program never sets) and a ``--tensor-parallel-size`` that does
not divide ``num_attention_heads`` (nor, for grouped-query attention, the KV heads). Both are
known for the models in ``components.inference.capacity.KNOWN_SHAPES``; for any other model the
KV cache, the context and the split are not checked, and ``warnings`` says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from components.inference.capacity import KNOWN_SHAPES
from stacks.config_parts import ModelConfig


def model_problems(key: str, m: ModelConfig) -> Iterator[tuple[str, str]]:
    """Problems of one model against its published shape (nothing for an unknown model)."""
    shape = KNOWN_SHAPES.get(m.model_id)
    if shape is None:
        return
    if m.max_model_len is not None and m.max_model_len > shape.max_len:
        yield (
            f"{key}.maxModelLen",
            f"model {m.name}: {m.max_model_len} is above {m.model_id}'s native context of {shape.max_len} tokens",
        )
    tp = m.tensor_parallel_size
    if shape.heads % tp:
        yield (
            f"{key}.tensorParallelSize",
            f"model {m.name}: {tp} does not divide {m.model_id}'s {shape.heads} attention heads",
        )
    kv = int(shape.kv_heads)
    if kv == shape.kv_heads and (kv % tp if kv >= tp else tp % kv):
        yield (
            f"{key}.tensorParallelSize",
            f"model {m.name}: {tp} does not split {m.model_id}'s {kv} KV heads evenly",
        )


def warnings(models: Iterable[ModelConfig]) -> list[str]:
    """What validation could not check, one line each."""
    out = []
    for m in models:
        if m.model_id not in KNOWN_SHAPES:
            out.append(
                f"hpc:inference.models[{m.name}].modelId: {m.model_id} is not in the capacity table "
                "(components/inference/capacity.py): its KV cache, context length and tensor split were "
                "not checked; add its shape there"
            )
    return out
