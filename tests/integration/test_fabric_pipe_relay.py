"""Tests of ``fabric_pipe.py recv --forward``: one stream along a chain of nodes.

The chain on loopback: the sending node 127.0.0.2 -> the relay 127.0.0.1 -> the last node
127.0.0.4, which allows the relay only. Each node is a real ``python -c SCRIPT`` process, as
Ansible runs it; the helpers and fixtures are tests/support/fabric_pipe_run.py's.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import socket
import subprocess
import time

from support.fabric_pipe_run import (
    CHUNK,
    MAGIC,
    RECEIVER,
    WAIT,
    connect_from,
    digest_of,
    finish,
    frame,
    needs_loopback_aliases,
    start,
    start_recv,
    start_send,
)

LAST = "127.0.0.4"

pytestmark = needs_loopback_aliases


def start_last(
    processes: list[subprocess.Popen[bytes]], port: int, out: pathlib.Path, digest: pathlib.Path
) -> subprocess.Popen[bytes]:
    """Start the last node of the chain: it listens on 127.0.0.4 and allows the relay only."""
    return start(
        processes,
        "recv", LAST, str(port), str(WAIT), "--peer", RECEIVER, "--digest-file", str(digest),
        stdout=out.open("wb"), stderr=subprocess.PIPE,
    )  # fmt: skip


def start_relay(
    processes: list[subprocess.Popen[bytes]], port: int, out: pathlib.Path, *extra: str, **kw: object
) -> subprocess.Popen[bytes]:
    """Start the relay on 127.0.0.1: it takes the sending node's stream and forwards it."""
    return start_recv(processes, port, out, "--forward", LAST, *extra, **kw)  # type: ignore[arg-type]


def test_every_node_of_the_chain_gets_the_stream_the_source_sent_once(
    tmp_path: pathlib.Path, port: int, processes: list[subprocess.Popen[bytes]]
) -> None:
    data = os.urandom(7 * CHUNK + 321)
    source = tmp_path / "in"
    source.write_bytes(data)
    last = start_last(processes, port, tmp_path / "last", tmp_path / "last.digest")
    relay = start_relay(processes, port, tmp_path / "relay", "--digest-file", str(tmp_path / "relay.digest"))
    sender = start_send(processes, port, source)

    send_rc, send_out, send_err = finish(sender)
    relay_rc, _stdout, relay_err = finish(relay)
    last_rc, _stdout, last_err = finish(last)

    assert (send_rc, relay_rc, last_rc) == (0, 0, 0), send_err + relay_err + last_err
    assert json.loads(send_out) == digest_of(data)  # the source read and sent the data once
    for node in ("relay", "last"):
        assert (tmp_path / node).read_bytes() == data
        assert json.loads((tmp_path / f"{node}.digest").read_text()) == digest_of(data)
    assert f"forwarded 7.00 MiB to {LAST}:{port}, confirmed" in relay_err


def test_a_next_node_that_never_listens_stops_only_the_forwarding(
    tmp_path: pathlib.Path, port: int, processes: list[subprocess.Popen[bytes]]
) -> None:
    data = os.urandom(CHUNK + 5)
    source = tmp_path / "in"
    source.write_bytes(data)
    relay = start_relay(processes, port, tmp_path / "relay", "--forward-retry-seconds", "1")
    send_rc, _stdout, send_err = finish(start_send(processes, port, source))
    relay_rc, _stdout, relay_err = finish(relay)

    assert (send_rc, relay_rc) == (0, 0), send_err + relay_err
    assert (tmp_path / "relay").read_bytes() == data
    assert re.search(rf"not forwarding to {LAST}:{port}: could not connect", relay_err), relay_err


def relay_connected_to_last(port: int) -> bool:
    """Whether a connection to the last node's port is established (Linux /proc/net/tcp)."""
    local = f"0400007F:{port:04X}"  # 127.0.0.4, as the kernel writes it
    lines = pathlib.Path("/proc/net/tcp").read_text().splitlines()[1:]
    return any(fields[1] == local and fields[3] == "01" for fields in (line.split() for line in lines))


def test_a_next_node_lost_on_the_way_stops_only_the_forwarding(
    tmp_path: pathlib.Path, port: int, processes: list[subprocess.Popen[bytes]]
) -> None:
    last = start_last(processes, port, tmp_path / "last", tmp_path / "last.digest")
    relay = start_relay(processes, port, tmp_path / "relay")
    client = connect_from("127.0.0.2", port)
    client.sendall(MAGIC + frame(os.urandom(CHUNK)))
    # Kill the next node once the relay is connected to it (a loaded machine may start it late:
    # killed before it listens, it would be a next node that never came, the test above).
    deadline = time.monotonic() + WAIT
    while not relay_connected_to_last(port):
        assert time.monotonic() < deadline, "the relay never connected to the last node"
        time.sleep(0.05)
    last.kill()  # the next node dies in the middle of the stream
    last.wait(WAIT)
    rest = os.urandom(20 * CHUNK)  # more than the socket buffers hold: the relay must notice
    client.sendall(b"".join(frame(rest[i : i + CHUNK]) for i in range(0, len(rest), CHUNK)))
    client.sendall(frame(b""))
    confirmed = client.recv(8)
    client.close()
    relay_rc, _stdout, relay_err = finish(relay)

    assert relay_rc == 0, relay_err
    assert int.from_bytes(confirmed, "big") == 21 * CHUNK
    assert (tmp_path / "relay").stat().st_size == 21 * CHUNK
    assert f"not forwarding to {LAST}:{port}: " in relay_err


def test_a_relay_whose_stream_is_cut_cuts_the_next_node_at_once(
    tmp_path: pathlib.Path, port: int, processes: list[subprocess.Popen[bytes]]
) -> None:
    last = start_last(processes, port, tmp_path / "last", tmp_path / "last.digest")
    relay = start_relay(processes, port, tmp_path / "relay")
    client = connect_from("127.0.0.2", port)
    client.sendall(MAGIC + frame(os.urandom(1000)))
    client.close()  # cut before the end-of-stream marker

    relay_rc, _stdout, relay_err = finish(relay)
    last_rc, _stdout, last_err = finish(last)  # long before its WAIT-second deadline

    assert (relay_rc, last_rc) == (1, 1), relay_err + last_err
    assert "stream cut after 1000 bytes" in relay_err
    assert "stream cut after 1000 bytes" in last_err
    assert not (tmp_path / "last.digest").exists()


def test_a_relay_whose_command_stops_reading_still_forwards_then_fails(
    tmp_path: pathlib.Path, port: int, processes: list[subprocess.Popen[bytes]]
) -> None:
    data = os.urandom(16 * CHUNK)
    source = tmp_path / "in"
    source.write_bytes(data)
    last = start_last(processes, port, tmp_path / "last", tmp_path / "last.digest")
    relay = start_relay(processes, port, tmp_path / "unused", "--digest-file", str(tmp_path / "relay.digest"),
                        stdout=subprocess.PIPE)
    assert relay.stdout is not None
    relay.stdout.close()  # like `docker load` dying at once on the relay

    send_rc, send_out, send_err = finish(start_send(processes, port, source))
    relay_rc, _stdout, relay_err = finish(relay)
    last_rc, _stdout, last_err = finish(last)

    assert (send_rc, relay_rc, last_rc) == (0, 1, 0), send_err + relay_err + last_err
    assert json.loads(send_out) == digest_of(data)
    assert (tmp_path / "last").read_bytes() == data
    assert "the receiving command stopped reading after 0 bytes" in relay_err
    assert not (tmp_path / "relay.digest").exists()
    assert "Traceback" not in relay_err


def test_the_relay_forwards_from_its_own_address(
    tmp_path: pathlib.Path, port: int, processes: list[subprocess.Popen[bytes]]
) -> None:
    with socket.create_server((LAST, port)) as server:  # the next node, seeing who connects
        server.settimeout(WAIT)
        relay = start_relay(processes, port, tmp_path / "relay")
        conn, address = server.accept()
        with conn:
            assert address[0] == RECEIVER
        relay.kill()
