"""Every Kubernetes object the plan records, validated against the k3s minor's schemas (strict)."""

import glob
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from offline import plan
from stacks import config as cfgmod


@pytest.fixture(scope="module", params=["dev", "prod"])
def rendered(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param)
    subprocess.run(
        [sys.executable, "-m", "offline.plan", "--stack", request.param, "--out", str(out), "--quiet"],
        cwd=plan.ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )
    raw = yaml.safe_load((plan.ROOT / f"Pulumi.{request.param}.yaml").read_text())["config"]
    minor = cfgmod.K3sConfig.model_validate(raw["hpc:k3s"]).minor
    return request.param, out, minor


def test_every_manifest_is_valid_for_the_k3s_version(rendered):
    _, out, minor = rendered
    files = sorted(glob.glob(f"{out}/files/k8s/**/*.yaml", recursive=True))
    kinds = {yaml.safe_load(Path(f).read_text())["kind"] for f in files}
    assert {
        "Deployment",
        "Service",
        "StorageClass",
        "PersistentVolumeClaim",
        "Secret",
        "ConfigMap",
        "RuntimeClass",
        "Namespace",
        "Node",
    } <= kinds
    for f in files:
        doc = yaml.safe_load(Path(f).read_text())
        if doc["apiVersion"] == "traefik.io/v1alpha1":  # k3s's Traefik CRD: no core schema; its shape here
            # (the real schema is checked by the Kubernetes API suite, which installs Traefik's CRDs)
            assert doc["kind"] == "Middleware" and len(doc["spec"]) == 1, f
            [(kind, spec)] = doc["spec"].items()
            shapes = {"stripPrefix": {"prefixes"}, "basicAuth": {"secret", "realm", "removeHeader"},
                      "redirectScheme": {"scheme", "permanent"}, "replacePath": {"path"}}  # fmt: skip
            assert kind in shapes and set(spec) <= shapes[kind], f
            paths = spec.get("prefixes", []) + ([spec["path"]] if "path" in spec else [])
            assert all(p.startswith("/") for p in paths), f
            continue
        used = kubernetes_validate.validate(doc, minor, strict=True)
        assert used.startswith(minor), (f, used)


def test_strict_validation_catches_a_broken_manifest():
    broken = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {"replicas": "one", "selector": {}, "template": {}},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.31", strict=True)


def test_storage_class_comes_from_the_storage_contract(rendered):
    stack, out, _ = rendered
    sc = yaml.safe_load(Path(f"{out}/files/k8s/_cluster/StorageClass-nfs-csi.yaml").read_text())
    server = {"dev": "192.168.0.106", "prod": "10.40.0.11"}[stack]
    assert sc["parameters"] == {"server": server, "share": "/gv/k8s"}
    assert sc["mountOptions"] == ["nfsvers=4.1"]
    assert sc["reclaimPolicy"] == {"dev": "Delete", "prod": "Retain"}[stack]
    pvc = yaml.safe_load(Path(f"{out}/files/k8s/inference/PersistentVolumeClaim-model-cache.yaml").read_text())
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"] and pvc["spec"]["storageClassName"] == "nfs-csi"


def test_dev_plan_shows_the_five_models_fastchat_and_the_csi_driver():
    dev = plan.run("dev")
    deployments = {plan.plain(r.inputs["metadata"])["name"] for r in dev.of_type("kubernetes:apps/v1:Deployment")}
    assert deployments == {
        "llama3-8b",
        "gemma-7b",
        "decilm-7b",
        "phi3-mini-128k",
        "stablelm-1-6b",
        "fastchat-controller",
        "fastchat-webui",
    }
    charts = {
        (plan.plain(r.inputs["chart"]), plan.plain(r.inputs["version"]))
        for r in dev.of_type("kubernetes:helm.sh/v3:Release")
    }
    assert charts == {("csi-driver-nfs", "v4.9.0")}  # no device plugin: models are pinned to their GPUs
