"""The head's alert receiver (components/monitoring/programs/alert_drain.py), run for real on
loopback and sent Alertmanager's webhook body. Stand-in, for what a unit test cannot run: the
head container's ``scontrol`` (behind ``docker exec``), which records every update asked for.
The integration suites run the plan's own step on a lab head."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from components.monitoring.steps import PROGRAMS

DOCKER = r"""#!/bin/bash
# stand-in: docker exec CONTAINER scontrol ...
d=$(dirname "$0")
shift 2  # exec CONTAINER
[ "$1" = scontrol ] || exit 2
shift
down="slurm_load_node error: Unable to contact slurm controller (connect failure)"
[ ! -e "$d/down" ] || { echo "$down" >&2; exit 1; }
case "$1 $2 $3" in
  "-o show node")
    [ -e "$d/node-$4" ] || { echo "Node $4 not found" >&2; echo "Invalid node name specified" >&2; exit 1; }
    cat "$d/node-$4" ;;
  update*) printf '%s\n' "$*" >>"$d/updates" ;;
  *) exit 2 ;;
esac
"""


def alert(status: str = "firing", **labels: str) -> dict:
    return {"status": status, "labels": labels, "annotations": {"summary": f"GPU {labels.get('gpu')} reported XID 79"}}


class Receiver:
    def __init__(self, tmp: Path):
        self.bin = tmp / "bin"
        self.bin.mkdir()
        (self.bin / "docker").write_text(DOCKER)
        (self.bin / "docker").chmod(0o755)
        self.token = tmp / "token"
        self.token.write_text("s3cr3t-token\n")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        argv = [sys.executable, str(PROGRAMS / "alert_drain.py"), "127.0.0.1", str(self.port), "slurm-head",
                str(self.token)]  # fmt: skip
        self.proc = subprocess.Popen(argv, env={"PATH": f"{self.bin}:/usr/bin:/bin"}, stderr=subprocess.PIPE, text=True)
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=5)
                break
            except OSError:
                time.sleep(0.1)

    def node(self, name: str, state: str) -> None:
        (self.bin / f"node-{name}").write_text(f"NodeName={name} State={state} Reason=none\n")

    def post(self, alerts: list[dict], token: str = "s3cr3t-token") -> tuple[int, dict]:
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/", data=json.dumps({"version": "4", "alerts": alerts}).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def updates(self) -> list[str]:
        f = self.bin / "updates"
        return f.read_text().splitlines() if f.exists() else []


@pytest.fixture
def rx(tmp_path):
    r = Receiver(tmp_path)
    yield r
    r.proc.terminate()
    r.proc.wait(timeout=10)


def test_a_firing_drain_alert_drains_its_node_with_the_alert_as_reason(rx):
    rx.node("w2", "IDLE")
    code, done = rx.post([alert(alertname="GpuXidError", host="w2", gpu="1", drain="true")])
    assert (code, done) == (200, {"w2": "drained"})
    assert rx.updates() == ["update nodename=w2 state=drain reason=hpc-alert: GpuXidError GPU 1: GPU 1 reported XID 79"]


def test_resolved_unlabelled_drained_and_unknown_nodes_are_left_alone(rx):
    rx.node("w1", "IDLE+DRAIN")  # an admin's (or the health check's) drain keeps its reason
    rx.node("w3", "IDLE")
    code, done = rx.post([
        alert(alertname="GpuXidError", host="w1", gpu="0", drain="true"),
        alert("resolved", alertname="GpuXidError", host="w3", gpu="0", drain="true"),
        alert(alertname="GpuTemperatureHigh", host="w3", gpu="0"),
        alert(alertname="HostMemoryEccUncorrectable", host="storage1", drain="true"),
    ])  # fmt: skip
    assert code == 200 and done == {"w1": "already drained", "storage1": "not a Slurm node"}
    assert rx.updates() == []


def test_a_controller_that_cannot_be_asked_makes_alertmanager_retry(rx):
    (rx.bin / "down").write_text("")
    code, body = rx.post([alert(alertname="GpuMissing", host="w2", drain="true")])
    assert code == 503 and "Unable to contact slurm controller" in body["error"]
    (rx.bin / "down").unlink()
    rx.node("w2", "MIXED")
    assert rx.post([alert(alertname="GpuMissing", host="w2", drain="true")]) == (200, {"w2": "drained"})


def test_without_the_token_nothing_is_drained(rx):
    rx.node("w2", "IDLE")
    assert rx.post([alert(alertname="GpuXidError", host="w2", drain="true")], token="guess")[0] == 401
    assert rx.updates() == []
