"""The k3s tier against a real Kubernetes API (v1.31.4, the k3s pin's release): every object the
plan records for dev and prod applied server-side, scheduled by the real scheduler onto kwok
nodes that register as the stack's k3s hosts would, rolled out by the real controllers.

What stands in for what cannot run here: kwok for the kubelets (pods go Running/Ready with an IP;
no container runs), the PV the NFS CSI provisioner would create (its Helm chart cannot be
fetched), and Traefik's CRDs from its Go module (what k3s's traefik-crd chart installs, unless the
server config disables Traefik).
"""

from __future__ import annotations

import json
from ipaddress import ip_address, ip_network

import pytest

from components.inference import capacity
from components.inference.fastchat import HF_TOKEN_SECRET
from offline import plan
from tests.integration.lab import wait_until

from . import objects
from .applied import (
    NS,
    applied_stack,
    deployment_available,
    job_complete,
    pods_of,
    secrets_read,
)
from .cluster import binaries_missing
from .objects import pod_requests, set_allocatable_memory, without_model

pytestmark = pytest.mark.k8s_api


@pytest.fixture(scope="module", params=["dev", "prod"])
def applied(request: pytest.FixtureRequest):
    missing = binaries_missing()
    if missing:
        pytest.skip(missing)
    with applied_stack(request.param, plan.run(request.param)) as a:
        yield a


def test_every_recorded_object_is_accepted(applied):
    kinds = sorted({r.manifest["kind"] for r in applied.records})
    assert {
        "Deployment",
        "Service",
        "Secret",
        "ConfigMap",
        "PersistentVolumeClaim",
        "StorageClass",
        "Node",
        "Namespace",
        "RuntimeClass",
        "NetworkPolicy",
        "Job",
        "Ingress",
        "Middleware",
    } <= set(kinds)
    assert applied.refused == {}, "\n".join(f"{k}: {v}" for k, v in applied.refused.items())
    assert len(applied.back) == len(applied.records)


def test_the_server_keeps_every_field_the_plan_sets(applied):
    """Admission and defaulting add fields; none may change or drop one the plan set (a
    quantity normalised, a list reordered, a field unknown to 1.31 pruned)."""
    changed = {}
    for rec in applied.records:
        sent = dict(rec.manifest)
        if sent["kind"] == "Secret":  # the server folds stringData into data and never returns it
            back = applied.back[rec.key]
            assert set(back["data"]) == set(sent.pop("stringData", {})) | set(sent.pop("data", {})), rec.key
        diff = objects.fields_changed(sent, applied.back[rec.key])
        if diff:
            changed[rec.key] = diff
    assert changed == {}


def test_every_model_is_available_on_the_node_it_is_pinned_to(applied):
    models = [d for d in applied.of_kind("Deployment") if "hpc-cluster.io/model" in d["metadata"].get("labels", {})]
    assert {d["metadata"]["name"] for d in models} == {m.name for m in applied.cfg.inference.models}
    for d in applied.of_kind("Deployment"):
        name = d["metadata"]["name"]
        assert deployment_available(applied.api, name), name
        pods = pods_of(applied.api, name)
        want = d["spec"]["template"]["spec"]["nodeSelector"]["kubernetes.io/hostname"]
        assert [p["spec"]["nodeName"] for p in pods] == [want] * d["spec"]["replicas"], name
        assert all(p["status"]["phase"] == "Running" and p["status"].get("podIP") for p in pods), name
    for m in applied.cfg.inference.models:
        assert pods_of(applied.api, m.name)[0]["spec"]["nodeName"] == m.host
    # the config check's arithmetic (capacity.check_host_resources) is the scheduler's
    for host in {m.host for m in applied.cfg.inference.models}:
        placed = [m for m in applied.cfg.inference.models if m.host == host]
        requested = sum(pod_requests(pods_of(applied.api, m.name)[0], "memory") for m in placed)
        want = sum(capacity.host_memory_gib(m.load().weight_bytes / capacity.GIB) for m in placed)
        assert requested == want * 1024**3, host
        node = applied.api.get("v1", "Node", host)
        hw = applied.cfg.host(host).hardware
        assert node["status"]["allocatable"]["memory"] == f"{hw.memory_mib - capacity.KUBELET_EVICTION_MIB}Mi"


def test_every_service_has_ready_endpoints(applied):
    for svc in applied.of_kind("Service"):
        name = svc["metadata"]["name"]
        back = applied.api.get("v1", "Service", name, NS)
        assert back["spec"]["clusterIP"].startswith("10.43."), name  # from k3s's service CIDR
        slices = applied.api.list(
            "discovery.k8s.io/v1", "EndpointSlice", NS, labelSelector=f"kubernetes.io/service-name={name}"
        )
        ready = [e for s in slices for e in s.get("endpoints") or [] if e["conditions"].get("ready")]
        pods = pods_of(applied.api, svc["spec"]["selector"]["app"])
        assert sorted(e["addresses"][0] for e in ready) == sorted(p["status"]["podIP"] for p in pods) != [], name
        ports = {p["port"] for s in slices for p in s.get("ports") or []}
        assert ports == {p["targetPort"] for p in svc["spec"]["ports"]}, name


def test_every_secret_and_configmap_reference_resolves(applied):
    refs = 0
    for d in applied.of_kind("Deployment"):
        spec = d["spec"]["template"]["spec"]
        for c in spec.get("initContainers", []) + spec["containers"]:
            for env in c.get("env", []):
                src = env.get("valueFrom", {})
                for kind, key in (("Secret", "secretKeyRef"), ("ConfigMap", "configMapKeyRef")):
                    if key in src:
                        obj = applied.api.get("v1", kind, src[key]["name"], NS)
                        assert obj is not None, (d["metadata"]["name"], kind, src[key]["name"])
                        assert src[key]["key"] in obj.get("data", {}), (d["metadata"]["name"], src[key])
                        refs += 1
            for ef in c.get("envFrom", []):
                for kind, key in (("Secret", "secretRef"), ("ConfigMap", "configMapRef")):
                    if key in ef:
                        assert applied.api.get("v1", kind, ef[key]["name"], NS) is not None, ef
                        refs += 1
        for v in spec.get("volumes", []):
            if "configMap" in v:
                assert applied.api.get("v1", "ConfigMap", v["configMap"]["name"], NS) is not None, v
                refs += 1
            if "secret" in v:
                assert applied.api.get("v1", "Secret", v["secret"]["secretName"], NS) is not None, v
                refs += 1
            if "persistentVolumeClaim" in v:
                claim = applied.api.get("v1", "PersistentVolumeClaim", v["persistentVolumeClaim"]["claimName"], NS)
                assert claim is not None and claim["status"]["phase"] == "Bound", v
                refs += 1
    for ing in applied.of_kind("Ingress"):
        for rule in ing["spec"]["rules"]:
            for p in rule["http"]["paths"]:
                svc = applied.api.get("v1", "Service", p["backend"]["service"]["name"], NS)
                assert svc is not None and p["backend"]["service"]["port"]["number"] in {
                    x["port"] for x in svc["spec"]["ports"]
                }
                refs += 1
        for tls in ing["spec"].get("tls", []):
            assert applied.api.get("v1", "Secret", tls["secretName"], NS) is not None, tls
        mws = ing["metadata"].get("annotations", {}).get("traefik.ingress.kubernetes.io/router.middlewares", "")
        for ref in filter(None, mws.split(",")):
            ns, _, name = ref.partition("-")  # Traefik's "<namespace>-<name>@kubernetescrd"
            assert ns == NS and applied.api.get(
                "traefik.io/v1alpha1", "Middleware", name.removesuffix("@kubernetescrd"), NS
            ), ref
            refs += 1
    assert refs >= 3 * len(applied.cfg.inference.models)


def test_fastchat_endpoints_name_exactly_the_model_services(applied):
    cm = applied.api.get("v1", "ConfigMap", "api-endpoints", NS)
    endpoints = json.loads(cm["data"]["api_endpoints.json"])
    services = {s["metadata"]["name"]: s for s in applied.api.list("v1", "Service", NS)}
    named = set()
    for entry in endpoints.values():
        host, _, port = entry["api_base"].removeprefix("http://").split("/")[0].partition(":")
        assert host in services and int(port) in {p["port"] for p in services[host]["spec"]["ports"]}, entry
        named.add(host)
    models = {s for s, v in services.items() if "hpc-cluster.io/model" in v["metadata"].get("labels", {})}
    assert named == models == {m.name for m in applied.cfg.inference.models}


def test_node_labels_patch_the_registered_nodes(applied):
    """The NodePatch adds the hardware labels and keeps what k3s set (server-side apply owns only
    its own fields)."""
    for rec in applied.records:
        if rec.manifest["kind"] != "Node":
            continue
        assert rec.patch
        node = applied.api.get("v1", "Node", rec.manifest["metadata"]["name"])
        labels = node["metadata"]["labels"]
        assert rec.manifest["metadata"]["labels"].items() <= labels.items()
        assert labels["kubernetes.io/hostname"] == node["metadata"]["name"] and "kubernetes.io/arch" in labels
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])


def test_model_cache_claim_binds_to_the_share(applied):
    claim = applied.api.get("v1", "PersistentVolumeClaim", "model-cache", NS)
    assert claim["status"]["phase"] == "Bound"
    pv = applied.api.get("v1", "PersistentVolume", claim["spec"]["volumeName"])
    sc = applied.of_kind("StorageClass")[0]
    assert pv["spec"]["csi"]["volumeAttributes"]["share"] == sc["parameters"]["share"]
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == {"dev": "Delete", "prod": "Retain"}[applied.stack]


def test_helm_releases_are_pinned_and_not_applied(applied):
    """The one chart (NFS CSI driver) comes from a repository these machines cannot reach: its
    version is pinned and the real API sees only what the release would need (the StorageClass
    naming its provisioner); the chart's own objects are not installed here."""
    releases = objects.helm_releases(applied.result)
    assert [(r["chart"], r["version"]) for r in releases] == [("csi-driver-nfs", "v4.9.0")]
    assert releases[0]["namespace"] == "kube-system"
    assert {sc["provisioner"] for sc in applied.of_kind("StorageClass")} == {objects.NFS_CSI_DRIVER}


def test_only_the_download_jobs_hold_the_hf_token_and_no_pod_has_a_service_account_token(applied):
    """Issue 26, point 5: each model's weights come from its one-shot Job (completed by the real
    Job controller before the Deployment is created); of the pods the real controllers made, only
    those Jobs' read the hf-token Secret; the serving pods run offline; and the service account
    admission plugin mounted no token into any pod of the namespace."""
    models = {m.name for m in applied.cfg.inference.models}
    jobs = {j["metadata"]["name"] for j in applied.of_kind("Job")}
    assert jobs == {f"download-{m}" for m in models}
    for name in sorted(jobs):
        wait_until(lambda n=name: job_complete(applied.api, n), f"Job {name} complete", timeout=120)
    pods = [p for p in applied.api.list("v1", "Pod", NS) if not p["metadata"].get("deletionTimestamp")]
    has_token = ("Secret", NS, HF_TOKEN_SECRET) in {r.key for r in applied.records}
    holders = {p["metadata"]["labels"]["app"] for p in pods if HF_TOKEN_SECRET in secrets_read(p)}
    assert holders == (jobs if has_token else set()), holders
    assert {p["metadata"]["labels"]["app"] for p in pods} >= models | jobs
    for p in pods:
        name = p["metadata"]["name"]
        assert p["spec"].get("automountServiceAccountToken") is False, name
        projected = [v for v in p["spec"].get("volumes", []) if "projected" in v]
        assert not any("serviceAccountToken" in s for v in projected for s in v["projected"]["sources"]), name
        if p["metadata"]["labels"]["app"] in models:
            env = {e["name"]: e.get("value") for c in p["spec"]["containers"] for e in c.get("env", [])}
            assert env.get("HF_HUB_OFFLINE") == "1" and "HF_TOKEN" not in env, name
    # the Deployment waits for its Job in the engine's order
    order = [r.key for r in applied.records]
    for m in models:
        assert order.index(("Job", NS, f"download-{m}")) < order.index(("Deployment", NS, m)), m


def covered(address: str, blocks: list[str]) -> bool:
    return any(ip_address(address) in ip_network(b) for b in blocks)


def test_only_the_downloads_reach_out_and_never_a_cluster_or_site_address(applied):
    """The policies as the server keeps them: the serving pods may send nothing; the download
    pods only DNS and HTTPS to addresses outside every pod, Service, node and private address the
    real cluster gave out (k3s's CIDRs, the stack's subnet and container range, RFC 1918)."""
    api = applied.api
    pols = {p["metadata"]["name"]: p for p in api.list("networking.k8s.io/v1", "NetworkPolicy", NS)}
    models, downloads = pols["models-egress"]["spec"], pols["downloads-egress"]["spec"]
    assert models["policyTypes"] == ["Egress"] and not models.get("egress"), models
    pods = [p for p in api.list("v1", "Pod", NS) if p["status"].get("podIP")]
    labels = lambda p: p["metadata"]["labels"]  # noqa: E731
    selects = lambda spec, p: all(e["key"] in labels(p) for e in spec["podSelector"]["matchExpressions"])  # noqa: E731
    model_apps = {m.name for m in applied.cfg.inference.models}
    assert {labels(p)["app"] for p in pods if selects(models, p)} == model_apps
    assert {labels(p)["app"] for p in pods if selects(downloads, p)} == {f"download-{m}" for m in model_apps}
    internet = [peer["ipBlock"] for rule in downloads["egress"] for peer in rule.get("to", []) if "ipBlock" in peer]
    assert [b["cidr"] for b in internet] == ["0.0.0.0/0"]
    blocked = internet[0]["except"]
    given = [p["status"]["podIP"] for p in pods]
    given += [
        s["spec"]["clusterIP"] for s in api.list("v1", "Service") if s["spec"].get("clusterIP") not in (None, "None")
    ]
    given += [
        a["address"] for n in api.list("v1", "Node") for a in n["status"]["addresses"] if a["type"] == "InternalIP"
    ]
    net = applied.cfg.network
    given += [str(net.subnet.network_address), str(net.container_range.broadcast_address), "10.42.255.1", "10.43.0.1"]
    given += ["10.40.0.1", "172.16.0.1", "192.168.255.254", "169.254.169.254", "100.64.0.1", "127.0.0.1"]
    assert [a for a in given if not covered(a, blocked)] == []
    assert not covered("1.1.1.1", blocked) and not covered("18.160.0.1", blocked)  # the Hub stays reachable
    ports = {(p["protocol"], p["port"]) for rule in downloads["egress"] for p in rule.get("ports", [])}
    assert ports == {("UDP", 53), ("TCP", 53), ("TCP", 443)}


def test_a_model_that_does_not_fit_stays_pending_and_says_why(applied):
    """A machine with less memory than its profile (a failed DIMM): the model whose pod is
    rescheduled there no longer fits, stays Pending with the scheduler's reason, and comes back
    when the memory does."""
    api, m = applied.api, applied.cfg.inference.models[-1]
    node = api.get("v1", "Node", m.host)
    full = node["status"]["allocatable"]["memory"]
    (pod,) = pods_of(api, m.name)
    others = [  # what the scheduler counts: not the finished download Jobs' pods
        p
        for p in api.list("v1", "Pod", NS, fieldSelector=f"spec.nodeName={m.host}")
        if p["metadata"]["uid"] != pod["metadata"]["uid"] and p["status"].get("phase") not in ("Succeeded", "Failed")
    ]
    room = sum(pod_requests(p, "memory") for p in others) // 1024**2 + pod_requests(pod, "memory") // 1024**2 - 1
    set_allocatable_memory(api, m.host, room)  # 1 MiB short of what the model requests
    try:
        old = pod["metadata"]["name"]
        api.request("DELETE", f"/api/v1/namespaces/{NS}/pods/{old}")
        # the old pod holds the model's hostPort until it is gone: only then is memory the reason
        wait_until(lambda: api.get("v1", "Pod", old, NS) is None, f"pod {old} gone", timeout=60)

        def unschedulable() -> str:
            conds = [c for p in pods_of(api, m.name) for c in p["status"].get("conditions", [])]
            msgs = [
                c.get("message", "")
                for c in conds
                if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
            ]
            return next((x for x in msgs if "Insufficient memory" in x), "")

        reason = wait_until(unschedulable, f"{m.name} refused by the scheduler for memory", timeout=60)
        assert f"0/{len(api.list('v1', 'Node'))} nodes are available: 1 Insufficient memory" in reason, reason
        assert not deployment_available(api, m.name)
        assert all(deployment_available(api, o.name) for o in applied.cfg.inference.models if o.name != m.name)
    finally:
        set_allocatable_memory(api, m.host, int(full.removesuffix("Mi")) if full.endswith("Mi") else room + 1)
    wait_until(lambda: deployment_available(api, m.name), f"{m.name} available again", timeout=90)
    assert [p["spec"]["nodeName"] for p in pods_of(api, m.name)] == [m.host]


def test_removing_a_model_deletes_its_objects_and_nothing_else(applied):
    """The plan without one model, applied the way the engine would (deletes in reverse
    dependency order, updates in place): the model's objects, its pods and endpoints go; every
    other object keeps its identity, no other model restarts."""
    api, gone = applied.api, applied.cfg.inference.models[0].name
    before = {r.key: r for r in applied.records}
    after = {r.key: r for r in objects.recorded(plan.run(applied.stack, without_model(applied.stack, gone)))}
    removed = [k for k in reversed(list(before)) if k not in after]
    assert {k[0] for k in removed} == {"Job", "Deployment", "Service", "Ingress", "Middleware"}
    assert all(gone in k[2] for k in removed), removed
    assert after.keys() <= before.keys()
    changed = {k for k in after if after[k].manifest != before[k].manifest}
    # the endpoints FastChat serves name the model; the NetworkPolicy admitting the models' ports
    # changes too when no other model uses its port
    assert ("ConfigMap", NS, "api-endpoints") in changed, changed
    assert changed <= {("ConfigMap", NS, "api-endpoints"), ("NetworkPolicy", NS, "models-ingress")}, changed
    uids = {k: api.get(r.manifest["apiVersion"], k[0], k[2], k[1] or None)["metadata"]["uid"] for k, r in after.items()}
    model_pods = {
        m.name: pods_of(api, m.name)[0]["metadata"]["uid"] for m in applied.cfg.inference.models if m.name != gone
    }

    for k in removed:
        api.delete(before[k].manifest["apiVersion"], k[0], k[2], k[1] or None)
    for k in changed:
        api.apply(after[k].manifest)

    wait_until(lambda: not api.list("v1", "Pod", NS, labelSelector=f"app={gone}"), f"{gone}'s pods gone", timeout=90)
    # foreground deletion: the ReplicaSet goes once its pods are gone
    wait_until(
        lambda: not api.list("apps/v1", "ReplicaSet", NS, labelSelector=f"app={gone}"),
        f"{gone}'s ReplicaSet gone",
        timeout=90,
    )
    wait_until(
        lambda: (
            not api.list("discovery.k8s.io/v1", "EndpointSlice", NS, labelSelector=f"kubernetes.io/service-name={gone}")
        ),
        f"{gone}'s endpoints gone",
        timeout=90,
    )
    for k in removed:  # foreground deletion: gone once the garbage collector has removed its dependents
        wait_until(
            lambda k=k: api.get(before[k].manifest["apiVersion"], k[0], k[2], k[1] or None) is None,
            f"{k} gone",
            timeout=90,
        )
    for k, r in after.items():
        obj = api.get(r.manifest["apiVersion"], k[0], k[2], k[1] or None)
        assert obj is not None and obj["metadata"]["uid"] == uids[k], k
    assert {m: pods_of(api, m)[0]["metadata"]["uid"] for m in model_pods} == model_pods
    endpoints = json.loads(api.get("v1", "ConfigMap", "api-endpoints", NS)["data"]["api_endpoints.json"])
    assert gone not in json.dumps(endpoints) and len(endpoints) == len(model_pods)
