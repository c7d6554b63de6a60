"""The kubeconfig read-back and the Provider wiring against a real API server on a test host.

The k3s server is a lab host (its own network namespace, sshd, private /etc) running etcd and
kube-apiserver on its address, port 6443, as k3s does. Its /etc/rancher/k3s/k3s.yaml names
``https://127.0.0.1:6443`` like k3s's own; the plan's ``<server>-kubeconfig`` step runs there over
SSH and its stdout (what the Kubernetes provider gets) must reach the API from another machine.
"""

from __future__ import annotations

import base64
import json

import pytest
import yaml

from offline import plan
from tests.integration import lab as labmod
from tests.integration import storage_stack
from tests.integration.steps import run_step, steps

from .cluster import ControlPlane, binaries_missing

pytestmark = [pytest.mark.k8s_api, pytest.mark.integration]
SERVER = "gl1"


@pytest.fixture(scope="module")
def server_lab():
    missing = binaries_missing() or labmod.missing_tools("/usr/sbin/sshd", "ip", "nsenter", "curl")
    if missing:
        pytest.skip(str(missing))
    config = storage_stack.stack()
    config["hpc:hosts"][0]["roles"] = [*config["hpc:hosts"][0]["roles"], "k3s-server"]
    result = plan.run("dev", config)
    lab = labmod.Lab([SERVER]).up()
    cp = None
    try:
        address = lab.hosts[SERVER].address
        cp = ControlPlane(netns=f"{lab.prefix}-{SERVER}", address=address, port=6443).start(controllers=False)
        yield lab, cp, result, address
    finally:
        if cp is not None:
            cp.stop()
        lab.down()


def curl_api(lab, kubeconfig: dict, path: str) -> tuple[int, str]:
    """GET ``path`` from the lab's client machine with a kubeconfig's server, CA and token
    (curl checks the server's certificate against the kubeconfig's CA and name)."""
    cluster, user = kubeconfig["clusters"][0]["cluster"], kubeconfig["users"][0]["user"]
    ca = lab.dir / "kubeconfig-ca.crt"
    ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    proc = lab.in_client(
        "cl",
        ["curl", "-s", "--max-time", "5", "--cacert", str(ca), "-H", f"Authorization: Bearer {user['token']}",
         "-w", "\n%{http_code}", cluster["server"] + path],
    )  # fmt: skip
    body, _, code = proc.stdout.rpartition("\n")
    return int(code or 0), body or proc.stderr


def test_the_read_back_kubeconfig_reaches_the_api_from_another_machine(server_lab):
    lab, cp, result, address = server_lab
    local = cp.kubeconfig("https://127.0.0.1:6443")  # what k3s writes: the server on loopback
    assert curl_api(lab, local, "/version")[0] == 0  # from another machine, loopback is not the server
    lab.on(SERVER, ["mkdir", "-p", "/etc/rancher/k3s"])
    lab.on(SERVER, ["sh", "-c", f"umask 077; cat > /etc/rancher/k3s/k3s.yaml <<'EOF'\n{yaml.safe_dump(local)}EOF"])

    (step,) = [s for s in steps(result, ("hpc:k8s:K3sCluster",)) if s.name == f"{SERVER}-kubeconfig"]
    proc = run_step(lab, step)
    read_back = yaml.safe_load(proc.stdout)  # stdout is the kubeconfig and nothing else
    assert read_back["clusters"][0]["cluster"]["server"] == f"https://{address}:6443"
    rewritten = json.loads(json.dumps(local))
    rewritten["clusters"][0]["cluster"]["server"] = f"https://{address}:6443"
    assert read_back == rewritten  # only the server address changed
    code, body = curl_api(lab, read_back, "/api/v1/namespaces/default")
    assert code == 200 and json.loads(body)["metadata"]["name"] == "default", body
    assert run_step(lab, step).stdout == proc.stdout  # read again: the same


def test_every_kubernetes_resource_uses_the_provider_fed_by_the_read_back(server_lab):
    _, _, result, _ = server_lab
    (provider,) = [r for r in result.resources if r.type == "pulumi:providers:kubernetes"]
    (kubeconfig,) = [r for r in result.resources if r.name == f"{SERVER}-kubeconfig"]
    assert provider.property_dependencies["kubeconfig"] == [kubeconfig.urn]
    assert "stdout" in kubeconfig.options.get("additionalSecretOutputs", [])
    k8s = [r for r in result.resources if r.custom and r.type.startswith("kubernetes:")]
    assert k8s and {r.provider for r in k8s} == {provider.urn}
