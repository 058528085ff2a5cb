"""A stranger beside the cluster: a container on the management network (the LAN) and on the
fabric that holds no credentials, to probe what the cluster answers to whoever is not it.

It runs the serving image (so it has Python and Ray's client) with the addresses below; the
tests start it and remove it (molecule/shared/destroy.yml removes a leftover one too).
"""
from __future__ import annotations

import json
import subprocess

from nodes import PREFIX, REPO, on_fabric, on_management

NAME = f"{PREFIX}-outsider"
LAN_ADDRESS = on_management(99)
FABRIC_ADDRESS = on_fabric(99)

# Every TCP port of HOST, 256 at a time; prints the ones that accept a connection.
SCAN = r"""
import json, socket, sys
from concurrent.futures import ThreadPoolExecutor
host = sys.argv[1]
def answers(port):
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0
with ThreadPoolExecutor(256) as pool:
    print(json.dumps([p for p, ok in zip(range(1, 65536), pool.map(answers, range(1, 65536))) if ok]))
"""


def serving_image() -> str:
    for line in (REPO / "tools" / "test-images.env").read_text().splitlines():
        if line.startswith("SERVING_IMAGE="):
            return line.split("=", 1)[1]
    raise AssertionError("SERVING_IMAGE is not in tools/test-images.env")


def docker(*args: str, stdin: str | None = None, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, check=False)


def start() -> None:
    """The outsider, on the LAN and on the fabric, with nothing of the cluster's."""
    docker("rm", "--force", NAME)
    started = docker("run", "--detach", "--name", NAME, "--label", "dgx-spark-vllm.test=1",
                     "--network", f"{PREFIX}-mgmt", "--ip", LAN_ADDRESS, "--entrypoint", "sleep",
                     serving_image(), "1800")
    assert started.returncode == 0, started.stderr
    joined = docker("network", "connect", "--ip", FABRIC_ADDRESS, f"{PREFIX}-fabric", NAME)
    assert joined.returncode == 0, joined.stderr


def stop() -> None:
    docker("rm", "--force", NAME)


def python(script: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """Run a Python script in the outsider."""
    return docker("exec", "-i", NAME, "python", "-", *args, stdin=script, timeout=timeout)


def open_ports(host: str) -> list[int]:
    """The TCP ports of ``host`` that answer the outsider."""
    result = python(SCAN, host)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])
