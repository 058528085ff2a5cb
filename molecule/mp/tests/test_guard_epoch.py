"""A fabric host impersonating the head's guard cannot make the workers restart.

The head's guard is stopped and a forger takes its address and port on the head's fabric address:
it answers every worker's epoch request with a new epoch and a MAC made without the cluster's
secret. The worker's guard reads it (its journal says so), ignores it, and its engine keeps
running: same InvocationID, no restart. Everything is put back in `finally`.
"""
from __future__ import annotations

import time

from nodes import FABRIC, HEAD, NODES, node_host
from settings import setting

GUARD = "vllm-serve-guard"
FORGER = "dgx-spark-test-forged-epoch"
PORT = int(setting("dgx_spark_guard_port"))
# Worker checks that must pass unanswered: a restart on a changed epoch takes one.
CHECKS = 4
INTERVAL = int(setting("serving_guard_liveness_interval"))

# Every answer a new epoch, with a MAC the forger had to guess.
FORGED_EPOCH_SERVER = """
import http.server, json, secrets
class Forged(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"epoch": secrets.token_hex(16), "mac": secrets.token_hex(32)}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer((%r, %d), Forged).serve_forever()
"""


def serving_life(host) -> str:
    return host.check_output("systemctl show --property=InvocationID --property=NRestarts vllm-serve")


def test_a_forged_epoch_from_a_fabric_address_restarts_no_worker():
    head = node_host(HEAD)
    workers = {name: node_host(name) for name in NODES if name != HEAD}
    before = {name: serving_life(host) for name, host in workers.items()}
    since = {name: host.check_output("date +%s").strip() for name, host in workers.items()}
    try:
        head.check_output(f"systemctl stop {GUARD}")
        head.check_output("systemd-run --unit %s --collect python3 -c %s", FORGER,
                          FORGED_EPOCH_SERVER % (FABRIC[HEAD], PORT))
        time.sleep(CHECKS * INTERVAL + 5)
        for name, host in workers.items():
            journal = host.check_output(f"journalctl -u {GUARD} -o cat --no-pager --since @{since[name]}")
            assert "without the cluster's MAC: ignored" in journal, \
                f"{name}: its guard never read the forged epoch:\n{journal[-2000:]}"
            assert "restarting vllm-serve" not in journal, journal[-2000:]
            assert serving_life(host) == before[name], f"{name}: its engine restarted on a forged epoch"
    finally:
        head.run(f"systemctl stop {FORGER}")
        head.check_output(f"systemctl start {GUARD}")
