"""Accept TCP connections on this node's fabric address for the reachability check.

Usage: python3 fabric_listen.py ADDRESS SECONDS EXPECTED PORT [PORT ...]

Binds ADDRESS on each PORT that is free (a port already bound belongs to a
running Ray or vLLM, which answers the check itself), accepts and closes
connections, and exits once EXPECTED connections arrived on every bound port or
SECONDS have passed. Prints what it bound and how many connections it saw.
"""
import json
import selectors
import socket
import sys
import time


def bind_free_ports(address: str, ports: list[int]) -> dict[int, socket.socket]:
    bound: dict[int, socket.socket] = {}
    for port in ports:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # The previous check's connections leave the port in TIME_WAIT; a
        # port with a live listener still refuses the bind.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((address, port))
        except OSError:
            sock.close()
            continue
        sock.listen(64)
        sock.setblocking(False)
        bound[port] = sock
    return bound


def main() -> None:
    address, seconds, expected = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    bound = bind_free_ports(address, [int(p) for p in sys.argv[4:]])
    seen = {port: 0 for port in bound}
    selector = selectors.DefaultSelector()
    for port, sock in bound.items():
        selector.register(sock, selectors.EVENT_READ, port)
    deadline = time.monotonic() + seconds
    while bound and any(n < expected for n in seen.values()) and time.monotonic() < deadline:
        for key, _events in selector.select(timeout=0.5):
            conn, _peer = key.fileobj.accept()
            conn.close()
            seen[key.data] += 1
    print(json.dumps({"address": address, "bound": sorted(bound), "connections": seen}))


main()
