"""Running roles/fabric_transfer/files/fabric_pipe.py as Ansible runs it (``python -c SCRIPT``),
as subprocesses over loopback: the addresses and the wire format's pieces (the fixtures that give a
free port and kill what a test left running: tests/integration/conftest.py). Used by
tests/integration/test_fabric_pipe*.py.

Linux routes all of 127.0.0.0/8 to ``lo``: the receiver listens on 127.0.0.1, the allowed
sending node is 127.0.0.2 and 127.0.0.3 plays a foreign host. FABRIC_PIPE_PYTHON picks the
interpreter that runs the script (default: this one), e.g. a Python 3.9 to check the oldest
interpreter the nodes may have.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import socket
import struct
import subprocess
import sys
import time
from typing import Any

import pytest


REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = (REPO_ROOT / "roles/fabric_transfer/files/fabric_pipe.py").read_text()
PYTHON = os.environ.get("FABRIC_PIPE_PYTHON", sys.executable)

RECEIVER = "127.0.0.1"
SENDER = "127.0.0.2"
FOREIGN = "127.0.0.3"
MAGIC = b"FPIPE1\n\0"
CHUNK = 1 << 20
WAIT = 30  # seconds any single process or socket operation may take before the test fails


def loopback_aliases_work() -> bool:
    """Return whether 127.0.0.2 and 127.0.0.3 can be bound (Linux: all of 127/8 is lo)."""
    try:
        for address in (SENDER, FOREIGN):
            with socket.socket() as probe:
                probe.bind((address, 0))
    except OSError:
        return False
    return True


def start(
    processes: list[subprocess.Popen[bytes]], *args: str, **popen: Any
) -> subprocess.Popen[bytes]:
    """Start the script with ``args``, as Ansible does (``python3 -c SCRIPT ...``)."""
    process = subprocess.Popen([PYTHON, "-c", SCRIPT, *args], **popen)
    processes.append(process)
    return process


def start_recv(
    processes: list[subprocess.Popen[bytes]],
    port: int,
    out: pathlib.Path,
    *extra: str,
    seconds: float = WAIT,
    stdout: Any = None,
) -> subprocess.Popen[bytes]:
    """Start a receiver on 127.0.0.1 that allows 127.0.0.2 and writes the stream to ``out``."""
    return start(
        processes,
        "recv", RECEIVER, str(port), str(seconds), "--peer", SENDER, *extra,
        stdout=stdout if stdout is not None else out.open("wb"),
        stderr=subprocess.PIPE,
    )  # fmt: skip


def start_send(
    processes: list[subprocess.Popen[bytes]], port: int, source: pathlib.Path, *extra: str
) -> subprocess.Popen[bytes]:
    """Start a sender from 127.0.0.2 that streams the file ``source``."""
    return start(
        processes,
        "send", RECEIVER, str(port), "--bind", SENDER, *extra,
        stdin=source.open("rb"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def finish(process: subprocess.Popen[bytes]) -> tuple[int, str, str]:
    """Wait for ``process``; return its exit code, stdout and stderr (text)."""
    out, err = process.communicate(timeout=WAIT)
    return process.returncode, (out or b"").decode(), (err or b"").decode()


def digest_of(data: bytes) -> dict[str, Any]:
    """Return the JSON record both ends print for ``data``."""
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def frame(payload: bytes) -> bytes:
    """Return one frame of the wire format."""
    return struct.pack("!I", len(payload)) + payload


def connect_from(source: str, port: int) -> socket.socket:
    """Connect to the receiver from ``source``, retrying until it listens."""
    deadline = time.monotonic() + WAIT
    while True:
        client = socket.socket()
        client.settimeout(WAIT)
        client.bind((source, 0))
        try:
            client.connect((RECEIVER, port))
            return client
        except ConnectionRefusedError:
            client.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def closed_by_peer(client: socket.socket) -> bool:
    """Return whether the peer closed ``client`` (EOF or reset) within WAIT seconds."""
    try:
        return client.recv(1) == b""
    except ConnectionResetError:
        return True


needs_loopback_aliases = pytest.mark.skipif(
    not loopback_aliases_work(), reason="needs 127.0.0.2 and 127.0.0.3 on loopback (Linux)"
)
