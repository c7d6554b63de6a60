"""The FastChat image, built and run for real from the prod plan's records.

* The image is built from the plan's recorded ``docker.Image`` inputs (context, Dockerfile,
  platform, image name) on a stand-in for its pinned ``python:3.11-slim-bookworm`` base
  (``docker_lab.STAND_INS``); pip installs the lock file with ``--require-hashes`` from PyPI.
  The prod stack is used because its k3s server is x86_64: the dev stack's is a Raspberry Pi
  (linux/arm64), which this machine cannot build for.
* The controller and the web UI run as the plan's Deployments say (image, args, ports, the
  ``api-endpoints`` ConfigMap mounted read-only at its mount path, the API key in the environment
  from its Secret), under Docker in a lab host. What Kubernetes would add is emulated: the
  Secret's value (a test key), the ConfigMap as a file, the Services' names as host entries.
  Scheduling them for real is the Kubernetes API suite's job.
"""

from __future__ import annotations

import json
import shlex
import time
from typing import Any

import pytest

from offline import plan
from offline.mocks import plain
from tests.integration import docker_lab
from tests.integration import lab as labmod

pytestmark = pytest.mark.integration

NET = "10.82.0"
TOOLS = ("dockerd", "debootstrap", "/usr/sbin/sshd", "nsenter")
TEST_KEY = "fastchat-test-key-" + "k" * 22  # stands in for the vllm-api-key Secret's value


class Records:
    """The prod plan's FastChat records."""

    def __init__(self) -> None:
        result = plan.run("prod")
        by_name = {r.name: r for r in result.resources}
        self.image = by_name["fastchat-image"]
        self.deployments = {
            role: plain(by_name[f"fastchat-{role}"].inputs)["spec"]["template"]["spec"]
            for role in ("controller", "webui")
        }
        self.endpoints = plain(by_name["fastchat-api-endpoints"].inputs)["data"]["api_endpoints.json"]

    @property
    def tag(self) -> str:
        return str(plain(self.image.inputs)["imageName"])


def container_spec(pod: dict[str, Any]) -> dict[str, Any]:
    [container] = pod["containers"]
    return dict(container)


@pytest.fixture(scope="module")
def records() -> Records:
    return Records()


@pytest.fixture(scope="module")
def built(records, tmp_path_factory):
    builder = docker_lab.Builder(tmp_path_factory.mktemp("fastchat-builder"))
    try:
        started = time.monotonic()
        tar = builder.image(records.image)
        print(f"{records.tag}: {tar.stat().st_size / 2**20:.0f} MiB saved; "
              f"built in {builder.timings.get(records.tag, 0):.0f} s (0: from the cache); "
              f"{time.monotonic() - started:.0f} s in all")  # fmt: skip
        yield tar
    finally:
        builder.stop()


@pytest.fixture(scope="module")
def host(built, records, tmp_path_factory):
    """A lab host with its own dockerd, the image loaded, controller and web UI running."""
    labmod.require(*TOOLS)
    lab = labmod.Lab(["k3s"], net=NET)
    daemon = None
    try:
        lab.up()
        daemon = docker_lab.Dockerd(lab.dir / "docker", holder=lab.hosts["k3s"].holder).start()
        daemon.load_as(built, records.tag)
        endpoints = lab.dir / "endpoints"
        endpoints.mkdir(mode=0o755)
        webui = container_spec(records.deployments["webui"])
        [mount] = webui["volumeMounts"]
        (endpoints / "api_endpoints.json").write_text(records.endpoints)
        (endpoints / "api_endpoints.json").chmod(0o644)
        for role in ("controller", "webui"):
            spec = container_spec(records.deployments[role])
            env = [f"VLLM_API_KEY={TEST_KEY}"] if any(e["name"] == "VLLM_API_KEY" for e in spec.get("env", [])) else []
            binds = {str(endpoints): {"bind": mount["mountPath"], "mode": "ro"}} if spec.get("volumeMounts") else {}
            created = daemon.api.create_container(
                spec["image"], command=spec["args"], name=f"fastchat-{role}", environment=env,
                host_config=daemon.api.create_host_config(
                    network_mode="host", binds=binds,
                    extra_hosts={"fastchat-controller": "127.0.0.1"},  # the controller Service's name
                    # the Deployment's securityContext, as Docker spells it
                    cap_drop=spec["securityContext"]["capabilities"]["drop"],
                    security_opt=[] if spec["securityContext"]["allowPrivilegeEscalation"] else ["no-new-privileges"],
                ),
            )  # fmt: skip
            daemon.api.start(created["Id"])
        yield lab, daemon
    finally:
        if daemon is not None:
            daemon.stop()
        lab.down()


def http(lab: labmod.Lab, url: str, body: str | None = None) -> tuple[int, str]:
    """An HTTP request from the lab's client namespace."""
    code = (
        "import sys, urllib.request\n"
        "data = sys.argv[2].encode() if len(sys.argv) > 2 else None\n"
        "try:\n"
        "    r = urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=data), timeout=10)\n"
        "    print(r.status); print(r.read().decode())\n"
        "except urllib.error.HTTPError as e:\n"
        "    print(e.code); print(e.read().decode())\n"
    )
    proc = lab.in_client("cl", ["python3", "-c", code, url, *([body] if body is not None else [])])
    if proc.returncode != 0:
        return 0, proc.stderr
    status, _, text = proc.stdout.partition("\n")
    return int(status), text


def test_image_is_built_from_the_plan_record_and_runs_as_non_root(host, records):
    _, daemon = host
    assert plain(records.image.inputs)["build"]["platform"] == "linux/amd64"
    size = daemon.image_size(records.tag)
    print(f"{records.tag}: {size / 2**20:.0f} MiB")
    rc, out = daemon.exec("fastchat-webui", "id -u; python3 -c 'import fastchat; print(fastchat.__version__)'")
    assert rc == 0 and out.split() == ["10001", "0.2.36"], out


def test_controller_answers(host):
    lab, daemon = host
    daemon.wait_ready("fastchat-controller", lambda: http(lab, f"http://{NET}.11:21001/list_models", "{}")[0] == 200,
                      "the controller")  # fmt: skip
    status, text = http(lab, f"http://{NET}.11:21001/list_models", "{}")
    assert status == 200 and json.loads(text) == {"models": []}


def test_web_ui_serves_every_model_of_the_config_map(host, records):
    lab, daemon = host
    daemon.wait_ready("fastchat-webui", lambda: http(lab, f"http://{NET}.11:7860/")[0] == 200, "the web UI")
    status, config = http(lab, f"http://{NET}.11:7860/config")
    assert status == 200
    for display_name in json.loads(records.endpoints):
        assert json.dumps(display_name) in config, f"{display_name} is not offered by the web UI"


def test_the_api_key_reaches_only_a_private_copy_of_the_endpoints(host, records):
    _, daemon = host
    rc, args = daemon.exec("fastchat-webui", "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; true")
    assert rc == 0 and TEST_KEY not in args  # never on a command line
    find = (
        "import glob, os\n"
        "for p in glob.glob('/proc/[0-9]*/cmdline'):\n"
        "    argv = open(p, 'rb').read().decode().split('\\0')\n"
        "    if '--register-api-endpoint-file' in argv:\n"
        "        f = argv[argv.index('--register-api-endpoint-file') + 1]\n"
        "        st = os.stat(f)\n"
        "        print(oct(st.st_mode & 0o777)[2:], st.st_uid); print(open(f).read()); break\n"
    )
    rc, listing = daemon.exec("fastchat-webui", f"python3 -c {shlex.quote(find)}")
    assert rc == 0, listing
    mode, _, content = listing.partition("\n")
    assert mode.split() == ["600", "10001"]
    data = json.loads(content)
    assert set(data) == set(json.loads(records.endpoints))
    assert all(entry["api_key"] == TEST_KEY for entry in data.values())


def healthy(daemon: docker_lab.Dockerd, name: str) -> bool:
    status = daemon.health(name)
    assert status != "unhealthy", daemon.tail(name)
    return status == "healthy"


def test_docker_reports_both_healthy(host):
    _, daemon = host
    for name in ("fastchat-controller", "fastchat-webui"):
        daemon.wait_ready(name, lambda n=name: healthy(daemon, n), f"{name} healthy")


def test_web_ui_refuses_to_start_without_the_api_key(host, records):
    _, daemon = host
    created = daemon.api.create_container(records.tag, command=["webui"],
                                          host_config=daemon.api.create_host_config(network_mode="none"))  # fmt: skip
    daemon.api.start(created["Id"])
    assert daemon.api.wait(created["Id"], timeout=60)["StatusCode"] != 0
    assert "VLLM_API_KEY is not set" in daemon.api.logs(created["Id"]).decode()
