"""Four nodes serving one model with tensor parallel 4 (testinfra, on each node): each node runs
its own rank, binds its own fabric address, meets at the head's, and holds the head's image."""
from __future__ import annotations

from nodes import FABRIC, HEAD, RANK, env_file, interface_of, node, node_host, serve_args

IMAGE_ID = "docker image inspect --format '{{.Id}}' dgx-spark-vllm-test/serving-cpu:latest"


def test_every_node_runs_its_rank_of_tensor_parallel_4(host):
    me = node(host)
    assert host.service("vllm-serve").is_running
    args, value = serve_args(host)
    assert value["--nnodes"] == "4"
    assert value["--node-rank"] == str(RANK[me])
    assert value["--tensor-parallel-size"] == "4"
    assert value["--master-addr"] == FABRIC[HEAD]
    assert ("--headless" in args) == (me != HEAD)


def test_every_node_binds_its_own_fabric_address(host):
    me = node(host)
    env = env_file(host, "vllm-serve")
    assert env["VLLM_HOST_IP"] == FABRIC[me]
    assert env["MASTER_ADDR"] == FABRIC[HEAD]
    assert env["GLOO_SOCKET_IFNAME"] == interface_of(host, FABRIC[me])


def test_every_node_holds_the_image_the_head_holds(host):
    assert host.check_output(IMAGE_ID) == node_host(HEAD).check_output(IMAGE_ID)
