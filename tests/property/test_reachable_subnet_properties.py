"""Property tests of the reachable_subnet filter: random clusters against an independent oracle.

Hypothesis builds clusters of 2-5 hosts from few, overlapping networks (so they often share some
and sometimes collide), with fabric ports, random ports, virtual noise interfaces, secondaries
and sometimes an ansible_host_ib. The oracle below restates the exclusion rule and "every host
has a usable address in it" with ``ipaddress``; the filter must agree with it, and its answer
must not depend on the order setup lists the interfaces in.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from ansible.errors import AnsibleFilterError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.dgx_spark.vllm.plugins.filter.reachable_subnet import (
    reachable_subnet,
)
from support.facts import Facts, add_iface, add_secondary, iface, v4

VIRTUAL = ("docker", "br-", "veth", "virbr", "cni", "flannel", "cali", "vxlan", "tunl",
           "lxcbr", "lxdbr", "podman")

BASES = [ipaddress.ip_network(n) for n in
         ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16")]
USABLE_NAMES = ["eth0", "eth1", "enp1s0f0np0", "enP2p1s0f0np0", "enp1s0f1np1", "enP7s7",
                "bond0", "fab-0", "enp1s0f0np0.100"]
NOISE_NAMES = ["docker0", "br-0a1b2c3d4e5f", "veth1234abc", "virbr0", "cni0", "flannel.1",
               "cali12ab34cd", "vxlan.calico", "tunl0", "lxcbr0", "lxdbr0", "podman0", "lanbr"]


@st.composite
def networks(draw: st.DrawFn) -> ipaddress.IPv4Network:
    """Few, overlapping networks, so clusters often share some and sometimes collide."""
    base = draw(st.sampled_from(BASES))
    prefix = max(base.prefixlen, draw(st.sampled_from([16, 20, 24, 24, 24, 27, 30])))
    index = draw(st.integers(min_value=0, max_value=min(2 ** (prefix - base.prefixlen) - 1, 3)))
    size = 2 ** (32 - prefix)
    return ipaddress.IPv4Network(f"{base.network_address + index * size}/{prefix}")


@st.composite
def address_in(draw: st.DrawFn, net: ipaddress.IPv4Network) -> str:
    """A host address in ``net`` with its prefix, never the network or broadcast address."""
    offset = draw(st.integers(min_value=1, max_value=min(net.num_addresses - 2, 250)))
    return f"{net.network_address + offset}/{net.prefixlen}"


@st.composite
def host_facts(draw: st.DrawFn, shared: list[ipaddress.IPv4Network]) -> Facts:
    """Mostly a fabric port on a shared network, plus random ports and noise interfaces."""
    facts: Facts = {"interfaces": ["lo"],
                    "lo": {"device": "lo", "active": True, "type": "loopback",
                           "ipv4": v4("127.0.0.1/8"), "mtu": 65536}}
    names = draw(st.lists(st.sampled_from(USABLE_NAMES), unique=True, min_size=1, max_size=4))
    noise = draw(st.lists(st.sampled_from(NOISE_NAMES), unique=True, max_size=3))
    on_fabric = draw(st.integers(min_value=0, max_value=9)) > 0
    for index, device in enumerate(names + noise):
        fabric = index == 0 and on_fabric
        net = shared[0] if fabric else draw(st.one_of(st.sampled_from(shared), networks()))
        add_iface(facts, device, draw(address_in(net)),
                  module=draw(st.sampled_from(["mlx5_core", "r8127", "veth", None])),
                  active=fabric or draw(st.sampled_from(
                      [True, False] if device in noise else [True, True, True, False])),
                  type_="bridge" if device in ("docker0", "lanbr") else "ether")
        for _secondary in range(draw(st.integers(min_value=0, max_value=2))):
            add_secondary(facts, device, draw(address_in(draw(st.sampled_from(shared)))))
    with_v4 = [d for d in facts["interfaces"] if "ipv4" in iface(facts, d)]
    default = draw(st.sampled_from(with_v4))
    facts["default_ipv4"] = {**iface(facts, default)["ipv4"], "interface": default}
    return facts


@st.composite
def clusters(draw: st.DrawFn) -> tuple[dict[str, Any], list[str]]:
    """A hostvars-like mapping of 2-5 hosts and their names; some set ansible_host_ib, mostly
    to an address they hold, sometimes to an empty or malformed value."""
    shared = draw(st.lists(networks(), min_size=1, max_size=3))
    names = [f"node{i}" for i in range(draw(st.integers(min_value=2, max_value=5)))]
    hv: dict[str, Any] = {}
    for name in names:
        facts = draw(host_facts(shared))
        hv[name] = {"ansible_facts": facts}
        held = [e["address"] for d in facts["interfaces"][1:] for e in entries(facts, d)]
        if draw(st.integers(min_value=0, max_value=3)) == 0:
            hv[name]["ansible_host_ib"] = draw(st.one_of(
                st.sampled_from(held), st.sampled_from(held), st.sampled_from(held),
                st.sampled_from(["", "10.1", "fe80::1", "999.1.1.1", "x"])))
    return hv, names


def entries(facts: Facts, device: str) -> list[dict[str, str]]:
    """Every ipv4 entry of ``device``: the primary first, then the secondaries."""
    data = iface(facts, device)
    return ([data["ipv4"]] if "ipv4" in data else []) + data.get("ipv4_secondaries", [])


def usable(facts: Facts, device: str) -> bool:
    """Independent oracle of the exclusion rule."""
    data = iface(facts, device)
    return (data.get("active") is True and data.get("type") not in ("bridge", "loopback")
            and device != "lo" and not device.startswith(VIRTUAL))


def reachable_networks(hv: dict[str, Any], names: list[str]) -> set[str]:
    """Independent oracle: networks in which every host has a usable address."""
    held = {h: [ipaddress.ip_interface(f"{e['address']}/{e['prefix']}")
                for d in hv[h]["ansible_facts"]["interfaces"]
                if usable(hv[h]["ansible_facts"], d) for e in entries(hv[h]["ansible_facts"], d)]
            for h in names}
    candidates = {i.network for addrs in held.values() for i in addrs}
    return {str(n) for n in candidates
            if all(any(i.ip in n for i in held[h]) for h in names)}


def usable_holds(facts: Facts, device: str, address: str) -> bool:
    """Independent oracle: ``address`` is on ``device`` and ``device`` may carry the fabric."""
    return usable(facts, device) and any(e["address"] == address
                                         for e in entries(facts, device))


@settings(max_examples=200, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(clusters())
def test_random_clusters(cluster: tuple[dict[str, Any], list[str]]) -> None:
    """The filter agrees with the oracle on the networks, picks usable distinct addresses in the
    chosen one, honours ansible_host_ib, and ignores interface order."""
    hv, names = cluster
    expected = reachable_networks(hv, names)
    try:
        result = reachable_subnet(hv, names)
    except AnsibleFilterError as error:
        if "share no network" in str(error.message):
            assert not expected
        return
    chosen = ipaddress.ip_network(result["cidr"])
    assert set(result["hosts"]) == set(names)
    assert sorted([result["cidr"], *result["alternatives"]]) == sorted(expected)
    returned = []
    for name, place in result["hosts"].items():
        address = ipaddress.ip_address(place["address"])
        assert address in chosen
        assert usable_holds(hv[name]["ansible_facts"], place["interface"], place["address"])
        if hv[name].get("ansible_host_ib"):
            assert place["address"] == hv[name]["ansible_host_ib"].strip()
        returned.append(address)
    assert len(set(returned)) == len(returned)
    # the answer does not depend on the order interfaces are listed in
    for host in hv.values():
        host["ansible_facts"]["interfaces"].reverse()
    assert reachable_subnet(hv, names) == result
