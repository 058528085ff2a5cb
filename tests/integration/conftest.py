"""Fixtures of the tests that run roles/fabric_transfer/files/fabric_pipe.py over loopback."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator

import pytest

from support.fabric_pipe_run import RECEIVER, WAIT


@pytest.fixture
def port() -> int:
    """Return a TCP port that is free on the receiver's address right now."""
    with socket.socket() as probe:
        probe.bind((RECEIVER, 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Collect the processes a test starts and kill those still running at its end."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(WAIT)
