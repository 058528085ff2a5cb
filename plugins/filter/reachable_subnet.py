"""Filter ``reachable_subnet``: the one IPv4 network every listed host can reach the others on.

A DGX Spark cluster has several networks per node (LAN, CX7 fabric twins, docker0, ...).
Ray, NCCL and vLLM must all bind to the same fabric, so the playbooks need one answer,
chosen the same way on every run, and a clear error when the inventory contradicts the facts.
The full rule is documented in the sidecar ``reachable_subnet.yml``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from ansible.errors import AnsibleFilterError

try:
    from netaddr import AddrFormatError, IPAddress, IPNetwork, valid_ipv4
except ImportError as import_error:
    # Without netaddr the filter still loads (ansible-doc, the other filters); using it says what to install.
    NETADDR_IMPORT_ERROR: ImportError | None = import_error
else:
    NETADDR_IMPORT_ERROR = None

# Name prefixes of container and virtual bridges: the same 172.17.0.1 on every node's
# docker0 is not a shared fabric. Matched on names, never on the driver, because the
# interfaces inside a container are eth0/eth1 with module ``veth`` and must count.
VIRTUAL_PREFIXES = ("docker", "br-", "veth", "virbr", "cni", "flannel", "cali",
                    "vxlan", "tunl", "lxcbr", "lxdbr", "podman")
EXCLUDED_TYPES = frozenset({"loopback", "bridge"})
RDMA_PREFIX = "mlx5"
GATHER_HINT = ("gather facts first: run ansible.builtin.setup with gather_subset: [network] "
               "(or gather_facts: true) on every host in the list")


@dataclass(frozen=True)
class Addr:
    """One IPv4 address on one interface; ``unusable`` says why it cannot be a fabric."""

    ip: IPAddress
    net: IPNetwork
    interface: str
    primary: bool
    unusable: str | None
    mtu: int | None
    module: str | None

    def order(self) -> tuple[bool, str, int]:
        """Primary before secondary, then lowest interface name, then lowest address."""
        return (not self.primary, self.interface, int(self.ip))

    def show(self) -> str:
        return f"{self.ip} on {self.interface}"


def _fail(message: str) -> NoReturn:
    """Prefix every error with the filter name: it ends up inside a long task failure."""
    raise AnsibleFilterError("reachable_subnet: " + message)


def _check_args(hostvars: Any, hosts: Any) -> list[str]:
    """Reject wrong call shapes early, before they turn into confusing lookups."""
    usage = "use it as hostvars | dgx_spark.vllm.reachable_subnet(groups['sparks'])"
    if not isinstance(hostvars, Mapping):
        _fail(f"the input must be a mapping of host name to host variables (hostvars), "
              f"got {type(hostvars).__name__}; {usage}")
    if isinstance(hosts, (str, bytes)) or not isinstance(hosts, Sequence) or not hosts:
        _fail(f"the first argument must be a non-empty list of host names, got {hosts!r}; "
              f"{usage}, and check that the group has hosts")
    bad = [n for n in hosts if not isinstance(n, str) or n not in hostvars]
    if bad:
        _fail(f"host(s) {', '.join(repr(n) for n in bad)} in the first argument are not in the "
              f"input mapping; {usage} with inventory host names, and check the inventory")
    return list(dict.fromkeys(hosts))


def _facts(host: str, hostvars: Mapping[str, Any]) -> Mapping[str, Any]:
    """Return the host's ``ansible_facts``; network facts are required, not optional."""
    hv = hostvars[host]
    facts = hv.get("ansible_facts") if isinstance(hv, Mapping) else None
    ifaces = facts.get("interfaces") if isinstance(facts, Mapping) else None
    if isinstance(ifaces, (str, bytes)) or not isinstance(ifaces, Sequence):
        _fail(f"host '{host}' has no network facts (ansible_facts.interfaces is missing); "
              f"{GATHER_HINT}")
    return facts


def _truthy(value: Any) -> bool:
    """Setup reports booleans, but hand-written or templated facts may carry 'true'."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1")
    return value is True


def _unusable(device: str, iface: Mapping[str, Any]) -> str | None:
    """Say why an interface cannot carry the fabric, or None when it can."""
    if device == "lo" or iface.get("type") == "loopback":
        return "a loopback interface"
    if device.startswith(VIRTUAL_PREFIXES) or iface.get("type") in EXCLUDED_TYPES:
        return "a container or virtual bridge"
    if not _truthy(iface.get("active")):
        return "down (not active)"
    return None


def _as_int(value: Any) -> int | None:
    """The MTU is informational: a missing or odd value must not fail the choice."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _parse(entry: Any) -> tuple[IPAddress, IPNetwork] | None:
    """Parse one ipv4 fact entry; malformed or /0 entries are skipped, not fatal."""
    if not isinstance(entry, Mapping):
        return None
    address, mask = entry.get("address"), entry.get("prefix") or entry.get("netmask")
    if not isinstance(address, str) or not valid_ipv4(address) or mask is None:
        return None
    try:
        net = IPNetwork(f"{address}/{mask}")
    except (AddrFormatError, TypeError, ValueError):
        return None
    return (net.ip, net.cidr) if net.prefixlen > 0 else None


def _interface(facts: Mapping[str, Any], device: str) -> Mapping[str, Any] | None:
    """Find an interface's facts; setup stores them under the name with '-' and '.' as '_'."""
    for key in (device.replace("-", "_").replace(".", "_"), device.replace("-", "_"), device):
        value = facts.get(key)
        if isinstance(value, Mapping):
            return value
    return None


def _addresses(facts: Mapping[str, Any]) -> list[Addr]:
    """Every IPv4 address of the host, usable or not (the latter explain errors)."""
    found: list[Addr] = []
    for device in dict.fromkeys(d for d in facts["interfaces"] if isinstance(d, str)):
        iface = _interface(facts, device)
        if iface is None:
            continue
        module = iface.get("module")
        secondaries = iface.get("ipv4_secondaries")
        entries = [(iface.get("ipv4"), True)] + [
            (s, False) for s in (secondaries if isinstance(secondaries, Sequence) else [])]
        for entry, primary in entries:
            parsed = _parse(entry)
            if parsed:
                found.append(Addr(parsed[0], parsed[1], device, primary, _unusable(device, iface),
                                  _as_int(iface.get("mtu")),
                                  str(module) if module is not None else None))
    return found


def _default_address(facts: Mapping[str, Any]) -> IPAddress | None:
    """The default-route address marks the management network, which the rule avoids."""
    default = facts.get("default_ipv4")
    address = default.get("address") if isinstance(default, Mapping) else None
    return IPAddress(address) if isinstance(address, str) and valid_ipv4(address) else None


def _ib_address(host: str, hostvars: Mapping[str, Any], addrs: list[Addr]) -> IPAddress | None:
    """Validate ``ansible_host_ib``: an IPv4 address held by a usable interface of the host."""
    value = hostvars[host].get("ansible_host_ib")
    if value is None or value == "":
        return None
    fix = f"set ansible_host_ib for {host} to its IPv4 address on the fabric (host_vars/{host}.yml)"
    if not isinstance(value, str) or not valid_ipv4(value.strip()):
        _fail(f"host '{host}' sets ansible_host_ib={value!r}, which is not an IPv4 address; "
              f"{fix}, or remove it to let the filter choose")
    ip = IPAddress(value.strip())
    held = [a for a in addrs if a.ip == ip]
    if any(a.unusable is None for a in held):
        return ip
    usable = ", ".join(a.show() for a in addrs if a.unusable is None) or "none"
    if held:
        _fail(f"host '{host}' sets ansible_host_ib={ip}, which is on {held[0].interface}, "
              f"{held[0].unusable}, so it cannot be the fabric (usable addresses of {host}: "
              f"{usable}); {fix}")
    _fail(f"host '{host}' sets ansible_host_ib={ip}, but no interface of {host} holds that "
          f"address (usable addresses of {host}: {usable}); {fix}, or gather facts again if "
          f"the address was added after they were gathered")


def _pick(addrs: list[Addr], net: IPNetwork, ib: IPAddress | None) -> Addr | None:
    """The host's address in ``net``: its ansible_host_ib if set, else the first by order()."""
    inside = [a for a in addrs if a.ip in net and (ib is None or a.ip == ib)]
    return min(inside, key=Addr.order) if inside else None


def _picks(usable: Mapping[str, list[Addr]], net: IPNetwork,
           ibs: Mapping[str, IPAddress]) -> dict[str, Addr]:
    """Each host's address in a mutually reachable ``net`` (hosts without one are left out)."""
    picks = {h: _pick(addrs, net, ibs.get(h)) for h, addrs in usable.items()}
    return {h: a for h, a in picks.items() if a is not None}


def _describe(net: IPNetwork, picks: Mapping[str, Addr]) -> str:
    return f"{net} ({', '.join(f'{h}: {a.show()}' for h, a in picks.items())})"


def _no_network(usable: Mapping[str, list[Addr]]) -> NoReturn:
    per_host = "; ".join(
        f"{h}: " + (", ".join(f"{a.net} on {a.interface}" for a in addrs) or "none")
        for h, addrs in usable.items())
    _fail(f"the hosts {', '.join(usable)} share no network they can all reach each other on "
          f"(loopback, inactive interfaces and container or virtual bridges such as docker0 "
          f"do not count). Candidate networks per host: {per_host}. Give every host an address "
          f"in one common network on its fabric interface (e.g. the CX7 ports), check the cable "
          f"and link state, then gather facts again")


def _apply_ib(nets: list[IPNetwork], usable: Mapping[str, list[Addr]],
              ibs: Mapping[str, IPAddress]) -> list[IPNetwork]:
    """Keep the networks holding every ansible_host_ib; blame the first host that empties them."""
    allowed: list[IPNetwork] = nets
    accepted: dict[str, IPAddress] = {}
    for host, ib in ibs.items():
        inside = [n for n in allowed if ib in n]
        if not inside:
            others = ", ".join(accepted)
            scope = (f"the networks the hosts can all reach that also hold the ansible_host_ib of "
                     f"{others} are" if accepted else "the hosts can only all reach each other on")
            options = ", ".join(_describe(n, _picks(usable, n, accepted)) for n in allowed)
            _fail(f"host '{host}' sets ansible_host_ib={ib}, but {scope} {options}. Set "
                  f"ansible_host_ib for {host} to its address in one of those networks "
                  f"(host_vars/{host}.yml)")
        allowed, accepted = inside, {**accepted, host: ib}
    return allowed


def _rank_key(usable: Mapping[str, list[Addr]], ibs: Mapping[str, IPAddress],
              defaults: list[IPAddress], allowed: list[IPNetwork]
              ) -> Callable[[IPNetwork], tuple[bool, bool, int, int, int]]:
    """Preference: allowed by ansible_host_ib, off the default route, more RDMA, lowest."""
    def key(net: IPNetwork) -> tuple[bool, bool, int, int, int]:
        picks = _picks(usable, net, ibs if net in allowed else {}).values()
        rdma = sum(1 for p in picks if (p.module or "").startswith(RDMA_PREFIX))
        return (net not in allowed, any(d in net for d in defaults), -rdma,
                int(net.network), net.prefixlen)
    return key


def _reason(ranked: list[IPNetwork], key: Callable[[IPNetwork], tuple[Any, ...]]) -> str:
    """Name the first rule on which the winner beats the runner-up."""
    if len(ranked) == 1:
        return "only candidate"
    first, second = key(ranked[0]), key(ranked[1])
    for index, name in enumerate(("ansible_host_ib", "not on a default route", "rdma")):
        if first[index] != second[index]:
            return name
    return "lowest"


def _check_duplicates(net: IPNetwork, picks: Mapping[str, Addr]) -> None:
    """Two nodes on one address would make Ray and NCCL connect to the wrong node."""
    seen: dict[IPAddress, str] = {}
    for host, addr in picks.items():
        if addr.ip in seen:
            other = seen[addr.ip]
            _fail(f"hosts '{other}' and '{host}' both have {addr.ip} in {net} ({other} on "
                  f"{picks[other].interface}, {host} on {addr.interface}); give each host its "
                  f"own address in that network, then gather facts again")
        seen[addr.ip] = host


def reachable_subnet(hostvars: Mapping[str, Any], hosts: Sequence[str]) -> dict[str, Any]:
    """Choose the network all ``hosts`` can reach each other on, with each host's address."""
    if NETADDR_IMPORT_ERROR is not None:
        raise AnsibleFilterError(
            "reachable_subnet: needs the Python library netaddr on the controller, in the Python that runs "
            "ansible-playbook: pip install netaddr (it is in requirements.txt)"
        ) from NETADDR_IMPORT_ERROR
    names = _check_args(hostvars, hosts)
    facts = {h: _facts(h, hostvars) for h in names}
    every = {h: _addresses(f) for h, f in facts.items()}
    usable = {h: [a for a in addrs if a.unusable is None] for h, addrs in every.items()}
    ibs = {h: ib for h in names if (ib := _ib_address(h, hostvars, every[h])) is not None}
    candidates = sorted({a.net for addrs in usable.values() for a in addrs})
    nets = [n for n in candidates if all(any(a.ip in n for a in usable[h]) for h in names)]
    if not nets:
        _no_network(usable)
    allowed = _apply_ib(nets, usable, ibs)
    defaults = [d for f in facts.values() if (d := _default_address(f)) is not None]
    key = _rank_key(usable, ibs, defaults, allowed)
    ranked = sorted(nets, key=key)
    chosen = ranked[0]
    picks = _picks(usable, chosen, ibs)
    _check_duplicates(chosen, picks)
    return {
        "cidr": str(chosen),
        "network": str(chosen.network),
        "prefix": chosen.prefixlen,
        "netmask": str(chosen.netmask),
        "reason": _reason(ranked, key),
        "alternatives": [str(n) for n in ranked[1:]],
        "hosts": {h: {"address": str(a.ip), "interface": a.interface, "mtu": a.mtu,
                      "module": a.module} for h, a in picks.items()},
    }


class FilterModule:
    """Ansible entry point for the ``reachable_subnet`` filter."""

    def filters(self) -> dict[str, Callable[..., dict[str, Any]]]:
        return {"reachable_subnet": reachable_subnet}
