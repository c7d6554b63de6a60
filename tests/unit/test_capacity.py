"""The GPU memory capacity model: table tests from the lab notes and the issue."""

import pytest

from components.inference.capacity import (
    GIB,
    GPU_HEADROOM,
    KUBELET_EVICTION_MIB,
    ModelLoad,
    check_host,
    check_host_resources,
    host_memory_gib,
)
from offline import plan
from stacks.config import ConfigError

A100_80 = 80 * GIB


def model(name, model_id, params, dtype, util, kv="auto", max_len=None, tp=1, gpu=0, eager=True):
    return ModelLoad(name, model_id, params, dtype, kv, max_len, tp, gpu, util, eager)


def notes_five(gpu_of):
    """The five models of the lab notes with their flags (ports 8001-8005)."""
    return [
        model("llama3-8b", "meta-llama/Meta-Llama-3-8B-Instruct", 8.03, "bfloat16", 0.25, gpu=gpu_of[0]),
        model("gemma-7b", "google/gemma-1.1-7b-it", 8.54, "bfloat16", 0.27, "fp8", gpu=gpu_of[1]),
        model("decilm-7b", "Deci/DeciLM-7B-instruct", 7.04, "bfloat16", 0.23, "fp8", gpu=gpu_of[2]),
        model("phi3", "microsoft/Phi-3-mini-128k-instruct", 3.82, "bfloat16", 0.17, "fp8", 18000, gpu=gpu_of[3]),
        model("stablelm", "stabilityai/stablelm-2-1_6b-chat", 1.64, "float16", 0.07, "fp8", gpu=gpu_of[4]),
    ]


def test_each_of_the_notes_five_models_fits_its_share_of_80_gb():
    for m in notes_five([0] * 5):
        assert m.need_per_gpu() <= m.granted_per_gpu(A100_80), m.name


def test_the_notes_five_on_one_gpu_leave_no_headroom():
    problems = check_host(notes_five([0] * 5), 2, A100_80)
    assert [p.field for p in problems] == ["gpuMemoryUtilization"]
    assert "GPU 0 is shared by llama3-8b, gemma-7b, decilm-7b, phi3, stablelm" in problems[0].message
    assert "summing to 0.99, above 0.95" in problems[0].message and GPU_HEADROOM == 0.05


def test_the_notes_five_spread_over_two_gpus_fit():
    assert check_host(notes_five([0, 0, 1, 1, 1]), 2, A100_80) == []


def test_70b_bf16_on_one_80gb_gpu_is_refused():
    big = model("llama3-70b", "meta-llama/Meta-Llama-3-70B-Instruct", 70.6, "bfloat16", 0.9)
    problems = check_host([big], 1, A100_80)
    assert len(problems) == 1 and problems[0].model == "llama3-70b"
    assert "needs 135.0 GiB per GPU" in problems[0].message and "grants 72.0 GiB" in problems[0].message


def test_70b_with_tensor_parallel_2_on_two_80gb_gpus_fits():
    big = model("llama3-70b", "meta-llama/Meta-Llama-3-70B-Instruct", 70.6, "bfloat16", 0.9, tp=2)
    assert check_host([big], 2, A100_80) == []
    assert big.need_per_gpu() / GIB == pytest.approx(65.75 + 1.25 + 1.0, abs=0.05)  # weights, KV, overhead


def test_tensor_parallel_beyond_the_hosts_gpus_is_refused():
    problems = check_host([model("m", "x/y", 1, "bfloat16", 0.5, tp=4)], 2, A100_80)
    assert problems[0].field == "tensorParallelSize" and "exceeds the host's 2 GPUs" in problems[0].message


def test_gpu_index_beyond_the_host_is_refused():
    problems = check_host([model("m", "x/y", 1, "bfloat16", 0.5, gpu=2)], 2, A100_80)
    assert problems[0].field == "gpuIndex"


def test_fp8_kv_cache_halves_the_kv_term():
    bf16 = model("a", "meta-llama/Meta-Llama-3-8B-Instruct", 8.03, "bfloat16", 0.3)
    fp8 = model("a", "meta-llama/Meta-Llama-3-8B-Instruct", 8.03, "bfloat16", 0.3, "fp8")
    assert bf16.kv_bytes == 2 * fp8.kv_bytes == 2 * 32 * 8 * 128 * 2 * 8192


def test_unknown_model_shape_has_no_kv_term():
    assert model("m", "someone/unknown", 1, "bfloat16", 0.5).kv_bytes == 0


@pytest.mark.parametrize(
    ("models", "key", "fragment"),
    [
        (
            [{"gpuIndex": 0}] * 5,
            "hpc:inference.models[stablelm-1-6b].gpuMemoryUtilization",
            "model stablelm-1-6b: GPU 0",
        ),
        (
            [{}, {}, {}, {}, {"tensorParallelSize": 3}],
            "hpc:inference.models[stablelm-1-6b].tensorParallelSize",
            "exceeds",
        ),
        (
            [{"gpuMemoryUtilization": 0.05}, {}, {}, {}, {}],
            "hpc:inference.models[llama3-8b].gpuMemoryUtilization",
            "model llama3-8b needs",
        ),
    ],
)
def test_dev_stack_capacity_errors_name_the_model(models, key, fragment):
    import copy

    import yaml

    inference = copy.deepcopy(yaml.safe_load((plan.ROOT / "Pulumi.dev.yaml").read_text())["config"]["hpc:inference"])
    for m, change in zip(inference["models"], models, strict=True):
        m.update(change)
    with pytest.raises(ConfigError) as err:
        plan.run("dev", {"hpc:inference": inference})
    assert any(k == key and fragment in m for k, m in err.value.problems), str(err.value)
    assert err.value.registered == []


def test_model_pods_fit_the_hosts_cpus_and_memory():
    five = notes_five([0, 0, 1, 1, 1])
    need = sum(host_memory_gib(m.weight_bytes / GIB) for m in five)
    assert need == 23 + 24 + 22 + 16 + 16  # weights (GiB, rounded up) + 8, at least 16
    assert check_host_resources(five, 20, need * 1024 + KUBELET_EVICTION_MIB) == []
    (short,) = check_host_resources(five, 20, need * 1024 + KUBELET_EVICTION_MIB - 1)
    assert short.model == "stablelm" and short.field == "host" and f"request {need} GiB" in short.message
    (cpus,) = check_host_resources(five, 19, 10**7)
    assert "request 20 CPUs but it has 19" in cpus.message


def test_dev_stack_refuses_a_host_too_small_for_its_models():
    import copy

    import yaml

    hosts = copy.deepcopy(yaml.safe_load((plan.ROOT / "Pulumi.dev.yaml").read_text())["config"]["hpc:hosts"])
    gpu1 = next(h for h in hosts if h["name"] == "gpu1")
    gpu1["overrides"] = {"memoryMib": 64 * 1024}
    with pytest.raises(ConfigError) as err:
        plan.run("dev", {"hpc:hosts": hosts})
    assert any(
        k == "hpc:inference.models[stablelm-1-6b].host" and "request 101 GiB of host memory" in m
        for k, m in err.value.problems
    ), str(err.value)
    assert err.value.registered == []
