"""Stand-ins for a node's systemd and Docker engine as a first deploy finds them: nothing of ours.

A playbook run locally (connection local, as the tests over recorded facts do) would otherwise
ask this machine's own systemd and Docker, which a test machine may lack (systemd not PID 1 in
a container, no Docker in CI's unit stage) or hold anything. The stand-ins answer every
question the way a fresh DGX Spark does (no unit, no image, the engine up) and record every
request, so a test can also prove that nothing was asked to change.

- ``write_systemctl(directory, log)``: a ``systemctl`` for PATH that knows no unit.
- ``DockerEngine(socket_path)``: a Docker Engine API on a unix socket (for DOCKER_HOST) that
  answers version, info and image look-ups, and 404 for anything else.
"""

from __future__ import annotations

import json
import os
import socketserver
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import TracebackType
from typing import Any

SYSTEMCTL = """\
#!/bin/sh
# A systemd that knows no unit: what a first deploy finds. Every call is logged.
echo "$*" >> {log}
for arg in "$@"; do case "$arg" in --*) ;; *) verb=${{verb:-$arg}}; unit=$arg ;; esac; done
case "$verb" in
  show) printf 'Id=%s\\nLoadState=not-found\\nActiveState=inactive\\nSubState=dead\\n' "$unit" ;;
  is-active) echo inactive; exit 3 ;;
  is-enabled) echo "Failed to get unit file state for $unit: No such file or directory" >&2; exit 1 ;;
  list-unit-files) echo "0 unit files listed."; exit 1 ;;
  *) exit 0 ;;
esac
"""
# What systemctl verbs only read.
READ_ONLY_SYSTEMCTL = {"show", "is-active", "is-enabled", "list-unit-files", "status"}


def write_systemctl(directory: Path, log: Path) -> Path:
    """Write the stand-in ``systemctl`` into ``directory`` (put it first on PATH); returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "systemctl"
    path.write_text(SYSTEMCTL.format(log=log))
    path.chmod(0o755)
    return path


def systemctl_verbs(log: Path) -> list[str]:
    """The verb of every systemctl call logged (options left out)."""
    if not log.exists():
        return []
    return [next((arg for arg in line.split() if not arg.startswith("--")), "")
            for line in log.read_text().splitlines()]


ENGINE_INFO: dict[str, Any] = {
    "ID": "fresh-node", "Containers": 0, "Images": 0, "ServerVersion": "27.5.1",
    "Runtimes": {"runc": {"path": "runc"}, "nvidia": {"path": "nvidia-container-runtime"}},
    "DefaultRuntime": "runc", "OperatingSystem": "Ubuntu 24.04.3 LTS", "Architecture": "aarch64",
}
ENGINE_VERSION: dict[str, Any] = {"Version": "27.5.1", "ApiVersion": "1.47", "MinAPIVersion": "1.24",
                                  "Os": "linux", "Arch": "arm64"}


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _answer(self) -> None:
        self.server.requests.append(f"{self.command} {self.path}")
        path = self.path.split("?")[0]
        # Docker's API puts the version first (/v1.47/info); /_ping and /version come without.
        parts = path.strip("/").split("/")
        if parts and parts[0].startswith("v1."):
            parts = parts[1:]
        route = "/" + "/".join(parts)
        if self.command == "GET" and route == "/_ping":
            self._send(200, "OK", "text/plain")
        elif self.command == "GET" and route == "/version":
            self._send(200, json.dumps(ENGINE_VERSION))
        elif self.command == "GET" and route == "/info":
            self._send(200, json.dumps(ENGINE_INFO))
        elif self.command == "GET" and route == "/images/json":
            self._send(200, "[]")
        else:
            self._send(404, json.dumps({"message": f"No such image or object: {route}"}))

    def _send(self, status: int, body: str, content_type: str = "application/json") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Api-Version", ENGINE_VERSION["ApiVersion"])
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = _answer

    def address_string(self) -> str:  # a unix socket has no peer address
        return "unix"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (the base class's name)
        pass


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    requests: list[str]


class DockerEngine:
    """A fresh node's Docker engine on ``socket_path`` while the ``with`` block runs.

    ``requests`` lists every request as "METHOD PATH"; ``url`` is the value for DOCKER_HOST.
    """

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self.url = f"unix://{socket_path}"
        socket_path.unlink(missing_ok=True)  # left by a run that was killed
        self._server = _Server(str(socket_path), _Handler)
        self._server.requests = []
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def requests(self) -> list[str]:
        return list(self._server.requests)

    def __enter__(self) -> DockerEngine:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        os.unlink(self.socket_path)
