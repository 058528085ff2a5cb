"""Filter ``fabric_env``: each node's NCCL fabric environment, derived from its sysfs.

A DGX Spark's cabled ConnectX-7 port shows up as two "twin" interfaces and two RDMA
devices (``enp1s0f0np0``/``rocep1s0f0`` and ``enP2p1s0f0np0``/``roceP2p1s0f0``); NCCL
reaches the port's full rate only with both in ``NCCL_IB_HCA``, and the RoCE v2 GID index
holding the node's fabric address differs between nodes. This filter works both out per
node, from what ``roles/dgx_spark/files/fabric_sysfs.py`` read there, and refuses a
per-host setting that names what the node is not cabled on. The rules are documented in
the sidecar ``fabric_env.yml``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from ansible.errors import AnsibleFilterError

FIX_HINT = ("remove it (it is derived per node) or set it in host_vars/{host}.yml to what {host} is cabled on: "
            "{ours}")


def _fail(message: str) -> NoReturn:
    raise AnsibleFilterError("fabric_env: " + message)


@dataclass(frozen=True)
class Twin:
    """One RDMA device of a CX7 port: its netdev, PCI address and RoCE v2 GIDs."""

    device: str
    netdev: str | None
    pci: str | None
    up: bool
    gids: Mapping[str, str]


def port_key(pci: str | None) -> tuple[str, int] | None:
    """Twins share the PCI bus, device and function (``01:00.0``) in different PCI domains
    (``0000`` and ``0002``); the function number is the CX7 port. None when not a PCI address."""
    if not pci or pci.count(":") != 2 or "." not in pci:
        return None
    _domain, bus, devfn = pci.split(":")
    try:
        return f"{bus}:{devfn}", int(devfn.rsplit(".", 1)[1], 16)
    except ValueError:
        return None


def _twins(sysfs: Mapping[str, Any]) -> list[Twin]:
    nets = sysfs.get("interfaces") or {}
    found = []
    for device, info in sorted((sysfs.get("rdma") or {}).items()):
        netdev = info.get("netdev")
        found.append(Twin(device, netdev, info.get("pci"),
                          (nets.get(netdev) or {}).get("operstate") == "up",
                          {str(k): str(v) for k, v in (info.get("roce_v2_gids") or {}).items()}))
    return found


def _gid_index(twin: Twin, address: str) -> int | None:
    """The RoCE v2 GID index holding the IPv4-mapped fabric address, lowest first."""
    wanted = ipaddress.IPv4Address(address)
    for index in sorted(twin.gids, key=int):
        try:
            mapped = ipaddress.IPv6Address(twin.gids[index]).ipv4_mapped
        except ValueError:
            continue
        if mapped == wanted:
            return int(index)
    return None


def _interface_env(interface: str) -> dict[str, str]:
    """Keep gloo, NCCL's bootstrap, TensorPipe, UCX and Open MPI on the fabric interface."""
    return {name: interface for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME",
                                         "UCX_NET_DEVICES", "OMPI_MCA_btl_tcp_if_include")}


def _hca(devices: list[str]) -> str:
    """NCCL_IB_HCA in its exact-match form: '=' first, so that no other device's name matches as a prefix."""
    return "=" + ",".join(devices)


def derive(host: str, node: Mapping[str, Any]) -> dict[str, Any]:
    """One node's cabled port, its twins' RDMA devices, the GID index and the environment."""
    interface, address = node["interface"], node["address"]
    override = list(node.get("rdma_devices") or [])
    twins = _twins(node.get("sysfs") or {})
    result: dict[str, Any] = {"port": None, "twins": [], "rdma_devices": [], "gid_index": None,
                              "notes": [], "env": _interface_env(interface)}
    fabric = next((t for t in twins if t.netdev == interface), None)
    if fabric is not None:
        key = port_key(fabric.pci)
        same_port = sorted([t for t in twins if key is not None and port_key(t.pci) == key] or [fabric],
                           key=lambda t: (t.pci or "", t.device))
        index = _gid_index(fabric, address)
        usable = []
        for twin in same_port:
            if twin is not fabric and not twin.up:
                result["notes"].append(f"{host}: {twin.device} ({twin.netdev}), twin of {fabric.device}, is down: "
                                       "left out of NCCL_IB_HCA")
            elif index is not None and str(index) not in twin.gids:
                result["notes"].append(f"{host}: {twin.device} ({twin.netdev}) has no RoCE v2 GID at index {index}: "
                                       "left out of NCCL_IB_HCA (give it an IPv4 address)")
            else:
                usable.append(twin)
        result.update(port=key[1] if key else None, twins=[t.netdev for t in same_port],
                      rdma_devices=[t.device for t in usable], gid_index=index)
    elif not twins and override:
        # No RDMA device in sysfs at all (a container, a run from recorded facts): taken as given.
        result["rdma_devices"] = override
    if twins and override:
        _check_override(host, node, twins, result)
        result["rdma_devices"] = override
    if node.get("gid_index") not in (None, ""):
        result["gid_index"] = _checked_gid(host, node, twins, result["rdma_devices"])
    if result["rdma_devices"]:
        result["env"]["NCCL_IB_HCA"] = _hca(result["rdma_devices"])
        if result["gid_index"] is not None:
            result["env"]["NCCL_IB_GID_INDEX"] = str(result["gid_index"])
    return result


def _check_override(host: str, node: Mapping[str, Any], twins: list[Twin], derived: dict[str, Any]) -> None:
    """dgx_spark_rdma_devices may only name RDMA devices of this node whose link is up."""
    by_name = {t.device: t for t in twins}
    wrong = [d for d in node["rdma_devices"] if d not in by_name or not by_name[d].up]
    if not wrong:
        return
    peers: Mapping[str, dict[str, Any]] = node.get("_peers") or {}
    same = [p for p, r in peers.items() if r["rdma_devices"] and set(r["rdma_devices"]) == set(node["rdma_devices"])]
    named = same or list(peers)
    whose = "".join(f", {'as on' if same else 'while'} {p} (port {peers[p]['port']}: "
                    f"{', '.join(peers[p]['rdma_devices']) or 'no RDMA device'})" for p in named[:1])
    what = "; ".join(f"{d} is {'not a device of ' + host if d not in by_name else 'down on ' + host}" for d in wrong)
    ours = ", ".join(derived["rdma_devices"]) or "none found"
    port = f"port {derived['port']}" if derived["port"] is not None else "no CX7 port"
    _fail(f"host {host}: dgx_spark_rdma_devices names {', '.join(node['rdma_devices'])}{whose}, but {host}'s fabric "
          f"({node['address']} on {node['interface']}) is on {port} ({what}). Fix: "
          + FIX_HINT.format(host=host, ours=ours) + ".")


def _checked_gid(host: str, node: Mapping[str, Any], twins: list[Twin], devices: list[str]) -> int:
    """dgx_spark_nccl_ib_gid_index must hold a RoCE v2 GID on every device NCCL gets."""
    index = node["gid_index"]
    if isinstance(index, str) and index.strip().isdigit():
        index = int(index)
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        _fail(f"host {host}: dgx_spark_nccl_ib_gid_index={index!r} is not a GID index (0 or more). Fix: remove it "
              "(derived per node) or set a whole number in host_vars.")
    by_name = {t.device: t for t in twins}
    lacking = [d for d in devices if d in by_name and str(index) not in by_name[d].gids]
    if lacking:
        _fail(f"host {host}: dgx_spark_nccl_ib_gid_index={index}, but {', '.join(lacking)} has no RoCE v2 GID at "
              f"index {index} (RoCE v2 GIDs: "
              + "; ".join(f"{d}: {', '.join(f'{k}={v}' for k, v in sorted(by_name[d].gids.items())) or 'none'}"
                          for d in lacking)
              + f"). Fix: remove it from host_vars/{host}.yml (derived per node) or set one of those indexes.")
    return index


def fabric_env(nodes: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per host: port, twins, rdma_devices, gid_index, notes and env (see fabric_env.yml)."""
    if not isinstance(nodes, Mapping) or not nodes:
        _fail(f"the input must be a non-empty mapping of host name to its fabric facts, got {type(nodes).__name__}")
    for host, node in nodes.items():
        missing = [k for k in ("interface", "address") if not (isinstance(node, Mapping) and node.get(k))]
        if missing:
            _fail(f"host {host}: no {' or '.join(missing)} given; pass each node's sysfs, interface and address")
    # First what each node is cabled on without its overrides, to name the peer an override was copied from.
    plain = {host: derive(host, {**node, "rdma_devices": [], "gid_index": None}) for host, node in nodes.items()}
    return {host: derive(host, {**node, "_peers": {p: r for p, r in plain.items() if p != host}})
            for host, node in nodes.items()}


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {"fabric_env": fabric_env}
