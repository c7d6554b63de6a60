"""Stand-ins for the pods behind Traefik in the Traefik test, run as a script inside its network
namespace, where every pod address is local: ``backends.py KEYS_FILE WEBUI_PORT ADDR:PORT=MODEL...``.

* the web UI answers 200 with the path and the ``Authorization`` header it received (the login
  must never reach FastChat);
* a model server answers as vLLM does (it needs a GPU, so it cannot run here): a request under
  ``/v1`` passes only with ``Authorization: Bearer <key>`` for a key its ``--config`` file lists
  (``api-key``), read once at start as vLLM does; else 401 ``{"error": "Unauthorized"}``. It
  answers ``/v1/models`` with its model and echoes the path it got (the stripped prefix).
Prints ``ready`` once every port listens.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml


def serve(keys: set[str], webui_port: int, models: dict[tuple[str, int], str]) -> list[ThreadingHTTPServer]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _answer(self, status: int, body: dict[str, object]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            address, port = self.connection.getsockname()[:2]
            if port == webui_port:
                self._answer(200, {"app": "webui", "path": self.path, "authorization": self.headers["Authorization"]})
                return
            model = models.get((address, port))
            if model is None:
                self._answer(404, {"error": f"no model at {address}:{port}"})
                return
            auth = self.headers["Authorization"] or ""
            if self.path.startswith("/v1") and not (auth.startswith("Bearer ") and auth[7:] in keys):
                self._answer(401, {"error": "Unauthorized"})
                return
            self._answer(200, {"object": "list", "data": [{"id": model}], "path": self.path})

    servers = []
    for port in sorted({webui_port, *(p for _, p in models)}):
        server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    return servers


if __name__ == "__main__":
    keys_file, webui, *pairs = sys.argv[1:]
    accepted = set(yaml.safe_load(open(keys_file).read())["api-key"])  # noqa: SIM115
    placed = {}
    for pair in pairs:
        where, _, name = pair.partition("=")
        addr, _, port = where.rpartition(":")
        placed[(addr, int(port))] = name
    serve(accepted, int(webui), placed)
    print("ready", flush=True)
    threading.Event().wait()
