"""What the cluster answers to a stranger on the LAN (the management network): the API and
nothing else. Shared by the scenarios (each links this file into its tests/)."""
from __future__ import annotations

import re

import pytest

import outsider
from nodes import API_PORT, FABRIC, FABRIC_NETWORK, HEAD_MANAGEMENT

testinfra_hosts = ["ansible://spark1"]
pytestmark = pytest.mark.gate

# Both scenarios serve: the API, whatever the executor.
EXPECTED_OPEN = [API_PORT]
FIREWALL = "dgx-spark-vllm-firewall"  # dgx_spark_firewall_unit, roles/dgx_spark/vars/main.yml
TABLE = "nft list table inet dgx_spark_vllm"


@pytest.fixture(scope="module")
def stranger():
    outsider.start()
    yield
    outsider.stop()


def test_only_the_api_answers_on_the_lan(stranger):
    found = outsider.open_ports(HEAD_MANAGEMENT)
    print(f"TCP ports of the head's management address {HEAD_MANAGEMENT} that answer a stranger: {found}")
    assert found == EXPECTED_OPEN


def without_counts(rules: str) -> str:
    """The table as listed, less its counters' figures, which a reload resets (rule handles are
    listed only with -a)."""
    return re.sub(r"counter packets \d+ bytes \d+", "counter", rules)


def tables(host) -> list[str]:
    """The node's nftables tables, sorted: a table loaded again is listed last."""
    return sorted(host.check_output("nft list tables").splitlines())


def test_the_firewall_table_is_loaded_and_the_same_after_its_unit_reloads(host):
    """Its unit (roles/firewall/templates/firewall.service.j2) loads the rules file on start and on
    reload, one transaction: after a reload the same table is loaded, and every other table (the
    node's Docker engine's) is still there. (Not restarted: Ray and serving require the unit, so a
    restart would restart them too.)"""
    rules = host.check_output(TABLE)
    print(rules)
    assert "set internal_tcp" in rules and "set fabric_nodes" in rules
    assert all(address in rules for address in FABRIC.values())
    assert str(FABRIC_NETWORK) not in rules  # the nodes, not the subnet
    assert host.service(FIREWALL).is_enabled
    assert host.service(FIREWALL).is_running
    tables_before = tables(host)
    host.check_output(f"systemctl reload {FIREWALL}")
    assert host.service(FIREWALL).is_running
    assert without_counts(host.check_output(TABLE)) == without_counts(rules)
    assert tables(host) == tables_before
