"""A forged image stream never reaches `docker load` (controller side, the mp scenario's cluster).

The worker is made to lack the head's image (its serving name points at an older image, as before
an upgrade), so a run streams the image from the head. On the head, a relay takes the head's
stream and sends the worker, from the head's own fabric address (so the receiver accepts it), a
forged `docker save` archive instead: another image whose manifest tags it as the serving name,
framed as a real stream, as a box on the fabric impersonating the head would. `docker load` of
that archive would retag the serving name at once. The run must fail naming the worker, the
serving name must still point at the image it pointed at before, the forged image must not be on
the worker, and the spooled stream must be gone. Serving keeps running throughout.
"""
from __future__ import annotations

from endpoint import assert_completes
from nodes import FABRIC, HEAD, node_host
from playbook_run import run_playbook
from settings import setting

RELAY_PORT, RELAY_SOURCE_PORT = 29702, 29703
TRANSFER_PORT = setting("dgx_spark_transfer_port")  # the receivers listen on it
SPOOL = "/var/tmp/dgx-spark-vllm/incoming-image.tar"
OLDER = "dgx-spark-vllm-test/older-image:forged-test"
KEEP = "dgx-spark-vllm-test/keep-serving-image:forged-test"
FORGED = "dgx-spark-vllm-test/forged-image:forged-test"
FORGED_ARCHIVE = "/tmp/forged-image.tar"

# On the head: an archive of another image whose manifest names it as the serving image.
RENAME = r"""
import io, json, sys, tarfile
source, target, name = sys.argv[1:4]
with tarfile.open(source) as archive, tarfile.open(target, "w") as out:
    for member in archive.getmembers():
        data = archive.extractfile(member).read() if member.isfile() else None
        if member.name == "manifest.json":
            manifest = json.loads(data)
            manifest[0]["RepoTags"] = [name]
            data = json.dumps(manifest).encode()
        elif member.name == "index.json":
            index = json.loads(data)
            for entry in index.get("manifests", []):
                entry.setdefault("annotations", {})["io.containerd.image.name"] = name
            data = json.dumps(index).encode()
        elif member.name == "repositories":
            continue
        if data is None:
            out.addfile(member)
        else:
            member.size = len(data)
            out.addfile(member, io.BytesIO(data))
"""

# On the head: take the head's stream (the redirected connection), confirm it to the head's sender
# as received, and send the worker the forged archive instead, framed as fabric_pipe frames it,
# from the head's own fabric address.
RELAY = r"""
import socket, struct, sys, time
listen, target, source, forged = int(sys.argv[1]), (sys.argv[2], int(sys.argv[3])), (sys.argv[4], int(sys.argv[5])), sys.argv[6]
server = socket.create_server(("0.0.0.0", listen))
client, _ = server.accept()
deadline = time.monotonic() + 120
while True:
    try:
        upstream = socket.create_connection(target, source_address=source)
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.5)
upstream.sendall(b"FPIPE1\n\0")
with open(forged, "rb") as archive:
    while chunk := archive.read(1 << 20):
        upstream.sendall(struct.pack("!I", len(chunk)) + chunk)
upstream.sendall(struct.pack("!I", 0))
print("the worker confirmed", struct.unpack("!Q", upstream.recv(8))[0], "forged bytes", flush=True)
def exact(n):
    data = b""
    while len(data) < n:
        piece = client.recv(n - len(data))
        if not piece:
            raise EOFError("the head's sender closed early")
        data += piece
    return data
exact(8)
total = 0
while length := struct.unpack("!I", exact(4))[0]:
    while length:
        piece = client.recv(min(length, 1 << 20))
        if not piece:
            raise EOFError("the head's sender closed early")
        length -= len(piece)
        total += len(piece)
client.sendall(struct.pack("!Q", total))
print("took", total, "bytes from the head's sender", flush=True)
"""


def image_id(host, name: str) -> str:
    result = host.run("docker image inspect --format '{{.Id}}' %s", name)
    return result.stdout.strip() if result.rc == 0 else ""


def test_a_forged_image_stream_fails_the_run_and_leaves_the_serving_name_as_it_was():
    head, worker = node_host(HEAD), node_host("spark2")
    serving = worker.check_output("docker inspect --format '{{.Config.Image}}' vllm-serve")
    assert image_id(worker, serving) == image_id(head, serving) != ""
    redirect = (f"OUTPUT -p tcp -d {FABRIC['spark2']} --dport {TRANSFER_PORT} ! --sport {RELAY_SOURCE_PORT} "
                f"-j REDIRECT --to-ports {RELAY_PORT}")
    try:
        # The worker: the serving name points at an older image (the real one kept under another name).
        worker.check_output("docker tag %s %s", serving, KEEP)
        worker.check_output(f"mkdir -p /tmp/older && echo older > /tmp/older/version && "
                            f"tar -C /tmp/older -cf - . | docker import - {OLDER}")
        worker.check_output("docker tag %s %s", OLDER, serving)
        before = image_id(worker, serving)
        assert before == image_id(worker, OLDER)

        # The head: the forged archive, tagged inside as the serving image.
        head.check_output(f"mkdir -p /tmp/forged && echo forged > /tmp/forged/version && "
                          f"tar -C /tmp/forged -cf - . | docker import - {FORGED}")
        forged_id = image_id(head, FORGED)
        head.check_output(f"docker save {FORGED} -o /tmp/forged-source.tar && docker image rm {FORGED}")
        head.run(f"cat > /tmp/rename.py <<'PYEOF'\n{RENAME}\nPYEOF")
        head.check_output(f"python3 /tmp/rename.py /tmp/forged-source.tar {FORGED_ARCHIVE} %s", serving)
        assert f"\"{serving}\"" in head.check_output(f"tar -xOf {FORGED_ARCHIVE} manifest.json")

        head.check_output(f"iptables -t nat -I {redirect}")
        head.run(f"cat > /tmp/forge-relay.py <<'PYEOF'\n{RELAY}\nPYEOF")
        head.run(f"(timeout 900 python3 /tmp/forge-relay.py {RELAY_PORT} {FABRIC['spark2']} {TRANSFER_PORT} "
                 f"{FABRIC[HEAD]} {RELAY_SOURCE_PORT} {FORGED_ARCHIVE} > /tmp/forge-relay.log 2>&1 &)")

        result = run_playbook("site.yml", "--tags", "docker_image", timeout=900)
        output = result.stdout + result.stderr
        print(head.run("cat /tmp/forge-relay.log").stdout)
        assert result.returncode != 0, output[-4000:]
        assert f"spark2 did not receive the image {serving} intact from {HEAD}" in output, output[-4000:]
        assert "forged bytes" in head.check_output("cat /tmp/forge-relay.log"), "the forgery never reached the worker"
        assert image_id(worker, serving) == before, "the serving name was retagged on the worker"
        assert worker.run("docker image inspect %s", forged_id).rc != 0, "the forged image was loaded"
        assert not worker.file(SPOOL).exists
        assert_completes()  # still served, by the engines that were running
    finally:
        head.run(f"iptables -t nat -D {redirect}; pkill --full /tmp/forge-relay.py; "
                 f"rm -rf /tmp/forge-relay.py /tmp/forge-relay.log /tmp/rename.py /tmp/forged /tmp/forged-source.tar "
                 f"{FORGED_ARCHIVE}; docker image rm {FORGED} 2>/dev/null")
        if worker.run("docker image inspect %s", KEEP).rc == 0:
            worker.run("docker tag %s %s", KEEP, serving)
            worker.run("docker image rm %s", KEEP)
        worker.run(f"docker image rm {OLDER}; rm -rf /tmp/older")
    assert image_id(worker, serving) == image_id(head, serving), "the worker's serving image was not put back"
