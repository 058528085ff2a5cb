"""Recorded facts and the edits that build one network layout from them.

The fixtures in tests/fixtures are ``ansible_facts`` as the setup module reports them for a DGX
Spark (LAN, CX7 twins, docker0, veth, a compose bridge, wifi) and for Docker containers
(eth0/eth1 with driver veth). A test loads a fresh copy and edits it the way setup would report
the layout it needs. Addresses are computed with the standard library (``ipaddress``), not with
the plugin's netaddr code, so the tests stay independent of the code they check.

Shared by the unit, property and integration tests; one copy, so a change to the shape of the
facts is made once.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

Facts = dict[str, Any]
FactsLoader = Callable[[str], Facts]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

# Where the example inventory's two Sparks reach each other: the answer for the recorded facts.
DEPLOYED = {"spark1": ("192.168.200.12", "enp1s0f0np0"),
            "spark2": ("192.168.200.13", "enp1s0f0np0")}


def load_facts(name: str) -> Facts:
    """A fresh copy of fixture ``name``'s ``ansible_facts`` (tests edit what they load)."""
    return json.loads((FIXTURES / f"{name}.json").read_text())


def key(device: str) -> str:
    """The facts key of an interface: setup turns '-' and '.' into '_'."""
    return device.replace("-", "_").replace(".", "_")


def v4(cidr: str) -> dict[str, str]:
    """An ipv4 fact entry as setup reports it (prefix is a string there)."""
    iface_ = ipaddress.ip_interface(cidr)
    net = iface_.network
    return {"address": str(iface_.ip), "broadcast": str(net.broadcast_address),
            "netmask": str(net.netmask), "network": str(net.network_address),
            "prefix": str(net.prefixlen)}


def iface(facts: Facts, device: str) -> dict[str, Any]:
    """The per-interface facts of ``device``."""
    return facts[key(device)]


def set_ipv4(facts: Facts, device: str, cidr: str | None) -> None:
    """Give ``device`` the primary address ``cidr`` (and bring it up), or remove it (None)."""
    if cidr is None:
        iface(facts, device).pop("ipv4", None)
    else:
        iface(facts, device)["ipv4"] = v4(cidr)
        iface(facts, device)["active"] = True


def add_secondary(facts: Facts, device: str, cidr: str) -> None:
    """Add ``cidr`` to ``device``'s ipv4_secondaries."""
    iface(facts, device).setdefault("ipv4_secondaries", []).append(v4(cidr))


def add_iface(facts: Facts, device: str, cidr: str | None, module: str | None = None,
              active: bool = True, type_: str = "ether", mtu: int = 1500) -> None:
    """Add an interface the way setup lists one (in ``interfaces`` and under its own key)."""
    facts["interfaces"].append(device)
    facts[key(device)] = {"device": device, "active": active, "type": type_, "mtu": mtu,
                          "module": module, "speed": 1000, "macaddress": "02:00:00:00:00:01",
                          "promisc": False, "features": {}}
    if cidr:
        facts[key(device)]["ipv4"] = v4(cidr)


def set_default(facts: Facts, device: str) -> None:
    """Move the default route onto ``device``'s primary address."""
    entry = iface(facts, device)["ipv4"]
    facts["default_ipv4"] = {**entry, "interface": device, "alias": device,
                             "gateway": str(ipaddress.ip_address(entry["network"]) + 1),
                             "mtu": iface(facts, device)["mtu"], "type": "ether"}


def hostvars(facts_by_host: dict[str, Facts | None], **ib: str) -> dict[str, Any]:
    """A hostvars-like mapping; ``ib`` maps host name to its ansible_host_ib."""
    result: dict[str, Any] = {}
    for host, facts in facts_by_host.items():
        hv: dict[str, Any] = {"inventory_hostname": host, "ansible_host": f"{host}.lab"}
        if facts is not None:
            hv["ansible_facts"] = facts
        if host in ib:
            hv["ansible_host_ib"] = ib[host]
        result[host] = hv
    return result


def addresses(result: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """The filter's answer reduced to host -> (address, interface), what most tests compare."""
    return {h: (v["address"], v["interface"]) for h, v in result["hosts"].items()}
