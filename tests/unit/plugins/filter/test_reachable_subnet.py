"""Example tests of the reachable_subnet filter, called as a Python function.

Each test loads a fresh copy of recorded setup-module facts (tests/fixtures) and edits it into
one layout with the helpers of tests/support/facts.py. Expected values are computed with the
standard library (``ipaddress``), not with the plugin's netaddr code. The same filter through
Ansible (Templar, ansible-playbook) is in tests/integration; random clusters in tests/property.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.dgx_spark.vllm.plugins.filter.reachable_subnet import (
    FilterModule,
    reachable_subnet,
)
from support.facts import (
    DEPLOYED,
    Facts,
    add_iface,
    add_secondary,
    addresses,
    hostvars,
    iface,
    key,
    load_facts,
    set_default,
    set_ipv4,
)


def error_of(hv: dict[str, Any], hosts: Any) -> str:
    """The message of the AnsibleFilterError the filter must raise for this input."""
    with pytest.raises(AnsibleFilterError) as info:
        reachable_subnet(hv, hosts)
    return str(info.value.message)


def twins(s1: Facts, s2: Facts) -> None:
    """Two subnets per cable: enp1s0f0np0 on 192.168.100.x, enP2p1s0f0np0 on 192.168.101.x."""
    for facts, last in ((s1, 12), (s2, 13)):
        set_ipv4(facts, "enp1s0f0np0", f"192.168.100.{last}/24")
        set_ipv4(facts, "enP2p1s0f0np0", f"192.168.101.{last}/24")


# --- the deployment -----------------------------------------------------------------------

def test_deployment_picks_the_fabric(sparks: tuple[Facts, Facts]) -> None:
    result = reachable_subnet(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                              ["spark1", "spark2"])
    assert result == {
        "cidr": "192.168.200.0/24", "network": "192.168.200.0", "prefix": 24,
        "netmask": "255.255.255.0", "reason": "only candidate", "alternatives": [],
        "hosts": {
            "spark1": {"address": "192.168.200.12", "interface": "enp1s0f0np0", "mtu": 9000,
                       "module": "mlx5_core"},
            "spark2": {"address": "192.168.200.13", "interface": "enp1s0f0np0", "mtu": 9000,
                       "module": "mlx5_core"},
        },
    }


@pytest.mark.parametrize("ib", [
    {"spark1": "192.168.200.12", "spark2": "192.168.200.13"},
    {"spark1": "192.168.200.12"},
    {"spark2": " 192.168.200.13 "},
    {"spark1": ""},
], ids=["both", "head-only", "worker-only-padded", "empty-is-unset"])
def test_deployment_with_ansible_host_ib(sparks: tuple[Facts, Facts], ib: dict[str, str]) -> None:
    hv = hostvars({"spark1": sparks[0], "spark2": sparks[1]}, **ib)
    result = reachable_subnet(hv, ["spark1", "spark2"])
    assert result["cidr"] == "192.168.200.0/24"
    assert addresses(result) == DEPLOYED


def test_ib_on_the_management_lan_names_host_variable_and_fabric(
        sparks: tuple[Facts, Facts]) -> None:
    hv = hostvars({"spark1": sparks[0], "spark2": sparks[1]}, spark1="10.1.230.180")
    assert error_of(hv, ["spark1", "spark2"]) == (
        "reachable_subnet: host 'spark1' sets ansible_host_ib=10.1.230.180, but the hosts can "
        "only all reach each other on 192.168.200.0/24 (spark1: 192.168.200.12 on enp1s0f0np0, "
        "spark2: 192.168.200.13 on enp1s0f0np0). Set ansible_host_ib for spark1 to its address "
        "in one of those networks (host_vars/spark1.yml)")


def test_ib_not_on_any_interface(sparks: tuple[Facts, Facts]) -> None:
    hv = hostvars({"spark1": sparks[0], "spark2": sparks[1]}, spark2="192.168.200.99")
    message = error_of(hv, ["spark1", "spark2"])
    assert "host 'spark2' sets ansible_host_ib=192.168.200.99" in message
    assert "no interface of spark2 holds that address" in message
    assert ("usable addresses of spark2: 10.1.231.44 on enP7s7, 192.168.200.13 on enp1s0f0np0"
            in message)
    assert "host_vars/spark2.yml" in message


@pytest.mark.parametrize(("device", "why"), [
    ("docker0", "a container or virtual bridge"),
    ("lo", "a loopback interface"),
])
def test_ib_on_an_interface_that_does_not_count(sparks: tuple[Facts, Facts], device: str,
                                                why: str) -> None:
    address = iface(sparks[0], device)["ipv4"]["address"]
    hv = hostvars({"spark1": sparks[0], "spark2": sparks[1]}, spark1=address)
    message = error_of(hv, ["spark1", "spark2"])
    assert f"host 'spark1' sets ansible_host_ib={address}, which is on {device}, {why}" in message
    assert "ansible_host_ib for spark1" in message


def test_ib_on_an_inactive_interface(sparks: tuple[Facts, Facts]) -> None:
    set_ipv4(sparks[0], "enp1s0f1np1", "192.168.201.12/24")
    iface(sparks[0], "enp1s0f1np1")["active"] = False
    hv = hostvars({"spark1": sparks[0], "spark2": sparks[1]}, spark1="192.168.201.12")
    assert "which is on enp1s0f1np1, down (not active)" in error_of(hv, ["spark1", "spark2"])


@pytest.mark.parametrize("bad", ["192.168.200", "fe80::1", "spark1-ib", "300.1.1.1", 12])
def test_ib_that_is_not_an_ipv4_address(sparks: tuple[Facts, Facts], bad: Any) -> None:
    hv = hostvars({"spark1": sparks[0], "spark2": sparks[1]}, spark1=bad)
    message = error_of(hv, ["spark1", "spark2"])
    assert f"host 'spark1' sets ansible_host_ib={bad!r}, which is not an IPv4 address" in message


# --- what does not count ------------------------------------------------------------------

def test_shared_docker0_is_not_a_fabric(sparks: tuple[Facts, Facts]) -> None:
    for facts in sparks:
        set_ipv4(facts, "enp1s0f0np0", None)
    message = error_of(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                       ["spark1", "spark2"])
    assert message.startswith("reachable_subnet: the hosts spark1, spark2 share no network")
    assert ("Candidate networks per host: spark1: 10.1.230.0/24 on enP7s7; "
            "spark2: 10.1.231.0/24 on enP7s7.") in message
    assert "172.17" not in message.split("Candidate")[1]


def test_host_with_no_usable_address_is_listed_as_none(sparks: tuple[Facts, Facts]) -> None:
    for device in ("enp1s0f0np0", "enP7s7"):
        set_ipv4(sparks[1], device, None)
    message = error_of(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                       ["spark1", "spark2"])
    assert "spark2: none." in message


def test_inactive_interface_is_ignored(sparks: tuple[Facts, Facts]) -> None:
    for facts, last in zip(sparks, (12, 13)):
        set_ipv4(facts, "enp1s0f1np1", f"192.168.10.{last}/24")  # lower than the fabric
        iface(facts, "enp1s0f1np1")["active"] = False
    result = reachable_subnet(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                              ["spark1", "spark2"])
    assert (result["cidr"], result["alternatives"]) == ("192.168.200.0/24", [])


@pytest.mark.parametrize("device", ["br-0a1b2c3d4e5f", "veth1234abc", "virbr0", "cni0"])
def test_virtual_interfaces_never_count(sparks: tuple[Facts, Facts], device: str) -> None:
    for facts, last in zip(sparks, (12, 13)):
        if key(device) not in facts:
            add_iface(facts, device, None, type_="ether")
        set_ipv4(facts, device, f"10.0.0.{last}/24")  # lower than the fabric, active
    result = reachable_subnet(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                              ["spark1", "spark2"])
    assert result["cidr"] == "192.168.200.0/24"


def test_bridge_type_never_counts(sparks: tuple[Facts, Facts]) -> None:
    for facts, last in zip(sparks, (12, 13)):
        add_iface(facts, "lanbr", f"10.0.0.{last}/24", type_="bridge")
    result = reachable_subnet(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                              ["spark1", "spark2"])
    assert result["cidr"] == "192.168.200.0/24"


def test_duplicate_address_names_both_hosts(sparks: tuple[Facts, Facts]) -> None:
    set_ipv4(sparks[1], "enp1s0f0np0", "192.168.200.12/24")
    message = error_of(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                       ["spark1", "spark2"])
    assert message == (
        "reachable_subnet: hosts 'spark1' and 'spark2' both have 192.168.200.12 in "
        "192.168.200.0/24 (spark1 on enp1s0f0np0, spark2 on enp1s0f0np0); give each host its "
        "own address in that network, then gather facts again")


# --- layouts NVIDIA documents for the CX7 ports -------------------------------------------

def test_link_local_fabric(sparks: tuple[Facts, Facts]) -> None:
    set_ipv4(sparks[0], "enp1s0f0np0", "169.254.33.12/16")
    set_ipv4(sparks[1], "enp1s0f0np0", "169.254.120.7/16")
    result = reachable_subnet(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                              ["spark1", "spark2"])
    assert result["cidr"] == "169.254.0.0/16"
    assert addresses(result) == {"spark1": ("169.254.33.12", "enp1s0f0np0"),
                                 "spark2": ("169.254.120.7", "enp1s0f0np0")}


def test_link_local_on_both_twins_takes_lowest_interface_name(
        sparks: tuple[Facts, Facts]) -> None:
    for facts, last in zip(sparks, (12, 13)):
        set_ipv4(facts, "enp1s0f0np0", f"169.254.1.{last}/16")
        set_ipv4(facts, "enP2p1s0f0np0", f"169.254.2.{last}/16")
    result = reachable_subnet(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                              ["spark1", "spark2"])
    # 'enP2p1s0f0np0' < 'enp1s0f0np0' in plain string order
    assert addresses(result) == {"spark1": ("169.254.2.12", "enP2p1s0f0np0"),
                                 "spark2": ("169.254.2.13", "enP2p1s0f0np0")}


def test_twins_rule_picks_the_lowest(sparks: tuple[Facts, Facts]) -> None:
    twins(*sparks)
    result = reachable_subnet(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                              ["spark1", "spark2"])
    assert (result["cidr"], result["reason"], result["alternatives"]) == (
        "192.168.100.0/24", "lowest", ["192.168.101.0/24"])
    assert addresses(result) == {"spark1": ("192.168.100.12", "enp1s0f0np0"),
                                 "spark2": ("192.168.100.13", "enp1s0f0np0")}


def test_twins_ansible_host_ib_picks_the_other(sparks: tuple[Facts, Facts]) -> None:
    twins(*sparks)
    hv = hostvars({"spark1": sparks[0], "spark2": sparks[1]}, spark1="192.168.101.12")
    result = reachable_subnet(hv, ["spark1", "spark2"])
    assert (result["cidr"], result["reason"], result["alternatives"]) == (
        "192.168.101.0/24", "ansible_host_ib", ["192.168.100.0/24"])
    assert addresses(result) == {"spark1": ("192.168.101.12", "enP2p1s0f0np0"),
                                 "spark2": ("192.168.101.13", "enP2p1s0f0np0")}


def test_twins_ansible_host_ib_in_different_networks(sparks: tuple[Facts, Facts]) -> None:
    twins(*sparks)
    hv = hostvars({"spark1": sparks[0], "spark2": sparks[1]},
                  spark1="192.168.100.12", spark2="192.168.101.13")
    assert error_of(hv, ["spark1", "spark2"]) == (
        "reachable_subnet: host 'spark2' sets ansible_host_ib=192.168.101.13, but the networks "
        "the hosts can all reach that also hold the ansible_host_ib of spark1 are "
        "192.168.100.0/24 (spark1: 192.168.100.12 on enp1s0f0np0, spark2: 192.168.100.13 on "
        "enp1s0f0np0). Set ansible_host_ib for spark2 to its address in one of those networks "
        "(host_vars/spark2.yml)")


# --- the preference rule ------------------------------------------------------------------

def test_default_route_network_loses_to_the_fabric(sparks: tuple[Facts, Facts]) -> None:
    set_ipv4(sparks[1], "enP7s7", "10.1.230.181/24")
    set_default(sparks[1], "enP7s7")
    result = reachable_subnet(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                              ["spark1", "spark2"])
    assert (result["cidr"], result["reason"], result["alternatives"]) == (
        "192.168.200.0/24", "not on a default route", ["10.1.230.0/24"])
    assert addresses(result) == DEPLOYED


def test_one_default_route_is_enough_to_lose(sparks: tuple[Facts, Facts]) -> None:
    set_ipv4(sparks[1], "enP7s7", "10.1.230.181/24")
    set_ipv4(sparks[1], "wlP9s9", "10.9.9.9/24")
    set_default(sparks[1], "wlP9s9")  # only spark1's default address is in 10.1.230.0/24
    result = reachable_subnet(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                              ["spark1", "spark2"])
    assert result["cidr"] == "192.168.200.0/24"


def test_rdma_network_preferred(sparks: tuple[Facts, Facts]) -> None:
    for facts, last in zip(sparks, (12, 13)):
        add_iface(facts, "enx00e04c680001", f"192.168.50.{last}/24", module="r8152")
    result = reachable_subnet(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                              ["spark1", "spark2"])
    assert (result["cidr"], result["reason"], result["alternatives"]) == (
        "192.168.200.0/24", "rdma", ["192.168.50.0/24"])


def test_more_rdma_hosts_win(sparks: tuple[Facts, Facts]) -> None:
    """192.168.50.0/24 has RDMA on one host only; the fabric on both."""
    add_iface(sparks[0], "enx00e04c680001", "192.168.50.12/24", module="r8152")
    set_ipv4(sparks[1], "enP2p1s0f0np0", "192.168.50.13/24")
    result = reachable_subnet(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                              ["spark1", "spark2"])
    assert (result["cidr"], result["reason"]) == ("192.168.200.0/24", "rdma")


def test_ipv4_secondaries_count(sparks: tuple[Facts, Facts]) -> None:
    set_ipv4(sparks[1], "enp1s0f0np0", "192.168.210.13/24")
    add_secondary(sparks[1], "enp1s0f0np0", "192.168.200.13/24")
    result = reachable_subnet(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                              ["spark1", "spark2"])
    assert result["cidr"] == "192.168.200.0/24"
    assert addresses(result) == DEPLOYED


def test_ansible_host_ib_may_be_a_secondary(sparks: tuple[Facts, Facts]) -> None:
    add_secondary(sparks[0], "enp1s0f0np0", "192.168.200.40/24")
    hv = hostvars({"spark1": sparks[0], "spark2": sparks[1]}, spark1="192.168.200.40")
    result = reachable_subnet(hv, ["spark1", "spark2"])
    assert addresses(result)["spark1"] == ("192.168.200.40", "enp1s0f0np0")


def test_several_addresses_primary_then_lowest_interface_name(
        sparks: tuple[Facts, Facts]) -> None:
    add_secondary(sparks[0], "enP2p1s0f0np0", "192.168.200.30/24")  # secondary, lower name
    add_secondary(sparks[0], "enp1s0f0np0", "192.168.200.5/24")     # secondary, lower address
    add_iface(sparks[0], "enp9s0", "192.168.200.40/24")             # primary, higher name
    result = reachable_subnet(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                              ["spark1", "spark2"])
    assert addresses(result)["spark1"] == ("192.168.200.12", "enp1s0f0np0")
    set_ipv4(sparks[0], "enP2p1s0f0np0", "192.168.200.30/24")       # now primary, lower name
    result = reachable_subnet(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                              ["spark1", "spark2"])
    assert addresses(result)["spark1"] == ("192.168.200.30", "enP2p1s0f0np0")


def test_wider_network_on_one_host(sparks: tuple[Facts, Facts]) -> None:
    """A /16 on one side and a /24 on the other: both contain both addresses."""
    set_ipv4(sparks[0], "enp1s0f0np0", "192.168.200.12/16")
    result = reachable_subnet(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                              ["spark1", "spark2"])
    assert (result["cidr"], result["alternatives"]) == ("192.168.0.0/16", ["192.168.200.0/24"])
    assert addresses(result) == DEPLOYED


def test_interface_names_with_dash_and_dot(sparks: tuple[Facts, Facts]) -> None:
    for facts, last in zip(sparks, (12, 13)):
        set_ipv4(facts, "enp1s0f0np0", None)
        add_iface(facts, "fab-0", None)
        add_iface(facts, "enp1s0f0np0.100", f"192.168.77.{last}/24", module="mlx5_core")
    result = reachable_subnet(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                              ["spark1", "spark2"])
    assert addresses(result)["spark1"] == ("192.168.77.12", "enp1s0f0np0.100")


def test_malformed_address_facts_are_skipped(sparks: tuple[Facts, Facts]) -> None:
    iface(sparks[0], "enP2p1s0f0np0")["ipv4"] = {"address": "bogus", "prefix": "24"}
    iface(sparks[0], "enp1s0f1np1").update(
        active=True, ipv4="not a mapping", ipv4_secondaries=[{"address": "10.0.0.1"}])
    iface(sparks[1], "enP2p1s0f0np0")["ipv4"] = {"address": "10.0.0.2", "prefix": "0"}
    sparks[1]["interfaces"].append("ghost0")  # listed without per-interface facts
    result = reachable_subnet(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                              ["spark1", "spark2"])
    assert addresses(result) == DEPLOYED


def test_integer_prefix_and_netmask_only_entries(sparks: tuple[Facts, Facts]) -> None:
    iface(sparks[0], "enp1s0f0np0")["ipv4"]["prefix"] = 24
    iface(sparks[1], "enp1s0f0np0")["ipv4"] = {"address": "192.168.200.13",
                                               "netmask": "255.255.255.0"}
    result = reachable_subnet(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                              ["spark1", "spark2"])
    assert (result["cidr"], addresses(result)) == ("192.168.200.0/24", DEPLOYED)


# --- inputs -------------------------------------------------------------------------------

def test_hosts_missing_from_the_mapping(sparks: tuple[Facts, Facts]) -> None:
    message = error_of(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                       ["spark1", "spark3", "spark4"])
    assert message == (
        "reachable_subnet: host(s) 'spark3', 'spark4' in the first argument are not in the input "
        "mapping; use it as hostvars | dgx_spark.vllm.reachable_subnet(groups['sparks']) with "
        "inventory host names, and check the inventory")


@pytest.mark.parametrize("hosts", [[], "spark1", None, {"spark1": 1}, [["spark1"]]])
def test_first_argument_must_be_a_list_of_host_names(sparks: tuple[Facts, Facts],
                                                     hosts: Any) -> None:
    message = error_of(hostvars({"spark1": sparks[0], "spark2": sparks[1]}), hosts)
    assert "first argument" in message


@pytest.mark.parametrize("value", [None, ["spark1"], "hostvars"])
def test_input_must_be_a_mapping(value: Any) -> None:
    with pytest.raises(AnsibleFilterError, match="the input must be a mapping"):
        reachable_subnet(value, ["spark1"])


def test_repeated_host_names_count_once(sparks: tuple[Facts, Facts]) -> None:
    result = reachable_subnet(hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                              ["spark1", "spark2", "spark1"])
    assert addresses(result) == DEPLOYED


@pytest.mark.parametrize("facts", [None, {}, {"hostname": "spark2", "default_ipv4": {}}],
                         ids=["no-ansible_facts", "empty", "min-subset"])
def test_host_without_network_facts(sparks: tuple[Facts, Facts], facts: Facts | None) -> None:
    message = error_of(hostvars({"spark1": sparks[0], "spark2": facts}), ["spark1", "spark2"])
    assert message == (
        "reachable_subnet: host 'spark2' has no network facts (ansible_facts.interfaces is "
        "missing); gather facts first: run ansible.builtin.setup with gather_subset: [network] "
        "(or gather_facts: true) on every host in the list")


def test_three_hosts(sparks: tuple[Facts, Facts]) -> None:
    spark3 = load_facts("spark2")
    set_ipv4(spark3, "enP7s7", "10.1.232.9/24")
    set_default(spark3, "enP7s7")
    set_ipv4(spark3, "enp1s0f0np0", None)
    set_ipv4(spark3, "enp1s0f1np1", "192.168.200.14/24")  # cabled to the other port
    hv = hostvars({"spark1": sparks[0], "spark2": sparks[1], "spark3": spark3})
    result = reachable_subnet(hv, ["spark1", "spark2", "spark3"])
    assert addresses(result) == {**DEPLOYED, "spark3": ("192.168.200.14", "enp1s0f1np1")}
    set_ipv4(spark3, "enp1s0f1np1", "192.168.201.14/24")
    assert "share no network" in error_of(hv, ["spark1", "spark2", "spark3"])
    # the two that do share the fabric still work when listed alone
    assert reachable_subnet(hv, ["spark1", "spark2"])["cidr"] == "192.168.200.0/24"


def test_container_style_facts() -> None:
    """Docker containers: eth0/eth1 with driver veth must count."""
    head, worker1, worker2 = (load_facts("container_head"), load_facts("container_worker"),
                              load_facts("container_worker"))
    set_ipv4(worker2, "eth0", "198.51.100.4/24")
    set_default(worker2, "eth0")
    hv = hostvars({"head": head, "worker1": worker1, "worker2": worker2})
    result = reachable_subnet(hv, ["head", "worker1", "worker2"])
    assert result["cidr"] == "198.51.100.0/24"
    assert result["hosts"] == {
        "head": {"address": "198.51.100.2", "interface": "eth1", "mtu": 1500, "module": "veth"},
        "worker1": {"address": "198.51.100.3", "interface": "eth0", "mtu": 1500,
                    "module": "veth"},
        "worker2": {"address": "198.51.100.4", "interface": "eth0", "mtu": 1500,
                    "module": "veth"},
    }


def test_filter_module_exposes_the_filter() -> None:
    assert FilterModule().filters() == {"reachable_subnet": reachable_subnet}


def test_without_netaddr_the_filter_loads_and_using_it_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # A controller without netaddr: the plugin still loads (ansible-doc, the other filters);
    # calling the filter names the missing library and how to install it.
    name = "ansible_collections.dgx_spark.vllm.plugins.filter.reachable_subnet"
    monkeypatch.setitem(sys.modules, "netaddr", None)
    monkeypatch.delitem(sys.modules, name)
    without = importlib.import_module(name)
    assert "reachable_subnet" in without.FilterModule().filters()
    with pytest.raises(AnsibleFilterError, match="netaddr.*pip install netaddr"):
        without.reachable_subnet({"a": {}}, ["a"])
