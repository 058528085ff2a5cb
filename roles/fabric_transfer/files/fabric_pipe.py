"""One end of a byte stream between two nodes over the fabric.

  python3 fabric_pipe.py send HOST PORT           stdin -> TCP HOST:PORT
  python3 fabric_pipe.py recv ADDRESS PORT SECS   TCP ADDRESS:PORT -> stdout

The receiver listens on its own fabric address only and takes one connection
(waiting at most SECS for it); the sender retries its connect for 60 s, so the
two may start in either order. Used to stream `docker save` into `docker load`
and model folders (tar) from the head to the other nodes without SSH between
nodes.
"""
import shutil
import socket
import sys
import time

CHUNK = 1 << 20


def send(host: str, port: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            conn = socket.create_connection((host, port), timeout=10)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    conn.settimeout(None)
    with conn, conn.makefile("wb") as out:
        shutil.copyfileobj(sys.stdin.buffer, out, CHUNK)


def recv(address: str, port: int, seconds: float) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((address, port))
        server.listen(1)
        server.settimeout(seconds)
        conn, _peer = server.accept()
    conn.settimeout(None)
    with conn, conn.makefile("rb") as stream:
        shutil.copyfileobj(stream, sys.stdout.buffer, CHUNK)


def main() -> None:
    mode = sys.argv[1]
    if mode == "send":
        send(sys.argv[2], int(sys.argv[3]))
    elif mode == "recv":
        recv(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(f"usage: {sys.argv[0]} send HOST PORT | recv ADDRESS PORT SECONDS")


main()
