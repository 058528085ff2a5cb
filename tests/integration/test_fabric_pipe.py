"""Tests of roles/fabric_transfer/files/fabric_pipe.py, run as Ansible runs it.

Every test runs the real script with ``python -c SCRIPT`` as subprocesses over loopback.
Linux routes all of 127.0.0.0/8 to ``lo``: the receiver listens on 127.0.0.1, the allowed
sending node is 127.0.0.2 (the sender's ``--bind``, or a hand-made client bound to it) and
127.0.0.3 plays a foreign host. Hand-made clients speak the wire format directly to cut a
stream or to send something else. Every wait has a timeout, so a regression fails instead
of hanging; a fixture kills whatever is still running at the end.

FABRIC_PIPE_PYTHON picks the interpreter that runs the script (default: this one), e.g. a
Python 3.9 to check the oldest interpreter the nodes may have.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import socket
import struct
import subprocess
import threading
import time

import pytest

from support.fabric_pipe_run import (
    CHUNK,
    FOREIGN,
    MAGIC,
    RECEIVER,
    SENDER,
    WAIT,
    closed_by_peer,
    connect_from,
    digest_of,
    finish,
    frame,
    needs_loopback_aliases,
    start,
    start_recv,
    start_send,
)

pytestmark = needs_loopback_aliases


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, 5 * CHUNK + 123], ids=lambda n: f"{n}B")
def test_round_trip_delivers_the_bytes_and_matching_digests(
    tmp_path: pathlib.Path, port: int, processes: list[subprocess.Popen[bytes]], size: int
) -> None:
    data = os.urandom(size)
    source, received, digest_file = tmp_path / "in", tmp_path / "out", tmp_path / "digest"
    source.write_bytes(data)
    receiver = start_recv(processes, port, received, "--digest-file", str(digest_file))
    sender = start_send(processes, port, source)

    send_rc, send_out, send_err = finish(sender)
    recv_rc, _stdout, recv_err = finish(receiver)

    assert (send_rc, recv_rc) == (0, 0), send_err + recv_err
    assert received.read_bytes() == data
    assert json.loads(send_out) == digest_of(data)
    assert send_out.count("\n") == 1  # stdout holds the one JSON line only
    assert json.loads(digest_file.read_text()) == digest_of(data)
    assert "fabric_pipe recv: done," in recv_err
    assert "fabric_pipe send: done," in send_err


def test_without_digest_file_the_receiver_prints_the_record_on_stderr(
    tmp_path: pathlib.Path, port: int, processes: list[subprocess.Popen[bytes]]
) -> None:
    data = b"model weights" * 1000
    source, received = tmp_path / "in", tmp_path / "out"
    source.write_bytes(data)
    receiver = start_recv(processes, port, received)
    sender = start_send(processes, port, source)

    assert finish(sender)[0] == 0
    recv_rc, _stdout, recv_err = finish(receiver)

    assert recv_rc == 0
    records = [json.loads(line) for line in recv_err.splitlines() if line.startswith("{")]
    assert records == [digest_of(data)]


def test_a_foreign_peer_is_refused_and_the_sending_node_still_gets_through(
    tmp_path: pathlib.Path, port: int, processes: list[subprocess.Popen[bytes]]
) -> None:
    data = os.urandom(3 * CHUNK)
    source, received, digest_file = tmp_path / "in", tmp_path / "out", tmp_path / "digest"
    source.write_bytes(data)
    receiver = start_recv(processes, port, received, "--digest-file", str(digest_file))

    with connect_from(FOREIGN, port) as intruder:
        intruder.sendall(MAGIC + frame(b"evil image") + frame(b""))
        assert closed_by_peer(intruder)
    # the real sender, started from the foreign address, is refused too and says so
    foreign_sender = start(
        processes, "send", RECEIVER, str(port), "--bind", FOREIGN,
        stdin=source.open("rb"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    foreign_rc, foreign_out, foreign_err = finish(foreign_sender)
    assert foreign_rc == 1, foreign_err
    assert foreign_out == ""
    assert "lost after" in foreign_err or "without confirming" in foreign_err
    assert receiver.poll() is None  # still waiting for the sending node

    send_rc, send_out, send_err = finish(start_send(processes, port, source))
    recv_rc, _stdout, recv_err = finish(receiver)

    assert (send_rc, recv_rc) == (0, 0), send_err + recv_err
    refusals = re.findall(r"refused connection from (\S+): not the sending node (\S+)", recv_err)
    assert refusals == [(FOREIGN, SENDER), (FOREIGN, SENDER)]
    assert received.read_bytes() == data
    assert json.loads(send_out) == json.loads(digest_file.read_text()) == digest_of(data)


def test_any_of_several_peers_is_accepted(
    tmp_path: pathlib.Path, port: int, processes: list[subprocess.Popen[bytes]]
) -> None:
    received = tmp_path / "out"
    receiver = start_recv(processes, port, received, "--peer", FOREIGN)

    with connect_from(FOREIGN, port) as client:
        client.sendall(MAGIC + frame(b"hello") + frame(b""))
        assert struct.unpack("!Q", client.recv(8)) == (5,)

    recv_rc, _stdout, recv_err = finish(receiver)
    assert recv_rc == 0, recv_err
    assert received.read_bytes() == b"hello"


@pytest.mark.parametrize("how", ["close", "reset", "mid-frame", "before-header"])
def test_a_cut_stream_makes_the_receiver_fail_naming_the_cut(
    tmp_path: pathlib.Path, port: int, processes: list[subprocess.Popen[bytes]], how: str
) -> None:
    received, digest_file = tmp_path / "out", tmp_path / "digest"
    receiver = start_recv(processes, port, received, "--digest-file", str(digest_file))
    payload = [os.urandom(CHUNK), os.urandom(1000), os.urandom(CHUNK // 2)]
    delivered = b"" if how == "before-header" else b"".join(payload)

    client = connect_from(SENDER, port)
    if how != "before-header":
        client.sendall(MAGIC + b"".join(frame(p) for p in payload))
    if how == "mid-frame":
        client.sendall(struct.pack("!I", 4096) + b"partial")
    if how == "reset":  # an RST instead of a FIN
        time.sleep(0.5)  # let the receiver read what was sent before the reset
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()

    recv_rc, _stdout, recv_err = finish(receiver)

    assert recv_rc == 1
    cut = re.search(r"stream cut after (\d+) bytes: (.+)", recv_err)
    assert cut, recv_err
    count = int(cut.group(1))
    if how == "reset":  # data still queued at the receiver when the RST comes is lost
        assert count <= len(delivered)
        assert "reset" in cut.group(2).lower()
    else:
        assert count == len(delivered)
    assert received.read_bytes() == delivered[:count]
    assert not digest_file.exists()


def test_the_receiver_times_out_when_nobody_comes(
    tmp_path: pathlib.Path, port: int, processes: list[subprocess.Popen[bytes]]
) -> None:
    digest_file = tmp_path / "digest"
    digest_file.write_text('{"bytes": 1, "sha256": "from an earlier run"}\n')
    began = time.monotonic()
    receiver = start_recv(
        processes, port, tmp_path / "out", "--digest-file", str(digest_file), seconds=1.5
    )
    with connect_from(FOREIGN, port) as intruder:  # a refused connection does not count
        assert closed_by_peer(intruder)

    recv_rc, _stdout, recv_err = finish(receiver)

    assert recv_rc == 3
    assert 1.5 <= time.monotonic() - began < WAIT
    assert f"no connection from the sending node {SENDER} within 1.5 s" in recv_err
    assert not digest_file.exists()  # a stale digest cannot pass for this run's


def test_progress_lines_appear_on_both_ends(
    tmp_path: pathlib.Path, port: int, processes: list[subprocess.Popen[bytes]]
) -> None:
    piece, pieces = os.urandom(256 * 1024), 12
    receiver = start_recv(processes, port, tmp_path / "out", "--progress-seconds", "0.2")
    read_end, write_end = os.pipe()
    sender = start(
        processes,
        "send", RECEIVER, str(port), "--bind", SENDER,
        "--progress-seconds", "0.2", "--total", str(len(piece) * pieces),
        stdin=read_end, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    os.close(read_end)

    def produce_slowly() -> None:  # about 1.8 s: a frame (1 MiB) every 0.6 s
        with open(write_end, "wb", buffering=0) as producer_out:
            for _piece in range(pieces):
                producer_out.write(piece)
                time.sleep(0.15)

    producer = threading.Thread(target=produce_slowly, daemon=True)
    producer.start()
    producer.join(WAIT)
    send_rc, _stdout, send_err = finish(sender)
    recv_rc, _stdout, recv_err = finish(receiver)

    assert (send_rc, recv_rc) == (0, 0), send_err + recv_err
    number = r"\d+\.\d+"
    sent = re.findall(
        rf"^fabric_pipe send: {number} MiB of 3\.00 MiB \(\d+%\), {number} MB/s, {number} s$",
        send_err,
        re.MULTILINE,
    )
    got = re.findall(
        rf"^fabric_pipe recv: {number} MiB, {number} MB/s, {number} s$", recv_err, re.MULTILINE
    )
    assert sent and got, send_err + recv_err
    assert re.search(r"^fabric_pipe send: done, 3\.00 MiB of 3\.00 MiB \(100%\)", send_err, re.M)


def test_progress_lines_are_rate_limited(
    tmp_path: pathlib.Path, port: int, processes: list[subprocess.Popen[bytes]]
) -> None:
    source = tmp_path / "in"
    source.write_bytes(os.urandom(8 * CHUNK))
    receiver = start_recv(processes, port, tmp_path / "out", "--progress-seconds", "600")
    send_rc, _stdout, send_err = finish(start_send(processes, port, source, "--progress-seconds", "600"))
    recv_rc, _stdout, recv_err = finish(receiver)

    assert (send_rc, recv_rc) == (0, 0)
    for err in (send_err, recv_err):
        lines = [line for line in err.splitlines() if " MB/s, " in line]
        assert len(lines) == 1 and ": done, " in lines[0], err


def test_the_sender_retries_until_the_receiver_starts(
    tmp_path: pathlib.Path, port: int, processes: list[subprocess.Popen[bytes]]
) -> None:
    data = os.urandom(2 * CHUNK + 7)
    source, received = tmp_path / "in", tmp_path / "out"
    source.write_bytes(data)
    sender = start_send(processes, port, source, "--retry-seconds", str(WAIT))
    time.sleep(1.5)
    assert sender.poll() is None
    receiver = start_recv(processes, port, received)

    send_rc, send_out, send_err = finish(sender)
    recv_rc, _stdout, recv_err = finish(receiver)

    assert (send_rc, recv_rc) == (0, 0), send_err + recv_err
    assert f"waiting for the receiver at {RECEIVER}:{port}" in send_err
    assert json.loads(send_out) == digest_of(data)
    assert received.read_bytes() == data


def test_the_sender_gives_up_after_its_retry_seconds(
    tmp_path: pathlib.Path, port: int, processes: list[subprocess.Popen[bytes]]
) -> None:
    source = tmp_path / "in"
    source.write_bytes(b"data")
    began = time.monotonic()
    send_rc, send_out, send_err = finish(
        start_send(processes, port, source, "--retry-seconds", "1")
    )

    assert send_rc == 3
    assert send_out == ""
    assert 1 <= time.monotonic() - began < WAIT
    assert f"could not connect to {RECEIVER}:{port} within 1 s" in send_err


def test_the_sender_fails_when_the_receiver_does_not_confirm(
    tmp_path: pathlib.Path, port: int, processes: list[subprocess.Popen[bytes]]
) -> None:
    source = tmp_path / "in"
    source.write_bytes(b"0123456789")
    with socket.create_server((RECEIVER, port)) as server:
        server.settimeout(WAIT)
        sender = start_send(processes, port, source)
        conn, _address = server.accept()
        with conn:
            conn.settimeout(WAIT)
            expected = MAGIC + frame(b"0123456789") + frame(b"")
            got = b""
            while len(got) < len(expected):
                got += conn.recv(len(expected) - len(got)) or b"<eof>"
            assert got == expected
        send_rc, send_out, send_err = finish(sender)

    assert send_rc == 1
    assert send_out == ""
    assert "without confirming 10 bytes" in send_err


def test_the_receiver_fails_when_its_command_stops_reading(
    tmp_path: pathlib.Path, port: int, processes: list[subprocess.Popen[bytes]]
) -> None:
    source = tmp_path / "in"
    source.write_bytes(os.urandom(16 * CHUNK))
    receiver = start_recv(processes, port, tmp_path / "unused", stdout=subprocess.PIPE)
    assert receiver.stdout is not None
    receiver.stdout.close()  # like `docker load` dying at once

    send_rc, send_out, send_err = finish(start_send(processes, port, source))
    recv_rc, _stdout, recv_err = finish(receiver)

    assert (send_rc, recv_rc) == (1, 1)
    assert "the receiving command stopped reading after 0 bytes" in recv_err
    assert "Traceback" not in recv_err + send_err
    assert send_out == ""


def test_the_receiver_rejects_a_stream_without_the_header(
    tmp_path: pathlib.Path, port: int, processes: list[subprocess.Popen[bytes]]
) -> None:
    receiver = start_recv(processes, port, tmp_path / "out")
    with connect_from(SENDER, port) as client:  # e.g. the previous, unframed fabric_pipe
        client.sendall(b"POSIX tar archive, not framed")
        assert closed_by_peer(client)

    recv_rc, _stdout, recv_err = finish(receiver)

    assert recv_rc == 1
    assert "not a fabric_pipe stream" in recv_err


@pytest.mark.parametrize(
    "args",
    [
        ["recv", RECEIVER, "29598", "10"],  # no --peer
        ["recv", RECEIVER, "29598", "-1", "--peer", SENDER],
        ["send", RECEIVER],
        ["send", RECEIVER, "70000"],
        ["copy", RECEIVER, "29598"],
    ],
    ids=["recv-without-peer", "negative-seconds", "send-without-port", "bad-port", "unknown-mode"],
)
def test_usage_errors_exit_2(processes: list[subprocess.Popen[bytes]], args: list[str]) -> None:
    process = start(processes, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    rc, out, err = finish(process)
    assert rc == 2
    assert out == ""
    assert "usage: fabric_pipe.py" in err
