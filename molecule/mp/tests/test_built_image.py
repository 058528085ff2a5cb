"""docker_image_source: build: the head built the image from molecule/shared/files/serving-build, the worker
received it over the fabric, and serving runs it (testinfra)."""
from __future__ import annotations

import json

from nodes import NODES, node_host

IMAGE = "dgx-spark-vllm-test/serving-cpu:built"


def test_every_node_holds_the_image_the_head_built():
    ids = set()
    for name in NODES:
        node = node_host(name)
        image = json.loads(node.check_output("docker image inspect %s", IMAGE))[0]
        assert image["Config"]["Labels"].get("dgx-spark-vllm.test-build") == "1"
        ids.add(image["Id"])
    assert len(ids) == 1, ids


def test_serving_runs_the_built_image(host):
    inspected = json.loads(host.check_output("docker inspect vllm-serve"))[0]
    assert inspected["Config"]["Image"] == IMAGE
    assert "built by docker_image_source: build" in host.check_output(
        "docker exec vllm-serve cat /etc/dgx-spark-vllm-test-build")
