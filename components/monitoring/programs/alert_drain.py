#!/usr/bin/env python3
"""Alertmanager webhook receiver on the Slurm head (hpc-cluster): drains the Slurm node that a
hardware alert names (rules labelled ``drain="true"``: an XID, uncorrectable ECC, a lost GPU),
with the alert as the reason, so no job lands on it before an admin has looked.

Usage: alert_drain.py ADDRESS PORT CONTAINER TOKEN_FILE

* ``POST /`` with ``Authorization: Bearer <token>`` (the token Alertmanager reads from the same
  0640 file; anything else is 401) and Alertmanager's webhook body (version 4).
* For each firing alert: the node is its ``node`` label, else its ``host`` (hosts and Slurm nodes
  share names). A node already drained, by anyone, keeps its drain and reason; a host that is
  no Slurm node is skipped. It never resumes a node: after a GPU fault that is a person's call.
* When the controller cannot be asked (``scontrol`` fails any other way) the reply is 503 with
  the controller's own words, so Alertmanager retries the notification.
* ``GET /healthz``: 200 when the receiver runs.
Drains go through ``docker exec CONTAINER scontrol`` (argv, no shell); every decision is logged.
"""

from __future__ import annotations

import hmac
import json
import re
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PREFIX = "hpc-alert: "
MAX_REASON = 200
TIMEOUT_S = 20
NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


class ControllerError(Exception):
    pass


def scontrol(container: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", "exec", container, "scontrol", *args], capture_output=True, text=True, timeout=TIMEOUT_S
    )


def reason_of(labels: dict[str, str], annotations: dict[str, str]) -> str:
    name = labels.get("alertname", "alert")
    gpu = f" GPU {labels['gpu']}" if labels.get("gpu") else ""
    summary = annotations.get("summary", "")
    text = f"{PREFIX}{name}{gpu}: {summary}" if summary else f"{PREFIX}{name}{gpu}"
    text = "".join(c if c.isprintable() and c not in "\"'`" else " " for c in text)
    return text[:MAX_REASON]


def drain(container: str, node: str, reason: str) -> str:
    """'drained', 'already drained' or 'not a Slurm node'; ControllerError when it cannot tell."""
    shown = scontrol(container, "-o", "show", "node", node)
    words = (shown.stdout + shown.stderr).strip()
    if shown.returncode != 0:
        if "Invalid node name" in words:
            return "not a Slurm node"
        raise ControllerError(f"scontrol show node {node}: {words.splitlines()[-1] if words else 'no output'}")
    state = re.search(r"\bState=(\S+)", words)
    if state and "DRAIN" in state.group(1):
        return "already drained"
    done = scontrol(container, "update", f"nodename={node}", "state=drain", f"reason={reason}")
    if done.returncode != 0:
        out = (done.stdout + done.stderr).strip()
        raise ControllerError(f"scontrol update nodename={node}: {out.splitlines()[-1] if out else 'no output'}")
    return "drained"


def handle(container: str, body: dict) -> dict[str, str]:
    """Node -> what was done, for every firing alert labelled drain="true"."""
    done: dict[str, str] = {}
    for alert in body.get("alerts", []):
        labels = alert.get("labels", {})
        if alert.get("status") != "firing" or labels.get("drain") != "true":
            continue
        node = labels.get("node") or labels.get("host", "")
        if not NODE.match(node):
            done[node or "?"] = "no node named"
            continue
        if node not in done:
            done[node] = drain(container, node, reason_of(labels, alert.get("annotations", {})))
    return done


def serve(address: str, port: int, container: str, token_file: str) -> None:
    class Handler(BaseHTTPRequestHandler):
        def reply(self, code: int, doc: object) -> None:
            data = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/healthz":
                self.reply(200, {"status": "ok"})
            else:
                self.reply(404, {"error": "not found"})

        def do_POST(self) -> None:
            with open(token_file) as f:
                token = f.read().strip()
            given = self.headers.get("Authorization", "")
            if not token or not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                self.reply(401, {"error": "a bearer token is required"})
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            except (ValueError, json.JSONDecodeError) as e:
                self.reply(400, {"error": f"not an Alertmanager webhook body: {e}"})
                return
            try:
                done = handle(container, body)
            except (ControllerError, subprocess.TimeoutExpired, OSError) as e:
                self.log_message("controller: %s (Alertmanager retries)", e)
                self.reply(503, {"error": str(e)})
                return
            for node, what in done.items():
                self.log_message("%s: %s", node, what)
            self.reply(200, done)

    ThreadingHTTPServer((address, port), Handler).serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit("usage: alert_drain.py ADDRESS PORT CONTAINER TOKEN_FILE")
    serve(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4])
