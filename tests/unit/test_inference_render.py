"""Inference renderers: exact api_endpoints.json for the notes' five models, vLLM arguments."""

import json

from components.inference import render
from offline import plan

API_ENDPOINTS_DEV = {
    "Llama 3 8B 8K": ("meta-llama/Meta-Llama-3-8B-Instruct", "http://llama3-8b:8001/v1/"),
    "Gemma 7B 8K": ("google/gemma-1.1-7b-it", "http://gemma-7b:8002/v1/"),
    "DeciLM 7B 8K": ("Deci/DeciLM-7B-instruct", "http://decilm-7b:8003/v1/"),
    "Phi 3 18K": ("microsoft/Phi-3-mini-128k-instruct", "http://phi3-mini-128k:8004/v1/"),
    "StableLM 1.6B": ("stabilityai/stablelm-2-1_6b-chat", "http://stablelm-1-6b:8005/v1/"),
}


def dev_models():
    import yaml

    from stacks.config import parse
    from stacks.inference import model_server

    raw = yaml.safe_load((plan.ROOT / "Pulumi.dev.yaml").read_text())["config"]
    cfg = parse({k.split(":", 1)[1]: v for k, v in raw.items() if k not in ("hpc:sshPrivateKey", "hpc:hfToken")})
    return [model_server(m) for m in cfg.inference.models]


def test_api_endpoints_json_exact():
    expected = {
        name: {
            "model_name": mid,
            "api_key": "@@VLLM_API_KEY@@",
            "api_type": "openai",
            "api_base": base,
            "anony_only": False,
        }
        for name, (mid, base) in API_ENDPOINTS_DEV.items()
    }
    text = render.api_endpoints(dev_models())
    assert text == json.dumps(expected, indent=2) + "\n"
    assert list(json.loads(text)) == list(API_ENDPOINTS_DEV)  # the notes' order


def test_vllm_args_carry_the_notes_flags_and_no_key():
    phi3 = next(m for m in dev_models() if m.name == "phi3-mini-128k")
    args = render.vllm_args(phi3)
    assert args[0] == "microsoft/Phi-3-mini-128k-instruct"
    for flag, value in (
        ("--gpu-memory-utilization", "0.17"),
        ("--kv-cache-dtype", "fp8"),
        ("--max-model-len", "18000"),
        ("--port", "8004"),
        ("--dtype", "bfloat16"),
    ):
        assert args[args.index(flag) + 1] == value
    assert "--enforce-eager" in args and "--trust-remote-code" not in args  # only where the stack says so
    assert not any("api-key" in a for a in args)


def test_readiness_probe_uses_the_key_from_the_environment():
    cmd = render.readiness_command(8001)
    assert cmd[:2] == ["python3", "-c"] and "os.environ['VLLM_API_KEY']" in cmd[2] and "/v1/models" in cmd[2]
