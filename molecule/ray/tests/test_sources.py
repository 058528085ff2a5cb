"""Where this scenario's image and model came from: the test registry (a login) and the test Hub (a public
model: it serves plain HTTP, and a token never goes over plain HTTP),
as a real deployment pulls from Docker Hub / nvcr.io and downloads from huggingface.co
(molecule/shared/sources.yml, molecule/ray/inventory/group_vars/sparks/sources.yml)."""
from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request

import pytest
from endpoint import COMPLETION, call
from nodes import HEAD, NODES, node_host, on_management

REGISTRY = f"{on_management(50)}:5000"
IMAGE = f"{REGISTRY}/dgx-spark-vllm-test/serving-cpu:vllm-serve-entrypoint"
REGISTRY_PASSWORD = "dgx-spark-test-registry-pw-7d2e"  # molecule/shared/vars/sources.yml
SECRETS = {"registry password": REGISTRY_PASSWORD}
# Every place on a node where a file could keep a secret (Docker's own image
# store aside: /var/lib/docker holds image layers, not client credentials).
PLACES = "/etc /root /var/lib/dgx-spark-vllm /var/tmp /tmp /run"


def _status(url: str, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, headers=headers or {})
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # the test CA: only the nodes trust it
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_a_completion_is_served_by_the_pulled_image_with_the_downloaded_model():
    status, body = call("/v1/completions", body=COMPLETION)
    assert status == 200, body
    assert body["usage"]["completion_tokens"] == COMPLETION["max_tokens"]
    head = node_host(HEAD)
    inspected = json.loads(head.check_output("docker inspect vllm-serve"))[0]
    assert inspected["Config"]["Image"] == IMAGE
    assert "/var/lib/dgx-spark-vllm/models/test-org--tiny-llama" in " ".join(inspected["Args"])


def test_the_image_is_the_one_whose_entrypoint_is_vllm_serve_and_every_node_holds_the_same():
    ids = set()
    for name in NODES:
        image = json.loads(node_host(name).check_output("docker image inspect %s", IMAGE))[0]
        assert image["Config"]["Entrypoint"] == ["vllm", "serve"]
        ids.add(image["Id"])
    assert len(ids) == 1, ids


def test_the_head_downloaded_with_progress_and_the_nodes_serve_with_the_hub_offline():
    head = node_host(HEAD)
    log = head.file("/var/lib/dgx-spark-vllm/models/test-org--tiny-llama.download.log").content_string
    assert "downloaded " in log and "download complete" in log, log
    for name in NODES:  # the worker's copy came from the head's, over the fabric
        node = node_host(name)
        assert node.file("/var/lib/dgx-spark-vllm/models/test-org--tiny-llama/.dgx-spark-vllm-complete").exists
        assert not node.file("/var/lib/dgx-spark-vllm/models/test-org--tiny-llama/.partial").exists
    env = head.file("/etc/dgx-spark-vllm/vllm-serve.env").content_string
    assert "HF_HUB_OFFLINE=1" in env


@pytest.mark.parametrize("name", NODES)
@pytest.mark.parametrize("what", sorted(SECRETS))
def test_no_credentials_are_left_on_the_node(name: str, what: str):
    node = node_host(name)
    secret = SECRETS[what]
    found = node.run(f"grep -rlF --devices=skip -- %s {PLACES} 2>/dev/null", secret).stdout
    assert found == "", f"{what} left in {found}"
    assert not node.file("/root/.docker/config.json").exists or secret not in node.file(
        "/root/.docker/config.json").content_string
    inspected = node.check_output("docker ps -aq | xargs -r docker inspect")
    assert secret not in inspected
    assert secret not in node.check_output("cat /etc/systemd/system/*.service")
    assert secret not in node.check_output("ps -eo args")
    assert secret not in node.check_output("journalctl --no-pager -o cat")
    assert not node.run("ls -d /tmp/dgx-spark-vllm-docker.* /tmp/dgx-spark-vllm-hf.* 2>/dev/null").stdout


def test_the_registry_refuses_a_pull_without_the_login():
    assert _status(f"https://{REGISTRY}/v2/") == 401
    assert _status(f"https://{REGISTRY}/v2/dgx-spark-vllm-test/serving-cpu/manifests/vllm-serve-entrypoint") == 401
