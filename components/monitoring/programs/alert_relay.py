#!/usr/bin/env python3
"""Alertmanager's way to the site's webhooks (hpc-cluster), on the Slurm head: Alertmanager 0.25
shows every webhook URL in its UI and its /api/v2/status, and a webhook URL is a secret (it
usually carries the token). So Alertmanager posts to this relay on loopback, and only the relay
reads the URLs, from files readable by root alone.

Usage: alert_relay.py ADDRESS PORT TOKEN_FILE URL_DIR

* ``POST /<receiver>`` with ``Authorization: Bearer <token>`` (Alertmanager's receivers' token,
  in a 0640 file; anything else is 401): the body goes unchanged to the URL in
  ``URL_DIR/<receiver>.url`` (read on every request, so a new URL needs no restart).
* The relay answers what the site's endpoint answered, as 200 or 502: Alertmanager retries a
  5xx, so an endpoint that is down gets the notification once it is back. A receiver without a
  URL file is 404 (the config names only receivers the stack has set).
* Logs say which receiver and the endpoint's status, never the URL.
* ``GET /healthz``: 200 when the relay runs.
"""

from __future__ import annotations

import hmac
import json
import re
import sys
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

TIMEOUT_S = 10
MAX_BODY = 4 << 20
RECEIVER = re.compile(r"^/([a-z][a-z0-9-]{0,40})$")


class EndpointError(Exception):
    """What the site's endpoint did instead of accepting (its status or the connection's error)."""


def forward(url: str, body: bytes) -> int:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as r:
            return r.status
    except urllib.error.HTTPError as e:
        raise EndpointError(f"the endpoint answered {e.code}") from None
    except (urllib.error.URLError, OSError) as e:  # never str(e) of a URLError: it can hold the URL
        reason = getattr(e, "reason", e)
        raise EndpointError(f"the endpoint could not be reached ({type(reason).__name__})") from None


def serve(address: str, port: int, token_file: str, url_dir: str) -> None:
    class Handler(BaseHTTPRequestHandler):
        def reply(self, code: int, doc: object) -> None:
            data = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self.reply(200, {"status": "ok"}) if self.path == "/healthz" else self.reply(404, {"error": "not found"})

        def do_POST(self) -> None:
            with open(token_file) as f:
                token = f.read().strip()
            given = self.headers.get("Authorization", "")
            if not token or not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                self.reply(401, {"error": "a bearer token is required"})
                return
            m = RECEIVER.match(self.path)
            url_file = Path(url_dir) / f"{m.group(1)}.url" if m else None
            if url_file is None or not url_file.is_file():
                self.reply(404, {"error": "no such receiver"})
                return
            length = int(self.headers.get("Content-Length", "0"))
            if length > MAX_BODY:
                self.reply(413, {"error": "body too large"})
                return
            body = self.rfile.read(length)
            receiver = m.group(1) if m else "?"
            try:
                status = forward(url_file.read_text().strip(), body)
            except EndpointError as e:
                self.log_message("%s: %s (Alertmanager retries)", receiver, e)
                self.reply(502, {"error": str(e)})
                return
            self.log_message("%s: delivered (%d)", receiver, status)
            self.reply(200, {"delivered": status})

    ThreadingHTTPServer((address, port), Handler).serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit("usage: alert_relay.py ADDRESS PORT TOKEN_FILE URL_DIR")
    serve(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4])
