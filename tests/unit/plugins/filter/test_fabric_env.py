"""The fabric_env filter on recorded sysfs facts (tests/fixtures/fabric/*.json, written in the form
roles/dgx_spark/files/fabric_sysfs.py prints): each node's NCCL environment, and the per-host
settings it refuses, naming both nodes."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.dgx_spark.vllm.plugins.filter.fabric_env import fabric_env, port_key

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "fabric"


def node(fixture: str, address: str, interface: str, **settings: Any) -> dict[str, Any]:
    sysfs = json.loads((FIXTURES / f"{fixture}.json").read_text())
    return {"sysfs": sysfs, "address": address, "interface": interface, **settings}


def ifnames(interface: str) -> dict[str, str]:
    return {k: interface for k in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME",
                                   "UCX_NET_DEVICES", "OMPI_MCA_btl_tcp_if_include")}


def test_twins_share_bus_device_and_function_in_different_domains() -> None:
    assert port_key("0000:01:00.0") == port_key("0002:01:00.0") == ("01:00.0", 0)
    assert port_key("0000:01:00.1") == ("01:00.1", 1)
    assert port_key(None) is None and port_key("virtual") is None


def test_two_sparks_on_port_0_get_both_twins_and_gid_index_3() -> None:
    result = fabric_env({"spark1": node("spark_port0_12", "192.168.200.12", "enp1s0f0np0"),
                         "spark2": node("spark_port0_13", "192.168.200.13", "enp1s0f0np0")})
    for host in ("spark1", "spark2"):
        assert result[host]["env"] == {**ifnames("enp1s0f0np0"),
                                       "NCCL_IB_HCA": "=rocep1s0f0,roceP2p1s0f0", "NCCL_IB_GID_INDEX": "3"}
        assert result[host]["port"] == 0
        assert result[host]["twins"] == ["enp1s0f0np0", "enP2p1s0f0np0"]
        assert result[host]["notes"] == []


def test_one_spark_on_port_1_and_one_on_port_0_each_get_their_own_port() -> None:
    result = fabric_env({"spark1": node("spark_port0_12", "192.168.200.12", "enp1s0f0np0"),
                         "spark2": node("spark_port1_13", "192.168.200.13", "enp1s0f1np1")})
    assert result["spark1"]["env"]["NCCL_IB_HCA"] == "=rocep1s0f0,roceP2p1s0f0"
    assert result["spark2"]["env"] == {**ifnames("enp1s0f1np1"),
                                       "NCCL_IB_HCA": "=rocep1s0f1,roceP2p1s0f1", "NCCL_IB_GID_INDEX": "3"}
    assert (result["spark1"]["port"], result["spark2"]["port"]) == (0, 1)


def test_a_node_whose_address_is_at_gid_index_0_gets_0() -> None:
    result = fabric_env({"spark1": node("spark_port0_12", "192.168.200.12", "enp1s0f0np0"),
                         "spark2": node("spark_port0_gid0_13", "192.168.200.13", "enp1s0f0np0")})
    assert result["spark1"]["env"]["NCCL_IB_GID_INDEX"] == "3"
    assert result["spark2"]["env"]["NCCL_IB_GID_INDEX"] == "0"
    assert result["spark2"]["env"]["NCCL_IB_HCA"] == "=rocep1s0f0,roceP2p1s0f0"


def test_a_three_node_ring_names_only_the_port_carrying_each_nodes_fabric_address() -> None:
    result = fabric_env({"spark1": node("ring_node1", "192.168.200.11", "enp1s0f0np0"),
                         "spark2": node("ring_node2", "192.168.200.12", "enp1s0f1np1"),
                         "spark3": node("ring_node3", "192.168.200.13", "enp1s0f0np0")})
    assert {h: r["env"] for h, r in result.items()} == {
        "spark1": {**ifnames("enp1s0f0np0"), "NCCL_IB_HCA": "=rocep1s0f0,roceP2p1s0f0", "NCCL_IB_GID_INDEX": "3"},
        "spark2": {**ifnames("enp1s0f1np1"), "NCCL_IB_HCA": "=rocep1s0f1,roceP2p1s0f1", "NCCL_IB_GID_INDEX": "3"},
        "spark3": {**ifnames("enp1s0f0np0"), "NCCL_IB_HCA": "=rocep1s0f0,roceP2p1s0f0", "NCCL_IB_GID_INDEX": "3"},
    }


def test_a_twin_without_a_gid_at_the_fabric_index_is_left_out_with_a_note() -> None:
    result = fabric_env({"spark1": node("spark_port0_one_twin_addressed_12", "192.168.200.12", "enp1s0f0np0")})
    assert result["spark1"]["env"]["NCCL_IB_HCA"] == "=rocep1s0f0"
    assert result["spark1"]["notes"] == [
        "spark1: roceP2p1s0f0 (enP2p1s0f0np0) has no RoCE v2 GID at index 3: left out of NCCL_IB_HCA "
        "(give it an IPv4 address)"]


def test_a_node_without_rdma_gets_no_nccl_ib_settings() -> None:
    result = fabric_env({"spark1": node("container", "198.51.100.11", "eth0"),
                         "spark2": node("container", "198.51.100.12", "eth0")})
    assert result["spark1"]["env"] == ifnames("eth0")
    assert result["spark1"]["rdma_devices"] == [] and result["spark1"]["gid_index"] is None


def test_settings_on_a_node_without_rdma_in_sysfs_are_taken_as_given() -> None:
    result = fabric_env({"spark1": node("container", "198.51.100.11", "eth0", rdma_devices=["rocep1s0f0"],
                                        gid_index=5)})
    assert result["spark1"]["env"]["NCCL_IB_HCA"] == "=rocep1s0f0"
    assert result["spark1"]["env"]["NCCL_IB_GID_INDEX"] == "5"


def test_per_host_settings_that_fit_the_node_win() -> None:
    result = fabric_env({"spark1": node("spark_port0_12", "192.168.200.12", "enp1s0f0np0",
                                        rdma_devices=["rocep1s0f0"], gid_index=1)})
    assert result["spark1"]["env"]["NCCL_IB_HCA"] == "=rocep1s0f0"
    assert result["spark1"]["env"]["NCCL_IB_GID_INDEX"] == "1"


def test_devices_of_the_heads_port_on_a_worker_cabled_on_the_other_port_are_refused_naming_both() -> None:
    head_port = ["rocep1s0f0", "roceP2p1s0f0"]
    with pytest.raises(AnsibleFilterError) as error:
        fabric_env({"spark1": node("spark_port0_12", "192.168.200.12", "enp1s0f0np0", rdma_devices=head_port),
                    "spark2": node("spark_port1_13", "192.168.200.13", "enp1s0f1np1", rdma_devices=head_port)})
    assert str(error.value) == (
        "fabric_env: host spark2: dgx_spark_rdma_devices names rocep1s0f0, roceP2p1s0f0, as on spark1 (port 0: "
        "rocep1s0f0, roceP2p1s0f0), but spark2's fabric (192.168.200.13 on enp1s0f1np1) is on port 1 "
        "(rocep1s0f0 is down on spark2; roceP2p1s0f0 is down on spark2). Fix: remove it (it is derived per node) "
        "or set it in host_vars/spark2.yml to what spark2 is cabled on: rocep1s0f1, roceP2p1s0f1.")


def test_a_device_the_node_lacks_is_refused_naming_its_peer() -> None:
    with pytest.raises(AnsibleFilterError, match=r"host spark2: dgx_spark_rdma_devices names mlx5_0, while spark1 "
                       r"\(port 0: rocep1s0f0, roceP2p1s0f0\).*mlx5_0 is not a device of spark2.*host_vars/spark2.yml"):
        fabric_env({"spark1": node("spark_port0_12", "192.168.200.12", "enp1s0f0np0"),
                    "spark2": node("spark_port0_13", "192.168.200.13", "enp1s0f0np0", rdma_devices=["mlx5_0"])})


@pytest.mark.parametrize("index, needle", [
    (5, "dgx_spark_nccl_ib_gid_index=5, but rocep1s0f0, roceP2p1s0f0 has no RoCE v2 GID at index 5"),
    (-1, "dgx_spark_nccl_ib_gid_index=-1 is not a GID index"),
])
def test_a_gid_index_the_devices_lack_is_refused(index: int, needle: str) -> None:
    with pytest.raises(AnsibleFilterError, match="host spark1: ") as error:
        fabric_env({"spark1": node("spark_port0_12", "192.168.200.12", "enp1s0f0np0", gid_index=index)})
    assert needle in str(error.value)


@pytest.mark.parametrize("nodes", [{}, [], {"spark1": {"address": "192.168.200.12"}}])
def test_malformed_input_is_refused(nodes: Any) -> None:
    with pytest.raises(AnsibleFilterError, match="fabric_env: "):
        fabric_env(nodes)
