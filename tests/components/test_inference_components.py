"""k3s and inference under the mock engine: provider wiring, secrets end to end, minimal change."""

import copy

import pytest
import yaml

from offline import plan

DEV_INFERENCE = yaml.safe_load((plan.ROOT / "Pulumi.dev.yaml").read_text())["config"]["hpc:inference"]


@pytest.fixture(scope="module")
def dev():
    return plan.run("dev")


def test_every_kubernetes_resource_uses_the_k3s_provider(dev):
    provider = dev.by_name("k3s-k8s")
    assert provider.type == "pulumi:providers:kubernetes"
    k8s = [r for r in dev.resources if r.type.startswith("kubernetes:")]
    assert len(k8s) > 20
    for r in k8s:
        assert r.provider == provider.urn, r.name  # never the default provider


def test_kubeconfig_token_hf_token_and_api_key_are_secret_end_to_end(dev):
    assert "kubeconfig" in dev.by_name("k3s-k8s").secret_inputs()
    kubeconfig = dev.by_name("rpi1-kubeconfig")
    assert kubeconfig.options["additionalSecretOutputs"] == ["connection", "stdout"]
    assert kubeconfig.inputs["logging"] == "none"
    token = dev.by_name("k3s-token")
    for node in ("rpi1-k3s", "rpi2-k3s", "gpu1-k3s"):
        r = dev.by_name(node)
        assert "stdin" in r.secret_inputs() and token.urn in r.dependencies and r.inputs["logging"] == "none"
    for secret in ("fastchat-api-key-secret", "fastchat-hf-token"):
        assert "stringData" in dev.by_name(secret).secret_inputs(), secret
    check = dev.by_name("inference-check")
    assert "stdin" in check.secret_inputs()
    # no Deployment carries a secret value: keys reach containers through secretKeyRef
    for d in dev.of_type("kubernetes:apps/v1:Deployment"):
        assert d.secret_inputs() == [], d.name
    text = str(plan.plan_document(dev))
    assert not any(v in text for v in dev.secret_values)


def test_validation_verdict_is_a_stack_output(dev):
    assert "inferenceCheck" in dev.stack_outputs
    deps = set(dev.by_name("inference-check").dependencies)
    models = {r.urn for r in dev.of_type("kubernetes:apps/v1:Deployment") if r.name.startswith("gpu1-inference-")}
    assert len(models) == 5 and models <= deps


def test_nodes_are_labelled_from_their_profile(dev):
    labels = plan.plain(dev.by_name("gpu1-labels").inputs["metadata"])["labels"]
    assert labels == {
        "hpc-cluster.io/gpu-model": "a100",
        "hpc-cluster.io/gpu-count": "2",
        "hpc-cluster.io/gpu-memory-gib": "80",
        "nvidia.com/gpu.present": "true",
    }


def test_changing_one_models_flags_changes_only_its_deployment(dev):
    inference = copy.deepcopy(DEV_INFERENCE)
    inference["models"][3]["maxModelLen"] = 16000  # phi3
    changed_run = plan.run("dev", {"hpc:inference": inference})
    before = {r.urn: r.inputs for r in dev.resources}
    after = {r.urn: r.inputs for r in changed_run.resources}
    assert before.keys() == after.keys()
    changed = sorted(changed_run.records[u].name for u in after if after[u] != before[u])
    assert changed == ["gpu1-inference-phi3-mini-128k"]


def test_each_model_runs_on_the_gpus_the_capacity_model_gave_it(dev):
    """No device plugin picks a GPU: every model server is pinned to its own GPUs."""
    assert not dev.of_type("kubernetes:helm.sh/v3:Release") or all(
        "device-plugin" not in r.name for r in dev.of_type("kubernetes:helm.sh/v3:Release")
    )
    pinned = {}
    for d in dev.of_type("kubernetes:apps/v1:Deployment"):
        if d.name.startswith("gpu1-inference-"):
            [c] = plan.plain(d.inputs["spec"])["template"]["spec"]["containers"]
            env = {e["name"]: e.get("value") for e in c["env"]}
            assert "nvidia.com/gpu" not in c["resources"]["limits"]
            pinned[d.name.removeprefix("gpu1-inference-")] = env["NVIDIA_VISIBLE_DEVICES"]
    assert pinned == {"llama3-8b": "0", "gemma-7b": "0", "decilm-7b": "1", "phi3-mini-128k": "1", "stablelm-1-6b": "1"}


def test_the_web_ui_and_every_models_api_are_reachable_from_outside(dev):
    """Ingresses through k3s's Traefik: / is the web UI, /<model>/v1 each model's API (stripped to
    vLLM's own /v1; vLLM still wants the key); HTTP without a site certificate, HTTPS with one."""
    webui = plan.plain(dev.by_name("public-webui").inputs)
    [rule] = webui["spec"]["rules"]
    assert rule["http"]["paths"][0]["backend"]["service"] == {"name": "fastchat-webui", "port": {"number": 7860}}
    assert "tls" not in webui["spec"]  # no certificate in the dev stack
    api = plan.plain(dev.by_name("public-phi3-mini-128k").inputs)
    assert api["spec"]["rules"][0]["http"]["paths"][0]["path"] == "/phi3-mini-128k/v1"  # only the API
    assert api["metadata"]["annotations"] == {
        "traefik.ingress.kubernetes.io/router.middlewares": "inference-strip-phi3-mini-128k@kubernetescrd"
    }
    strip = plan.plain(dev.by_name("public-strip-phi3-mini-128k").inputs)
    assert strip["spec"] == {"stripPrefix": {"prefixes": ["/phi3-mini-128k"]}}
    with_tls = plan.run("dev", {"hpc:tlsCertificate": {"secure": "x"}, "hpc:tlsKey": {"secure": "y"},
                                "hpc:inference": DEV_INFERENCE | {"publicHost": "llm.lab.example"}})  # fmt: skip
    webui = plan.plain(with_tls.by_name("public-webui").inputs)
    assert webui["spec"]["tls"] == [{"hosts": ["llm.lab.example"], "secretName": "public-tls"}]
    assert "stringData" in with_tls.by_name("public-tls").secret_inputs()  # the key stays a secret
    assert plan.plain(with_tls.stack_outputs["urls"])["chat"] == "https://llm.lab.example/"
    assert plan.plain(with_tls.stack_outputs["urls"])["llama3-8b"] == "https://llm.lab.example/llama3-8b/v1"
