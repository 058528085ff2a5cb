"""Stream bytes from one node to another over the fabric: peer-checked, framed, digested.

Over 400 lines on purpose: this file is the whole wire protocol (both ends and the relay of a
chain); run as ``python3 -c`` it must be one self-contained file, and both ends must come from
one copy so they cannot disagree on the framing.

CLI contract (Python 3.9+, standard library only; run as a file or inline with ``python3 -c``)

  recv ADDRESS PORT SECONDS --peer PEER [--peer PEER ...] [--digest-file PATH]
       [--forward HOST [--forward-retry-seconds 60]] [--progress-seconds N]
    Listens on ADDRESS:PORT (an IP address of this node) and waits at most SECONDS (may be
    fractional), counted from the start, for a connection whose source IP is one of the
    --peer addresses (IP literals or host names, resolved once at start). Any other
    connection is closed at once, unread, and logged on stderr as "refused connection from
    X: not the sending node Y"; the receiver keeps waiting. Once the right peer is connected
    the stream itself has no time limit (TCP keepalive notices a dead peer in about two
    minutes).
    stdout: the payload, written as it arrives.
    --digest-file PATH: removed at start; written only after a complete stream, as one JSON
    line {"bytes": N, "sha256": "<hex>"} of what was received and written to stdout. Without
    --digest-file that JSON line goes to stderr.
    stderr: lines "fabric_pipe recv: ..." (progress, refusals, errors, a final summary).
    After the end-of-stream marker it flushes stdout, writes the digest, confirms the byte
    count to the sender and exits 0.
    --forward HOST: relay, the link of a chain (source -> node 2 -> node 3 ...) that carries
    one stream to many nodes in about the time of one transfer, each node reading it once.
    Before it waits for its sender, the receiver connects to HOST:PORT from ADDRESS (retrying
    for --forward-retry-seconds) and sends every frame on as it arrives, before writing it to
    stdout; after the end-of-stream marker it ends the forwarded stream the same way and waits
    for HOST's confirmation, then confirms to its own sender. A next node that cannot be
    reached, or that is lost, only stops the forwarding ("not forwarding to HOST: ..." on
    stderr): this node still receives, and the next node fails on its own. A relay whose
    receiving command stops reading keeps forwarding, confirms the bytes that arrived, and
    then exits 1. A relay that fails closes the forwarded stream before its end-of-stream
    marker, so the next node fails at once rather than at its deadline.

  send HOST PORT [--retry-seconds 60] [--bind ADDRESS] [--total BYTES] [--progress-seconds N]
    Connects to HOST:PORT, retrying failed connects until --retry-seconds have passed (the
    receiver may start later), from --bind ADDRESS when given (so that the source address is
    the one the receiver was given as --peer). Streams stdin until EOF, sends the end-of-stream
    marker and waits for the receiver to confirm the byte count. --total only feeds the
    percentage of the progress lines; it is not checked.
    stdout: exactly one JSON line {"bytes": N, "sha256": "<hex>"} of what was read from stdin
    and sent, printed only after the receiver's confirmation; nothing on failure.
    stderr: lines "fabric_pipe send: ..." (progress, waiting for the receiver, errors, summary).
    The sender cannot tell whether its stdin's producer failed: check that with pipefail.

  Both: --progress-seconds N (default 30): a progress line on stderr at most every N seconds
  (bytes done, "of TOTAL (P%)" when known, average MB/s since the connection, elapsed s);
  0 turns them off. One summary line ("done, ...") is printed at the end of a good stream.

  Exit codes
    0  complete (recv: end-of-stream marker seen, digest written; send: receiver confirmed).
    1  transfer failed: "stream cut after N bytes: REASON" (recv), connection lost or not
       confirmed (send), not a fabric_pipe stream, the receiving command stopped reading
       stdout, stdin unreadable, cannot listen or bind, any other OS error.
    2  usage error (bad arguments, a --peer that does not resolve).
    3  timeout: recv got no connection from a --peer within SECONDS; send could not connect
       within --retry-seconds.
  A receiver that fails after the connection leaves its sender without a confirmation, so
  the sender exits 1 too. Callers run both ends under ``set -o pipefail`` and compare the
  sender's stdout line with the receiver's digest line: equal lines mean the receiving
  command was fed exactly the bytes the sending command produced.

  Wire format (the framing only detects cuts; the caller compares the two sha256 digests)
    sender -> receiver: the 8 bytes b"FPIPE1\\n\\0", then frames of a 4-byte big-endian length
    L and L bytes of payload (this sender sends L <= 1 MiB), ended by the end-of-stream marker,
    a frame with L = 0. EOF or a reset before the marker means the stream was cut.
    receiver -> sender: after the marker, the payload byte count as 8 bytes big-endian.

Used to stream ``docker save`` into ``docker load`` and model folders (tar) from the head to
the other nodes without SSH between nodes, e.g. on each target
``python3 -c "$SCRIPT" recv 10.0.0.2 29598 3600 --peer 10.0.0.1 --digest-file D | docker load``
and on the source ``docker save IMAGE | python3 -c "$SCRIPT" send 10.0.0.2 29598 --bind 10.0.0.1``.
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import io
import ipaddress
import json
import os
import queue
import socket
import struct
import sys
import threading
import time
from typing import BinaryIO, Optional, Sequence, Union

CHUNK = 1 << 20
HASH_BUFFERS = 4
MAGIC = b"FPIPE1\n\0"
LENGTH = struct.Struct("!I")
COUNT = struct.Struct("!Q")
CONNECT_ATTEMPT_SECONDS = 10.0
RETRY_PAUSE_SECONDS = 0.5
EXIT_FAILED, EXIT_USAGE, EXIT_TIMEOUT = 1, 2, 3

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]


class PipeError(Exception):
    """A failure that ends the program with a one-line message and an exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def log(role: str, message: str) -> None:
    """Write one ``fabric_pipe ROLE: MESSAGE`` line to stderr."""
    print(f"fabric_pipe {role}: {message}", file=sys.stderr, flush=True)


def human(count: int) -> str:
    """Return a byte count in binary units, e.g. ``1.50 GiB``."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{count} B" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


class Hasher:
    """sha256 on a second thread, overlapping the copying (hashlib releases the GIL).

    Data is handed over in buffers taken from ``buffer()``; a buffer comes back to the pool
    once hashed, so at most HASH_BUFFERS chunks are in flight.
    """

    def __init__(self, buffer_size: int) -> None:
        self.sha256 = hashlib.sha256()
        self.free: queue.Queue[bytearray] = queue.Queue()
        self.todo: queue.Queue[Optional[memoryview]] = queue.Queue()
        for _buffer in range(HASH_BUFFERS):
            self.free.put(bytearray(buffer_size))
        self.thread = threading.Thread(target=self.run, name="sha256", daemon=True)
        self.thread.start()

    def buffer(self) -> memoryview:
        """Return a whole buffer that is not being hashed."""
        return memoryview(self.free.get())

    def add(self, data: memoryview) -> None:
        """Hash ``data``, a slice of a buffer from ``buffer()``, then recycle that buffer."""
        self.todo.put(data)

    def run(self) -> None:
        """Hash what is handed over, in order, until ``hexdigest()`` ends it."""
        while True:
            data = self.todo.get()
            if data is None:
                return
            self.sha256.update(data)
            self.free.put(data.obj)  # type: ignore[arg-type]  # the bytearray of buffer()

    def hexdigest(self) -> str:
        """Return the digest of everything added."""
        self.todo.put(None)
        self.thread.join()
        return self.sha256.hexdigest()


class Meter:
    """Byte count, sha256 and progress lines of one end of the stream."""

    def __init__(
        self, role: str, every: float, buffer_size: int, total: Optional[int] = None
    ) -> None:
        self.role = role
        self.every = every
        self.total = total
        self.bytes = 0
        self.hasher = Hasher(buffer_size)
        self.start = time.monotonic()
        self.next_report = self.start + every

    def buffer(self) -> memoryview:
        """Return a buffer to fill; give the part with payload back through ``add``."""
        return self.hasher.buffer()

    def add(self, data: memoryview) -> None:
        """Count and hash ``data``; print a progress line when one is due."""
        self.hasher.add(data)
        self.bytes += len(data)
        if self.every > 0:
            now = time.monotonic()
            if now >= self.next_report:
                log(self.role, self.describe(now))
                self.next_report = now + self.every

    def describe(self, now: float) -> str:
        """Return ``DONE [of TOTAL (P%)], RATE MB/s, ELAPSED s``."""
        elapsed = now - self.start
        rate = self.bytes / elapsed / 1e6 if elapsed > 0 else 0.0
        done = human(self.bytes)
        if self.total:
            done += f" of {human(self.total)} ({100 * self.bytes / self.total:.0f}%)"
        return f"{done}, {rate:.1f} MB/s, {elapsed:.1f} s"

    def record(self) -> str:
        """Return the JSON line ``{"bytes": N, "sha256": "..."}``."""
        return json.dumps({"bytes": self.bytes, "sha256": self.hasher.hexdigest()})

    def finish(self) -> None:
        """Print the summary line of a complete stream."""
        log(self.role, "done, " + self.describe(time.monotonic()))


def set_keepalive(conn: socket.socket) -> None:
    """Make a silently dead peer show up as an error within about two minutes."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", 60), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 6)):
        if hasattr(socket, name):
            conn.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


def fill(conn: socket.socket, view: memoryview) -> int:
    """Receive into all of ``view``; return the bytes received (fewer only at EOF)."""
    got = 0
    while got < len(view):
        n = conn.recv_into(view[got:])
        if n == 0:
            break
        got += n
    return got


# --- recv ----------------------------------------------------------------------------------


def ip_of(host: str) -> IPAddress:
    """Return the address of a numeric host, IPv4-mapped IPv6 and scope ids normalized."""
    address = ipaddress.ip_address(host.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return address.ipv4_mapped
    return address


def resolve_peers(names: Sequence[str]) -> frozenset[IPAddress]:
    """Return the addresses of the allowed peers (IP literals or host names)."""
    addresses: set[IPAddress] = set()
    for name in names:
        try:
            infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
        except OSError as error:
            raise PipeError(f"--peer {name} does not resolve: {error}", EXIT_USAGE) from None
        addresses.update(ip_of(str(info[4][0])) for info in infos)
    return frozenset(addresses)


def listen(address: str, port: int) -> socket.socket:
    """Return a socket listening on ADDRESS:PORT."""
    try:
        family = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((address, port), family=family)
    except OSError as error:
        raise PipeError(f"cannot listen on {address}:{port}: {error}") from None


def accept_peer(
    server: socket.socket, peers: frozenset[IPAddress], sender: str, deadline: float, seconds: float
) -> socket.socket:
    """Return the first connection from one of ``peers``; close any other at once."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise PipeError(
                f"no connection from the sending node {sender} within {seconds:g} s",
                EXIT_TIMEOUT,
            )
        server.settimeout(remaining)
        try:
            conn, address = server.accept()
        except (socket.timeout, ConnectionAbortedError):
            continue
        if ip_of(address[0]) in peers:
            conn.settimeout(None)
            set_keepalive(conn)
            return conn
        conn.close()
        log("recv", f"refused connection from {address[0]}: not the sending node {sender}")


def stream_cut(meter: Meter, reason: str) -> PipeError:
    """Return the error of a stream that ended before its end-of-stream marker."""
    return PipeError(f"stream cut after {meter.bytes} bytes: {reason}")


def write_out(out: BinaryIO, data: memoryview, meter: Meter) -> None:
    """Write ``data`` to the receiving command; fail clearly when it stopped reading."""
    try:
        out.write(data)
    except OSError as error:
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())  # no second error at exit
        raise PipeError(
            f"the receiving command stopped reading after {meter.bytes} bytes: {error}"
        ) from None


def read_header(conn: socket.socket, meter: Meter) -> None:
    """Check that the peer speaks this protocol."""
    header = memoryview(bytearray(len(MAGIC)))
    if fill(conn, header) < len(MAGIC):
        raise stream_cut(meter, "connection closed before the stream header")
    if header != MAGIC:
        raise PipeError("not a fabric_pipe stream (a sender of another version?)")


class Output:
    """The receiving command's stdin.

    A relay keeps the stream going to the next node when its own command stops reading: the
    first error is kept, later writes are skipped, and ``recv`` raises it at the end.
    Otherwise the error is raised at once.
    """

    def __init__(self, out: BinaryIO, keep_going: bool) -> None:
        self.out = out
        self.keep_going = keep_going
        self.error: Optional[PipeError] = None

    def fail(self, error: PipeError) -> None:
        """Raise ``error``, or keep it for the end when the stream must go on."""
        if not self.keep_going:
            raise error
        self.error = error
        log("recv", f"{error}; still forwarding")

    def write(self, data: memoryview, meter: Meter) -> None:
        """Write ``data`` unless the command already stopped reading."""
        if self.error is None:
            try:
                write_out(self.out, data, meter)
            except PipeError as error:
                self.fail(error)

    def flush(self) -> None:
        """Flush what is buffered for the command."""
        if self.error is None:
            try:
                self.out.flush()
            except OSError as error:
                self.fail(PipeError(f"the receiving command stopped reading: {error}"))


def copy_frames(
    conn: socket.socket, output: Output, meter: Meter, relay: Optional[Relay]
) -> None:
    """Copy frame payloads to ``output`` (and the next node) until the end-of-stream marker."""
    length_view = memoryview(bytearray(LENGTH.size))
    while True:
        if fill(conn, length_view) < LENGTH.size:
            raise stream_cut(meter, "connection closed before the end-of-stream marker")
        (length,) = LENGTH.unpack(length_view)
        if length == 0:
            return
        while length:
            piece = meter.buffer()[: min(length, CHUNK)]
            if fill(conn, piece) < len(piece):
                raise stream_cut(meter, "connection closed in the middle of a frame")
            if relay is not None:
                relay.forward(piece)
            output.write(piece, meter)
            meter.add(piece)
            length -= len(piece)


def receive(conn: socket.socket, output: Output, meter: Meter, relay: Optional[Relay]) -> None:
    """Read a whole framed stream from ``conn`` into ``output``."""
    try:
        read_header(conn, meter)
        copy_frames(conn, output, meter, relay)
    except OSError as error:
        raise stream_cut(meter, str(error)) from None
    output.flush()


def write_digest(path: Optional[str], record: str) -> None:
    """Write the JSON line to ``path``, or to stderr when no path is given."""
    if path is None:
        print(record, file=sys.stderr, flush=True)
        return
    try:
        with open(path, "w", encoding="ascii") as digest:
            digest.write(record + "\n")
    except OSError as error:
        raise PipeError(f"cannot write the digest file: {error}") from None


def remove_stale(path: Optional[str]) -> None:
    """Remove a digest file left by an earlier run, so it cannot pass for this one."""
    if path is None:
        return
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except OSError as error:
        raise PipeError(f"cannot remove the old digest file: {error}") from None


def confirm(conn: socket.socket, count: int) -> None:
    """Tell the sender how many bytes arrived (the data is complete here either way)."""
    try:
        conn.sendall(COUNT.pack(count))
    except OSError as error:
        log("recv", f"could not confirm to the sender: {error}")


def open_relay(args: argparse.Namespace) -> Optional[Relay]:
    """Connect to the next node when this receiver forwards (``--forward``)."""
    if args.forward is None:
        return None
    retry = min(args.forward_retry_seconds, args.seconds)
    return Relay(args.forward, args.port, args.address, retry)


def recv(args: argparse.Namespace) -> None:
    """Receive one stream from an allowed peer onto stdout (and on to the next node)."""
    deadline = time.monotonic() + args.seconds
    peers = resolve_peers(args.peer)
    remove_stale(args.digest_file)
    relay: Optional[Relay] = None
    try:
        with listen(args.address, args.port) as server:
            relay = open_relay(args)
            sender = " or ".join(args.peer)
            conn = accept_peer(server, peers, sender, deadline, args.seconds)
        with conn:
            meter = Meter("recv", args.progress_seconds, CHUNK)
            output = Output(sys.stdout.buffer, keep_going=relay is not None)
            receive(conn, output, meter, relay)
            if output.error is None:
                write_digest(args.digest_file, meter.record())
            if relay is not None:
                relay.finish()
            confirm(conn, meter.bytes)
    finally:
        if relay is not None:
            relay.close()  # unfinished: the next node sees the stream cut, at once
    if output.error is not None:
        raise output.error
    meter.finish()


# --- relay ---------------------------------------------------------------------------------


class Relay:
    """The stream forwarded to the next node of a chain (``recv --forward``).

    Any failure here stops the forwarding only, with a line on stderr; this node still
    receives, and the next node fails on its own (its stream is cut, or never came).
    """

    def __init__(self, host: str, port: int, bind: str, retry_seconds: float) -> None:
        self.target = f"{host}:{port}"
        self.sent = 0
        self.conn: Optional[socket.socket] = None
        try:
            self.conn = connect(host, port, retry_seconds, bind, role="recv")
            self.conn.sendall(MAGIC)
        except (PipeError, OSError) as error:
            self.stop(str(error))

    def stop(self, reason: str) -> None:
        """Stop forwarding and say why."""
        log("recv", f"not forwarding to {self.target}: {reason}")
        self.close()

    def close(self) -> None:
        """Close the forwarded stream (before its end marker, the next node sees a cut)."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def forward(self, payload: memoryview) -> None:
        """Send ``payload`` on as one frame."""
        if self.conn is None:
            return
        try:
            self.conn.sendall(LENGTH.pack(len(payload)))
            self.conn.sendall(payload)
        except OSError as error:
            self.stop(f"connection lost after {self.sent} bytes: {error}")
            return
        self.sent += len(payload)

    def finish(self) -> None:
        """End the forwarded stream and wait until the next node confirms all of it."""
        if self.conn is None:
            return
        try:
            self.conn.sendall(LENGTH.pack(0))
            await_confirmation(self.conn, self.sent)
        except (OSError, PipeError) as error:
            self.stop(str(error))
            return
        log("recv", f"forwarded {human(self.sent)} to {self.target}, confirmed")
        self.close()


# --- send ----------------------------------------------------------------------------------


def connect(
    host: str, port: int, retry_seconds: float, bind: Optional[str], role: str = "send"
) -> socket.socket:
    """Connect to HOST:PORT, retrying until ``retry_seconds`` have passed."""
    deadline = time.monotonic() + retry_seconds
    source = (bind, 0) if bind else None
    waiting = False
    while True:
        attempt = min(CONNECT_ATTEMPT_SECONDS, max(1.0, deadline - time.monotonic()))
        try:
            conn = socket.create_connection((host, port), timeout=attempt, source_address=source)
        except OSError as error:
            if bind and error.errno == errno.EADDRNOTAVAIL:
                raise PipeError(f"cannot send from {bind}: {error}") from None
            if time.monotonic() >= deadline:
                raise PipeError(
                    f"could not connect to {host}:{port} within {retry_seconds:g} s: {error}",
                    EXIT_TIMEOUT,
                ) from None
            if not waiting:
                log(role, f"waiting for the receiver at {host}:{port} ({error})")
                waiting = True
            time.sleep(min(RETRY_PAUSE_SECONDS, max(0.0, deadline - time.monotonic())))
            continue
        conn.settimeout(None)
        set_keepalive(conn)
        return conn


def read_chunk(source: io.BufferedReader, view: memoryview) -> int:
    """Fill ``view`` from ``source``; return the bytes read (fewer only at EOF)."""
    try:
        return source.readinto(view) or 0
    except OSError as error:
        raise PipeError(f"cannot read stdin: {error}") from None


def send_frames(conn: socket.socket, source: io.BufferedReader, meter: Meter) -> None:
    """Send the header, ``source`` in frames of at most CHUNK bytes, and the end marker."""
    conn.sendall(MAGIC)
    while True:
        frame = meter.buffer()
        n = read_chunk(source, frame[LENGTH.size :])
        LENGTH.pack_into(frame, 0, n)
        conn.sendall(frame[: LENGTH.size + n])
        if n == 0:
            return
        meter.add(frame[LENGTH.size : LENGTH.size + n])


def await_confirmation(conn: socket.socket, sent: int) -> None:
    """Wait until the receiver confirms that it got all ``sent`` bytes."""
    reply = memoryview(bytearray(COUNT.size))
    if fill(conn, reply) < COUNT.size:
        raise PipeError(f"the receiver closed the connection without confirming {sent} bytes")
    (count,) = COUNT.unpack(reply)
    if count != sent:
        raise PipeError(f"the receiver confirmed {count} bytes, {sent} were sent")


def send(args: argparse.Namespace) -> None:
    """Send stdin to the receiver at HOST:PORT and print the digest of what was sent."""
    conn = connect(args.host, args.port, args.retry_seconds, args.bind)
    meter = Meter("send", args.progress_seconds, LENGTH.size + CHUNK, args.total)
    with conn, open(sys.stdin.fileno(), "rb", closefd=False) as source:
        try:
            send_frames(conn, source, meter)
            await_confirmation(conn, meter.bytes)
        except OSError as error:
            raise PipeError(
                f"connection to {args.host}:{args.port} lost after {meter.bytes} bytes: {error}"
                " (a receiver closes connections from addresses other than its --peer)"
            ) from None
    print(meter.record(), flush=True)
    meter.finish()


# --- command line --------------------------------------------------------------------------


def non_negative(text: str) -> float:
    """Parse a number of seconds."""
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds")
    return value


def tcp_port(text: str) -> int:
    """Parse a TCP port number."""
    value = int(text)
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"{text} is not a TCP port")
    return value


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """Parse the command line described in the module docstring."""
    parser = argparse.ArgumentParser(
        prog="fabric_pipe.py", description="Stream bytes between two nodes over the fabric."
    )
    modes = parser.add_subparsers(dest="mode", required=True)
    progress = argparse.ArgumentParser(add_help=False)
    progress.add_argument("--progress-seconds", type=non_negative, default=30.0, metavar="N")

    rx = modes.add_parser("recv", parents=[progress], help="receive onto stdout")
    rx.add_argument("address", metavar="ADDRESS")
    rx.add_argument("port", type=tcp_port, metavar="PORT")
    rx.add_argument("seconds", type=non_negative, metavar="SECONDS")
    rx.add_argument("--peer", action="append", required=True, metavar="PEER_ADDRESS")
    rx.add_argument("--digest-file", metavar="PATH")
    rx.add_argument("--forward", metavar="HOST")
    rx.add_argument("--forward-retry-seconds", type=non_negative, default=60.0, metavar="N")

    tx = modes.add_parser("send", parents=[progress], help="send stdin")
    tx.add_argument("host", metavar="HOST")
    tx.add_argument("port", type=tcp_port, metavar="PORT")
    tx.add_argument("--retry-seconds", type=non_negative, default=60.0, metavar="N")
    tx.add_argument("--bind", metavar="ADDRESS")
    tx.add_argument("--total", type=int, metavar="BYTES")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run one end of the stream; return the exit code."""
    args = parse_args(argv)
    try:
        if args.mode == "recv":
            recv(args)
        else:
            send(args)
    except PipeError as error:
        log(args.mode, str(error))
        return error.code
    except OSError as error:  # not foreseen above; still one line, still a failure
        log(args.mode, str(error))
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
