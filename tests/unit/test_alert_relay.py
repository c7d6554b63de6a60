"""The head's alert relay (components/monitoring/programs/alert_relay.py), run for real on loopback
between a client that posts like Alertmanager and a site endpoint (a local HTTP server that
records what it gets). The monitoring lab runs the plan's own step with the real Alertmanager."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from components.monitoring.steps import PROGRAMS

TOKEN = "relay-test-token"
BODY = {"receiver": "cluster-admins", "status": "firing", "alerts": [{"labels": {"alertname": "NodeDown"}}]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Endpoint:
    """The site's webhook: answers ``status`` and keeps every body it got."""

    def __init__(self) -> None:
        self.status = 200
        self.bodies: list[bytes] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                endpoint.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
                self.send_response(endpoint.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/secret-path-token-xyz"


@pytest.fixture
def relay(tmp_path: Path):
    (tmp_path / "token").write_text(TOKEN + "\n")
    urls = tmp_path / "urls"
    urls.mkdir()
    port = free_port()
    argv = [
        sys.executable,
        str(PROGRAMS / "alert_relay.py"),
        "127.0.0.1",
        str(port),
        str(tmp_path / "token"),
        str(urls),
    ]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(f"{base}/healthz", timeout=5)
            break
        except OSError:
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail(f"the relay did not start: {proc.stderr.read() if proc.stderr else ''}")
    endpoint = Endpoint()
    yield base, urls, endpoint, proc
    proc.terminate()
    proc.wait(10)
    endpoint.server.shutdown()


def post(base: str, receiver: str, token: str | None = TOKEN) -> int:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(f"{base}/{receiver}", data=json.dumps(BODY).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=20) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_the_body_reaches_the_endpoint_unchanged(relay):
    base, urls, endpoint, _ = relay
    (urls / "cluster-admins.url").write_text(endpoint.url + "\n")
    assert post(base, "cluster-admins") == 200
    assert [json.loads(b) for b in endpoint.bodies] == [BODY]


def test_an_endpoint_that_fails_or_is_down_is_a_5xx_so_alertmanager_retries(relay):
    base, urls, endpoint, _ = relay
    (urls / "cluster-admins.url").write_text(endpoint.url)
    endpoint.status = 500
    assert post(base, "cluster-admins") == 502
    (urls / "cluster-admins.url").write_text(f"http://127.0.0.1:{free_port()}/nobody-listens")
    assert post(base, "cluster-admins") == 502
    endpoint.status = 200  # a new URL is read on the next request, without a restart
    (urls / "cluster-admins.url").write_text(endpoint.url)
    assert post(base, "cluster-admins") == 200


def test_without_the_token_nothing_is_forwarded(relay):
    base, urls, endpoint, _ = relay
    (urls / "cluster-admins.url").write_text(endpoint.url)
    assert post(base, "cluster-admins", token=None) == 401
    assert post(base, "cluster-admins", token="guess") == 401
    assert endpoint.bodies == []


def test_a_receiver_without_a_url_is_not_found(relay):
    base, urls, endpoint, _ = relay
    (urls / "cluster-admins.url").write_text(endpoint.url)
    assert post(base, "watchdog") == 404
    assert post(base, "..%2Fcluster-admins") == 404
    assert endpoint.bodies == []


def test_the_logs_never_show_the_url(relay):
    base, urls, endpoint, proc = relay
    (urls / "cluster-admins.url").write_text(endpoint.url)
    post(base, "cluster-admins")
    endpoint.status = 503
    post(base, "cluster-admins")
    (urls / "cluster-admins.url").write_text("http://relay-test.invalid/secret-path-token-xyz")
    post(base, "cluster-admins")
    proc.terminate()
    logs = proc.stderr.read()
    assert "cluster-admins: delivered (200)" in logs
    assert "the endpoint answered 503" in logs
    assert "secret-path-token-xyz" not in logs and "relay-test.invalid" not in logs
