"""Print, as one JSON object, what the fabric derivation needs from a node's sysfs.

Run on the node as ``python3 -c "<this file>" [--sysfs ROOT] [--device PATH]...`` (sysfs
default ``/sys``); it only reads. The same facts ``ibdev2netdev`` and ``show_gids`` print, and
whether each device node named exists (the RDMA device folder, the GPU's control node), in the
same module run:

    {"interfaces": {"enp1s0f0np0": {"pci": "0000:01:00.0", "operstate": "up", "mtu": 9000,
                                    "speed": 200000}, ...},
     "rdma": {"rocep1s0f0": {"netdev": "enp1s0f0np0", "pci": "0000:01:00.0",
                             "roce_v2_gids": {"3": "::ffff:192.168.200.12"}}, ...},
     "devices": {"/dev/infiniband": {"exists": true, "isdir": true}, ...}}

``pci`` is the PCI address the interface's ``device`` link resolves to (null for a virtual
interface); ``roce_v2_gids`` maps each GID index of port 1 whose type is ``RoCE v2`` to its GID,
an IPv4-mapped GID written ``::ffff:a.b.c.d``. Unreadable entries are left out, never fatal.
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
from typing import Any


def read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def number(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def pci_of(device_link: str) -> str | None:
    """The PCI address behind a sysfs ``device`` link (``0000:01:00.0``), or None."""
    if not os.path.exists(device_link):
        return None
    name = os.path.basename(os.path.realpath(device_link))
    return name if name.count(":") == 2 and "." in name else None


def gid_text(raw: str) -> str | None:
    """A GID as written by sysfs (eight hex groups), shortened; None when it is unset (all zero)."""
    try:
        gid = ipaddress.IPv6Address(raw)
    except ValueError:
        return None
    if int(gid) == 0:
        return None
    mapped = gid.ipv4_mapped
    return f"::ffff:{mapped}" if mapped else gid.compressed


def interfaces(root: str) -> dict[str, dict[str, Any]]:
    base = os.path.join(root, "class", "net")
    found: dict[str, dict[str, Any]] = {}
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        path = os.path.join(base, name)
        found[name] = {"pci": pci_of(os.path.join(path, "device")),
                       "operstate": read(os.path.join(path, "operstate")),
                       "mtu": number(read(os.path.join(path, "mtu"))),
                       "speed": number(read(os.path.join(path, "speed")))}
    return found


def roce_v2_gids(port: str) -> dict[str, str]:
    gids: dict[str, str] = {}
    folder = os.path.join(port, "gids")
    for index in sorted(os.listdir(folder), key=lambda n: int(n) if n.isdigit() else -1) if os.path.isdir(folder) else []:
        if read(os.path.join(port, "gid_attrs", "types", index)) != "RoCE v2":
            continue
        gid = gid_text(read(os.path.join(folder, index)) or "")
        if gid:
            gids[index] = gid
    return gids


def rdma_devices(root: str) -> dict[str, dict[str, Any]]:
    base = os.path.join(root, "class", "infiniband")
    found: dict[str, dict[str, Any]] = {}
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        path = os.path.join(base, name)
        nets = os.path.join(path, "device", "net")
        netdevs = sorted(os.listdir(nets)) if os.path.isdir(nets) else []
        found[name] = {"netdev": netdevs[0] if netdevs else None,
                       "pci": pci_of(os.path.join(path, "device")),
                       "roce_v2_gids": roce_v2_gids(os.path.join(path, "ports", "1"))}
    return found


def device_nodes(paths: list[str]) -> dict[str, dict[str, bool]]:
    return {path: {"exists": os.path.exists(path), "isdir": os.path.isdir(path)} for path in paths}


def gather(root: str, devices: list[str] | None = None) -> dict[str, Any]:
    return {"interfaces": interfaces(root), "rdma": rdma_devices(root), "devices": device_nodes(devices or [])}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="fabric_sysfs")
    parser.add_argument("--sysfs", default="/sys")
    parser.add_argument("--device", action="append", default=[])
    args = parser.parse_args(argv)
    print(json.dumps(gather(args.sysfs, args.device), sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
