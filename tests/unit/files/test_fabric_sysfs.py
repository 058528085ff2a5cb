"""roles/dgx_spark/files/fabric_sysfs.py on a sysfs tree laid out as the kernel does: interfaces and
RDMA devices linked to their PCI functions, GID tables with their types."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.role_files import load_role_file

fs = load_role_file("roles/dgx_spark/files/fabric_sysfs.py")


def spark_tree(root: Path) -> Path:
    pci = root / "devices" / "platform"
    for domain, netdev, rdma in (("0000", "enp1s0f0np0", "rocep1s0f0"), ("0002", "enP2p1s0f0np0", "roceP2p1s0f0")):
        function = pci / f"{domain}:01:00.0"
        (function / "net" / netdev).mkdir(parents=True)
        net = root / "class" / "net" / netdev
        net.mkdir(parents=True)
        (net / "device").symlink_to(function)
        (net / "operstate").write_text("up\n")
        (net / "mtu").write_text("9000\n")
        (net / "speed").write_text("100000\n")
        dev = root / "class" / "infiniband" / rdma
        (dev / "ports" / "1" / "gids").mkdir(parents=True)
        (dev / "ports" / "1" / "gid_attrs" / "types").mkdir(parents=True)
        (dev / "device").symlink_to(function)
        octet = "0c" if domain == "0000" else "0d"
        gids = {"0": ("fe80:0000:0000:0000:a288:c2ff:fe3b:506a", "IB/RoCE v1"),
                "1": ("fe80:0000:0000:0000:a288:c2ff:fe3b:506a", "RoCE v2"),
                "2": (f"0000:0000:0000:0000:0000:ffff:c0a8:c8{octet}", "IB/RoCE v1"),
                "3": (f"0000:0000:0000:0000:0000:ffff:c0a8:c8{octet}", "RoCE v2"),
                "4": ("0000:0000:0000:0000:0000:0000:0000:0000", None)}
        for index, (gid, kind) in gids.items():
            (dev / "ports" / "1" / "gids" / index).write_text(gid + "\n")
            if kind:
                (dev / "ports" / "1" / "gid_attrs" / "types" / index).write_text(kind + "\n")
    veth = root / "class" / "net" / "docker0"
    veth.mkdir(parents=True)
    (veth / "operstate").write_text("down\n")
    (veth / "mtu").write_text("1500\n")
    (veth / "speed").write_text("bogus\n")
    return root


def test_interfaces_rdma_devices_and_roce_v2_gids_are_read(tmp_path: Path) -> None:
    facts = fs.gather(str(spark_tree(tmp_path)))
    assert facts["interfaces"] == {
        "docker0": {"pci": None, "operstate": "down", "mtu": 1500, "speed": None},
        "enP2p1s0f0np0": {"pci": "0002:01:00.0", "operstate": "up", "mtu": 9000, "speed": 100000},
        "enp1s0f0np0": {"pci": "0000:01:00.0", "operstate": "up", "mtu": 9000, "speed": 100000},
    }
    assert facts["rdma"] == {
        "roceP2p1s0f0": {"netdev": "enP2p1s0f0np0", "pci": "0002:01:00.0",
                         "roce_v2_gids": {"1": "fe80::a288:c2ff:fe3b:506a", "3": "::ffff:192.168.200.13"}},
        "rocep1s0f0": {"netdev": "enp1s0f0np0", "pci": "0000:01:00.0",
                       "roce_v2_gids": {"1": "fe80::a288:c2ff:fe3b:506a", "3": "::ffff:192.168.200.12"}},
    }


def test_a_machine_without_sysfs_entries_has_nothing(tmp_path: Path) -> None:
    assert fs.gather(str(tmp_path)) == {"interfaces": {}, "rdma": {}, "devices": {}}


def test_device_nodes_named_on_the_command_line_are_looked_at(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "dev" / "infiniband").mkdir(parents=True)
    (tmp_path / "dev" / "nvidiactl").write_text("")
    rdma, gpu, missing = (str(tmp_path / "dev" / name) for name in ("infiniband", "nvidiactl", "absent"))
    fs.main(["--sysfs", str(spark_tree(tmp_path / "sys")), "--device", rdma, "--device", gpu, "--device", missing])
    printed = json.loads(capsys.readouterr().out)
    assert printed["devices"] == {rdma: {"exists": True, "isdir": True}, gpu: {"exists": True, "isdir": False},
                                  missing: {"exists": False, "isdir": False}}
    assert sorted(printed["rdma"]) == ["roceP2p1s0f0", "rocep1s0f0"]
