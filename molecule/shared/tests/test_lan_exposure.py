"""What the cluster answers to a stranger on the LAN (the management network): the API and
nothing else. Shared by the scenarios (each links this file into its tests/)."""
from __future__ import annotations

import pytest

import outsider
from nodes import FABRIC_NETWORK, HEAD_MANAGEMENT

testinfra_hosts = ["ansible://spark1"]

# Both scenarios serve: the API, whatever the executor.
EXPECTED_OPEN = [8000]


@pytest.fixture(scope="module")
def stranger():
    outsider.start()
    yield
    outsider.stop()


def test_only_the_api_answers_on_the_lan(stranger):
    found = outsider.open_ports(HEAD_MANAGEMENT)
    print(f"TCP ports of the head's management address {HEAD_MANAGEMENT} that answer a stranger: {found}")
    assert found == EXPECTED_OPEN


def test_the_firewall_table_is_loaded_and_survives_a_reload(host):
    rules = host.check_output("nft list table inet dgx_spark_vllm")
    print(rules)
    assert "set internal_tcp" in rules and str(FABRIC_NETWORK) in rules
    assert host.service("dgx-spark-vllm-firewall").is_enabled
    assert host.service("dgx-spark-vllm-firewall").is_running
    # Only the collection's own table: the node's Docker engine keeps its chains.
    assert "dgx_spark_vllm" in host.check_output("nft list tables")
