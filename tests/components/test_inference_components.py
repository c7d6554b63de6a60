"""k3s and inference under the mock engine: provider wiring, secrets end to end, minimal change."""

import copy

import pytest
import yaml

from stacks import plan

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
