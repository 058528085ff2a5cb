"""`ansible-playbook site.yml --check --diff` on a first deploy of the example inventory as two
single-node replicas (dgx_spark_replicas a: spark1, b: spark2; tensor parallel 1, mp executor),
with the stand-ins of test_check_mode_first_deploy (systemd and Docker that know nothing yet).

Every layer runs through without failing, the diffs show each replica head's API on its fabric
address and the internal port and the balancer (nginx on spark1 over both replica heads), nothing
changes, and the API key appears nowhere in the output.
"""
from __future__ import annotations

import re

import pytest

from support.example_inventory import HOSTS, VAULT, FirstDeploy, check_mode_first_deploy, recap
from support.fresh_node import READ_ONLY_SYSTEMCTL

FABRIC = {"spark1": "192.168.200.12", "spark2": "192.168.200.13"}
REPLICAS = [{"name": "a", "head": "spark1", "nodes": ["spark1"]},
            {"name": "b", "head": "spark2", "nodes": ["spark2"]}]


@pytest.fixture(scope="module")
def first_deploy(tmp_path_factory: pytest.TempPathFactory) -> FirstDeploy:
    return check_mode_first_deploy(tmp_path_factory.mktemp("check-replicas"), {
        "dgx_spark_executor": "mp", "vllm_serve_tensor_parallel_size": 1, "dgx_spark_replicas": REPLICAS})


def test_every_layer_runs_through_without_failing(first_deploy: FirstDeploy) -> None:
    assert first_deploy.rc == 0, first_deploy.output[-4000:]
    for host in HOSTS:
        counts = recap(first_deploy.output, host)
        assert counts["failed"] == 0 and counts["ignored"] == 0, first_deploy.output[-4000:]


def test_each_replica_head_serves_its_api_on_its_fabric_address(first_deploy: FirstDeploy) -> None:
    for host in HOSTS:
        # the unit's diff: one line per option (`--host ADDR \`, then `+    --port 8001`)
        assert re.search(rf"--host {re.escape(FABRIC[host])} \\\s*\+\s+--port 8001\b", first_deploy.output), host


def test_the_balancer_would_run_on_the_head_over_both_replicas(first_deploy: FirstDeploy) -> None:
    output = first_deploy.output
    assert "+ExecStart=/usr/sbin/nginx -c /etc/dgx-spark-vllm/vllm-serve-endpoint.nginx.conf" in output
    assert "Install nginx from the distribution" in output


def test_it_changes_nothing_and_shows_no_key(first_deploy: FirstDeploy) -> None:
    for data_dir in first_deploy.data_dirs:
        assert not data_dir.exists(), f"{data_dir} was created in check mode"
    acting = [verb for verb in first_deploy.systemctl if verb not in READ_ONLY_SYSTEMCTL]
    assert acting == [], f"systemctl asked to act in check mode: {acting}"
    writes = [request for request in first_deploy.docker_requests if not request.startswith(("GET ", "HEAD "))]
    assert writes == [], f"Docker asked to change something in check mode: {writes}"
    assert VAULT["vault_vllm_serve_api_key"] not in first_deploy.output
