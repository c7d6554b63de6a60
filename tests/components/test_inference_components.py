"""k3s and inference under the mock engine: provider wiring, secrets end to end, minimal change."""

import copy

import pytest
import yaml

from components.inference.exposure import ENTRYPOINTS, MIDDLEWARES
from offline import plan
from stacks.config import ConfigError

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
    # the UI asks for a login: basicAuth from the users' Secret, the header never reaches FastChat
    assert webui["metadata"]["annotations"] == {MIDDLEWARES: "inference-webui-login@kubernetescrd"}
    login = plan.plain(dev.by_name("public-webui-login").inputs)["spec"]
    assert login == {"basicAuth": {"secret": "webui-users", "realm": "hpc-cluster", "removeHeader": True}}
    assert not {"public-http", "public-redirect-https"} & {r.name for r in dev.resources}  # plain HTTP in dev
    api = plan.plain(dev.by_name("public-phi3-mini-128k").inputs)
    assert api["spec"]["rules"][0]["http"]["paths"][0]["path"] == "/phi3-mini-128k/v1"  # only the API
    assert api["metadata"]["annotations"] == {MIDDLEWARES: "inference-strip-phi3-mini-128k@kubernetescrd"}
    strip = plan.plain(dev.by_name("public-strip-phi3-mini-128k").inputs)
    assert strip["spec"] == {"stripPrefix": {"prefixes": ["/phi3-mini-128k"]}}
    with_tls = plan.run("dev", {"hpc:tlsCertificate": {"secure": "x"}, "hpc:tlsKey": {"secure": "y"},
                                "hpc:inference": DEV_INFERENCE | {"publicHost": "llm.lab.example"}})  # fmt: skip
    webui = plan.plain(with_tls.by_name("public-webui").inputs)
    assert webui["spec"]["tls"] == [{"hosts": ["llm.lab.example"], "secretName": "public-tls"}]
    assert "stringData" in with_tls.by_name("public-tls").secret_inputs()  # the key stays a secret
    assert plan.plain(with_tls.stack_outputs["urls"])["chat"] == "https://llm.lab.example/"
    assert plan.plain(with_tls.stack_outputs["urls"])["llama3-8b"] == "https://llm.lab.example/llama3-8b/v1"
    # with TLS every route answers only on websecure, and plain HTTP on web is one redirect
    for name in ("public-webui", "public-phi3-mini-128k"):
        notes = plan.plain(with_tls.by_name(name).inputs)["metadata"]["annotations"]
        assert notes[ENTRYPOINTS] == "websecure" and notes["traefik.ingress.kubernetes.io/router.tls"] == "true"
    http = plan.plain(with_tls.by_name("public-http").inputs)
    redirect_ref = "inference-redirect-https@kubernetescrd"
    assert http["metadata"]["annotations"] == {ENTRYPOINTS: "web", MIDDLEWARES: redirect_ref}
    assert http["spec"]["rules"][0]["http"]["paths"][0]["path"] == "/" and "tls" not in http["spec"]
    redirect = plan.plain(with_tls.by_name("public-redirect-https").inputs)["spec"]
    assert redirect == {"redirectScheme": {"scheme": "https", "permanent": True}}


DEV_USERS = yaml.safe_load((plan.ROOT / "Pulumi.dev.yaml").read_text())["config"]["hpc:users"]


def _model_pods(run):  # type: ignore[no-untyped-def]
    return {
        d.name: plan.plain(d.inputs["spec"])["template"]
        for d in run.of_type("kubernetes:apps/v1:Deployment")
        if d.name.startswith("gpu1-inference-")
    }


def test_every_user_has_a_key_of_their_own_that_every_model_server_accepts(dev):
    """One generated key per declared user besides the service key; the model servers read all of
    them from the vllm-api-keys Secret's file (--config), never from an argument; the UI's users
    Secret has one SHA line per user; each user's key reaches their home on the head, secret."""
    users = [u["name"] for u in DEV_USERS]
    assert len(users) >= 2
    passwords = {r.name for r in dev.of_type("random:index/randomPassword:RandomPassword")}
    assert {f"api-keys-{u}" for u in users} <= passwords and "fastchat-api-key" in passwords
    accepted = dev.by_name("api-keys-accepted")
    assert "stringData" in accepted.secret_inputs()
    keys_file = yaml.safe_load(plan.plain(accepted.inputs["stringData"])["api-keys.yaml"])
    service = plan.plain(dev.by_name("fastchat-api-key").outputs["result"])
    mine = {u: plan.plain(dev.by_name(f"api-keys-{u}").outputs["result"]) for u in users}
    assert keys_file == {"api-key": [service, *mine.values()]} and len(set(keys_file["api-key"])) == len(users) + 1
    ui = plan.plain(dev.by_name("api-keys-webui-users").inputs["stringData"])["users"].splitlines()
    assert [line.split(":{SHA}")[0] for line in ui] == users
    assert "stringData" in dev.by_name("api-keys-webui-users").secret_inputs()
    for name, pod in _model_pods(dev).items():
        [c] = pod["spec"]["containers"]
        assert c["args"][-2:] == ["--config", "/etc/vllm/keys/api-keys.yaml"], name
        assert not any(a.startswith("--api-key") for a in c["args"])
        assert {"name": "api-keys", "mountPath": "/etc/vllm/keys", "readOnly": True} in c["volumeMounts"]
        [vol] = [v for v in pod["spec"]["volumes"] if v["name"] == "api-keys"]
        assert vol["secret"]["secretName"] == "vllm-api-keys"
    delivery = dev.by_name("rpi1-api-keys")
    assert "stdin" in delivery.secret_inputs() and delivery.inputs["logging"] == "none"
    stdin = plan.plain(delivery.inputs["stdin"]).splitlines()
    assert stdin == [f"{u} {mine[u]}" for u in users]
    assert dev.by_name("rpi1-homes").urn in delivery.dependencies


def test_adding_removing_or_rotating_a_users_key_restarts_only_the_model_servers_that_read_it(dev):
    """vLLM reads its keys at start: the key set's digest on the model pods changes with the set;
    a rotation regenerates only that user's key (keepers), an unchanged set rolls nothing."""
    digests = lambda run: {n: p["metadata"]["annotations"]["hpc-cluster.io/api-key-digest"]  # noqa: E731
                           for n, p in _model_pods(run).items()}  # fmt: skip
    before = digests(dev)
    assert len(set(before.values())) == 1
    removed = plan.run("dev", {"hpc:users": DEV_USERS[:1]})
    assert set(digests(removed).values()) != set(before.values())
    assert f"api-keys-{DEV_USERS[1]['name']}" not in {r.name for r in removed.resources}
    rotated_users = copy.deepcopy(DEV_USERS)
    rotated_users[0]["apiKeyRotation"] = 1
    rotated = plan.run("dev", {"hpc:users": rotated_users})
    keepers = lambda run, u: plan.plain(run.by_name(f"api-keys-{u}").inputs)["keepers"]  # noqa: E731
    assert keepers(dev, DEV_USERS[0]["name"]) == {"rotation": "0"}
    assert keepers(rotated, DEV_USERS[0]["name"]) == {"rotation": "1"}  # the provider makes a new key
    assert keepers(rotated, DEV_USERS[1]["name"]) == {"rotation": "0"}  # the others keep theirs
    again = plan.run("dev")
    assert digests(again) == before


def test_a_prod_stack_serving_models_without_a_certificate_is_refused_in_one_line():
    with pytest.raises(ConfigError) as err:
        plan.run("prod", {"hpc:tlsCertificate": None, "hpc:tlsKey": None})
    assert err.value.registered == []
    [(key, message)] = err.value.problems
    assert key == "hpc:tlsCertificate" and "only over HTTPS" in message and "\n" not in message
    served = plan.run("prod")  # the plan's stand-ins for the site's certificate
    assert plan.plain(served.stack_outputs["urls"])["chat"].startswith("https://")
    assert "public-http" in {r.name for r in served.resources}
    bare = plan.run("prod", {"hpc:tlsCertificate": None, "hpc:tlsKey": None, "hpc:inference": {"models": []}})
    assert not bare.of_type("kubernetes:networking.k8s.io/v1:Ingress")  # nothing served, nothing to protect
