"""The services ask who you are, through k3s's real ingress controller: Traefik (traefik.py) in
front of the dev and prod objects applied to a real control plane.

Traefik, its routing, basicAuth, redirects and TLS are real; behind it, the pods kwok runs are
stand-ins (backends.py): the web UI echoes what reached it, and a model server applies vLLM's
key rule to the ``--config`` file the real Secret holds (vLLM needs a GPU). Prod is planned with
a certificate made here for its publicHost, as an operator sets ``hpc:tlsCertificate``.
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest
import yaml

from offline import plan
from offline.mocks import plain
from tests.integration.lab import wait_until

from . import objects
from .applied import NS, applied_stack, pods_of
from .cluster import binaries_missing
from .traefik import Traefik, basic, binary_missing

pytestmark = pytest.mark.k8s_api
KEY_ANNOTATION = "hpc-cluster.io/api-key-digest"


def _certificate(host: str, where: Path) -> dict[str, str]:
    """A self-signed certificate for ``host``: what the site's CA would issue."""
    key, crt = where / "tls.key", where / "tls.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "2", "-subj", f"/CN={host}", "-addext", f"subjectAltName=DNS:{host}",
                    "-keyout", str(key), "-out", str(crt)], check=True, capture_output=True)  # fmt: skip
    return {"hpc:tlsCertificate": crt.read_text(), "hpc:tlsKey": key.read_text()}


def _plan(stack: str, secrets: dict[str, str], overrides: dict | None = None) -> plan.PlanRun:
    from offline import mocks, record

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(record, "stand_in_secret", lambda key: secrets.get(key) or mocks.stand_in_secret(key))
        return plan.run(stack, overrides)


class Edge:
    """One stack applied, Traefik in front, the users' keys as the plan generated them."""

    def __init__(self, stack: str, applied, traefik: Traefik, secrets: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
        self.stack, self.applied, self.traefik, self.secrets = stack, applied, traefik, secrets
        self.cfg = applied.cfg
        self.host = self.cfg.inference.public_host
        self.users = [u.name for u in self.cfg.people.users]
        self.key = {u: plain(applied.result.by_name(f"api-keys-{u}").outputs["result"]) for u in self.users}
        self.service_key = plain(applied.result.by_name("fastchat-api-key").outputs["result"])
        self.scheme = "https" if self.cfg.is_prod else "http"

    def url(self, path: str, scheme: str | None = None) -> str:
        return f"{scheme or self.scheme}://{self.host or '127.0.0.1'}{path}"

    def get(self, path: str, *args: str, scheme: str | None = None):  # type: ignore[no-untyped-def]
        extra = []
        if self.host:  # the public name resolves to this namespace's Traefik
            extra = ["--resolve", f"{self.host}:80:127.0.0.1", "--resolve", f"{self.host}:443:127.0.0.1"]
        if (scheme or self.scheme) == "https":
            extra += ["--cacert", str(self.traefik.dir / "ca.crt")]
        return self.traefik.curl(self.url(path, scheme), *extra, *args)

    def restart_backends(self) -> None:
        """The model servers (re)started: they read the keys file the Secret holds now."""
        api = self.applied.api
        secret = api.get("v1", "Secret", "vllm-api-keys", NS)
        keys_yaml = base64.b64decode(secret["data"]["api-keys.yaml"]).decode()
        models = {}
        for m in self.cfg.inference.models:
            [pod] = pods_of(api, m.name)
            models[(pod["status"]["podIP"], m.port)] = m.model_id
        self.traefik.backends(keys_yaml, self.cfg.inference.webui_port, models)


@pytest.fixture(scope="module", params=["dev", "prod"])
def edge(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    missing = binaries_missing() or binary_missing()
    if missing:
        pytest.skip(missing)
    stack = request.param
    where = tmp_path_factory.mktemp(f"tls-{stack}")
    secrets = _certificate("llm.hpc.internal", where) if stack == "prod" else {}
    with applied_stack(stack, _plan(stack, secrets), reveal=True) as a:
        assert a.refused == {}, a.refused
        t = Traefik(a.cp).start()
        try:
            if secrets:
                (t.dir / "ca.crt").write_text(secrets["hpc:tlsCertificate"])
            e = Edge(stack, a, t, secrets)
            e.restart_backends()
            first = e.cfg.inference.models[0]
            bearer = f"Authorization: Bearer {e.key[e.users[0]]}"
            wait_until(lambda: e.get(f"/{first.name}/v1/models", "-H", bearer).status == 200,
                       "Traefik routing the first model's API", timeout=90)  # fmt: skip
            wait_until(lambda: e.get("/").status == 401, "Traefik asking for the UI's login", timeout=60)
            yield e
        finally:
            print(t.log("traefik")[-1500:])
            t.stop()


def test_the_ui_asks_for_a_login_and_each_user_gets_in_with_their_own_key(edge):
    bare = edge.get("/")
    assert bare.status == 401, bare
    assert edge.get("/", "-H", basic(edge.users[0], "not-the-key")).status == 401
    assert edge.get("/", "-H", basic(edge.users[0], edge.key[edge.users[1]])).status == 401  # another's key
    assert edge.get("/", "-H", basic("fastchat", edge.service_key)).status == 401  # the service key is no login
    for user in edge.users:
        inside = edge.get("/", "-H", basic(user, edge.key[user]))
        assert inside.status == 200, (user, inside)
        seen = yaml.safe_load(inside.body)
        assert seen["app"] == "webui" and seen["authorization"] is None  # the login never reaches FastChat


def test_every_models_api_takes_each_users_key_and_nothing_else_of_vllm_is_published(edge):
    for m in edge.cfg.inference.models:
        for user in edge.users:
            ok = edge.get(f"/{m.name}/v1/models", "-H", f"Authorization: Bearer {edge.key[user]}")
            assert ok.status == 200, (m.name, user, ok)
            body = yaml.safe_load(ok.body)
            assert body["data"] == [{"id": m.model_id}] and body["path"] == "/v1/models"  # prefix stripped
        assert edge.get(f"/{m.name}/v1/models").status == 401
        assert edge.get(f"/{m.name}/v1/models", "-H", "Authorization: Bearer " + "x" * 40).status == 401
        # vLLM's /metrics and /docs are not routed to it: they fall to the UI's login
        for path in (f"/{m.name}/metrics", f"/{m.name}/docs"):
            assert edge.get(path).status == 401
            other = edge.get(path, "-H", basic(edge.users[0], edge.key[edge.users[0]]))
            assert yaml.safe_load(other.body)["app"] == "webui", (path, other)


def test_prometheus_reaches_each_models_metrics_only_with_the_monitoring_login(edge):
    """/metrics/<model> is the model server's /metrics (replacePath), behind the monitoring login
    (the basic-auth Secret from hpc:monitoringPassword); a user's login does not open it."""
    login = plain(edge.applied.result.by_name("public-metrics-login").inputs["stringData"])
    for m in edge.cfg.inference.models:
        path = f"/metrics/{m.name}"
        assert edge.get(path).status == 401
        assert edge.get(path, "-H", basic(edge.users[0], edge.key[edge.users[0]])).status == 401
        scraped = edge.get(path, "-H", basic(login["username"], login["password"]))
        assert scraped.status == 200, (m.name, scraped)
        body = yaml.safe_load(scraped.body)
        assert body["data"] == [{"id": m.model_id}] and body["path"] == "/metrics", body  # that model's own


def test_prod_redirects_plain_http_to_https_and_serves_the_sites_certificate(edge):
    if not edge.cfg.is_prod:
        # dev has no certificate: it serves over plain HTTP and redirects nothing
        assert edge.get("/", scheme="http").status == 401
        assert not edge.cfg.inference.public_host
        return
    for path in ("/", f"/{edge.cfg.inference.models[0].name}/v1/models"):
        plain_http = edge.get(path, scheme="http")
        assert plain_http.status in (301, 308), plain_http
        assert plain_http.location == f"https://{edge.host}{path}", plain_http
    secure = edge.get("/", "-v")  # verified against the site's certificate (curl fails otherwise)
    assert secure.status == 401 and f"CN={edge.host}" in secure.stderr.replace(" = ", "="), secure


def test_a_removed_users_key_and_login_stop_working_and_the_others_keep_theirs(edge):
    """The stack without its last user: the new Secrets applied, the model pods' key digest
    changes (so they restart and read the new file), Traefik reloads the users Secret."""
    gone, kept = edge.users[-1], edge.users[0]
    remaining = [u for u in yaml.safe_load((plan.ROOT / f"Pulumi.{edge.stack}.yaml").read_text())["config"]["hpc:users"]
                 if u["name"] != gone]  # fmt: skip
    after = _plan(edge.stack, edge.secrets, {"hpc:users": remaining})
    records = objects.recorded(after, reveal=True)
    for rec in records:
        if rec.manifest["kind"] == "Secret" and rec.manifest["metadata"]["name"] in ("vllm-api-keys", "webui-users"):
            edge.applied.api.apply(rec.manifest)
    digest = {r.manifest["metadata"]["name"]: r.manifest["spec"]["template"]["metadata"]["annotations"][KEY_ANNOTATION]
              for r in records if r.manifest["kind"] == "Deployment" and KEY_ANNOTATION in
              r.manifest["spec"]["template"]["metadata"].get("annotations", {})}  # fmt: skip
    before = {d["metadata"]["name"]: d["spec"]["template"]["metadata"]["annotations"][KEY_ANNOTATION]
              for d in edge.applied.of_kind("Deployment")
              if KEY_ANNOTATION in d["spec"]["template"]["metadata"].get("annotations", {})}  # fmt: skip
    models = {m.name for m in edge.cfg.inference.models}
    assert models <= set(digest) and all(digest[m] != before[m] for m in models)  # every model server restarts
    edge.restart_backends()
    first = edge.cfg.inference.models[0].name
    assert edge.get(f"/{first}/v1/models", "-H", f"Authorization: Bearer {edge.key[gone]}").status == 401
    assert edge.get(f"/{first}/v1/models", "-H", f"Authorization: Bearer {edge.key[kept]}").status == 200
    wait_until(lambda: edge.get("/", "-H", basic(gone, edge.key[gone])).status == 401,
               f"Traefik refusing {gone}'s login", timeout=60)  # fmt: skip
    assert edge.get("/", "-H", basic(kept, edge.key[kept])).status == 200
