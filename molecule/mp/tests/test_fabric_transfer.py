"""Transfers between nodes are authenticated and atomic (controller side).

A receiver takes the sending node's fabric address only; a stream altered on the way (a relay
on the head that flips one byte, as a tampering box on the fabric would) fails the run naming
the node and the cause before anything of it is extracted, and the node's previous model stays in
place and served.
"""
from __future__ import annotations

import time

import outsider
from endpoint import assert_completes
from nodes import FABRIC, HEAD, PREFIX, node_host
from playbook_run import run_playbook
from settings import setting

PIPE = "/tmp/fabric_pipe.py"
MODEL_DIR = "/var/lib/dgx-spark-vllm/models/tiny-llama"
LISTING = f"cd {MODEL_DIR} && find . -type f -printf '%P %s\\n' | sort"
RELAY_PORT, RELAY_SOURCE_PORT = 29700, 29701
TRANSFER_PORT = setting("dgx_spark_transfer_port")  # the receivers listen on it

# On the head: take the redirected connection, forward it to the worker's receiver from the
# head's own fabric address (so the receiver accepts it), flipping one payload byte.
RELAY = r"""
import socket, sys, threading
listen, target, source = int(sys.argv[1]), (sys.argv[2], int(sys.argv[3])), (sys.argv[4], int(sys.argv[5]))
server = socket.create_server(("0.0.0.0", listen))
client, _ = server.accept()
upstream = socket.create_connection(target, source_address=source)
def pump(a, b, flip):
    seen = 0
    while data := a.recv(1 << 16):
        if flip and seen <= 70000 < seen + len(data):
            data = bytearray(data); data[70000 - seen] ^= 0xFF; data = bytes(data)
        seen += len(data)
        b.sendall(data)
    b.shutdown(socket.SHUT_WR)
back = threading.Thread(target=pump, args=(upstream, client, False)); back.start()
pump(client, upstream, True); back.join()
"""


def test_a_receiver_refuses_every_address_but_the_sending_node():
    worker, container = node_host("spark2"), f"{PREFIX}-spark2"
    source = (outsider.REPO / "roles/fabric_transfer/files/fabric_pipe.py").read_text()
    assert outsider.docker("exec", "-i", container, "sh", "-c", f"cat > {PIPE}", stdin=source).returncode == 0
    started = outsider.docker("exec", "--detach", container, "sh", "-c",
                              f"timeout 60 python3 {PIPE} recv {FABRIC['spark2']} 29599 40 --peer {FABRIC[HEAD]}"
                              " > /tmp/received 2> /tmp/recv.log")
    assert started.returncode == 0, started.stderr
    worker.run_expect([0], "for i in $(seq 50); do ss -Hltn | grep -q ':29599 ' && exit 0; sleep 0.2; done; exit 1")
    outsider.start()
    try:
        attempt = outsider.python(
            "import socket, sys\ns = socket.create_connection((sys.argv[1], 29599), timeout=5)\n"
            "s.sendall(b'FPIPE1\\n\\0' + b'\\0\\0\\0\\4evil' + b'\\0\\0\\0\\0')\ns.close()\n", FABRIC["spark2"])
        assert attempt.returncode == 0, attempt.stderr
        time.sleep(2)
        log = worker.check_output("cat /tmp/recv.log")
        print(log)
        assert f"refused connection from {outsider.FABRIC_ADDRESS}" in log
        assert worker.check_output("stat -c %s /tmp/received") == "0"  # nothing reached the command
    finally:
        outsider.stop()
        worker.run(f"pkill --full 'recv {FABRIC['spark2']} 29599' ; rm -f /tmp/received /tmp/recv.log")


def test_a_stream_altered_on_the_way_fails_the_run_and_leaves_the_old_model_served():
    head, worker = node_host(HEAD), node_host("spark2")
    # The worker's copy differs from the head's (an extra file), so a run sends the model again.
    worker.check_output(f"touch {MODEL_DIR}/stray-file")
    before = worker.check_output(LISTING)
    image = worker.check_output("docker inspect --format '{{.Config.Image}}' vllm-serve")  # what the node serves
    image_before = worker.check_output("docker image inspect --format '{{.Id}}' %s", image)
    redirect = (f"OUTPUT -p tcp -d {FABRIC['spark2']} --dport {TRANSFER_PORT} ! --sport {RELAY_SOURCE_PORT} "
                f"-j REDIRECT --to-ports {RELAY_PORT}")
    head.check_output(f"iptables -t nat -I {redirect}")
    head.run(f"cat > /tmp/relay.py <<'PYEOF'\n{RELAY}\nPYEOF")
    head.run(f"(timeout 600 python3 /tmp/relay.py {RELAY_PORT} {FABRIC['spark2']} {TRANSFER_PORT} {FABRIC[HEAD]} "
             f"{RELAY_SOURCE_PORT} > /tmp/relay.log 2>&1 &)")
    try:
        # Converging, not restarting as it is: only a converge stages the model.
        result = run_playbook("playbooks/serve.yml", "-e", "vllm_serve_restart_as_is=false", timeout=900)
        output = result.stdout + result.stderr
        assert result.returncode != 0, output[-4000:]
        assert "spark2 did not receive the model tiny-llama intact from spark1" in output, output[-4000:]
        # The stream is spooled as it arrives, so the digests are compared before tar reads a byte of it.
        assert "the stream was altered on the way" in output, output[-4000:]
        assert worker.check_output(LISTING) == before, "the worker's model changed"
        assert not worker.file(f"{MODEL_DIR}.incoming").exists
        assert not worker.file(f"{MODEL_DIR}.incoming.tar").exists, "the spooled stream was left"
        assert worker.check_output("docker image inspect --format '{{.Id}}' %s", image) == image_before
        assert_completes()  # still served, by the engines that were running
    finally:
        head.run(f"iptables -t nat -D {redirect}; pkill --full /tmp/relay.py; rm -f /tmp/relay.py /tmp/relay.log")
        worker.run(f"rm -f {MODEL_DIR}/stray-file")
