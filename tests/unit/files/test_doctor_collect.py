"""Tests of roles/doctor/files/collect.py: what playbooks/doctor.yml gathers on a node, its redaction
of secrets before anything leaves the node, and what it calls wrong."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from support.role_files import REPO, load_role_file

collect = load_role_file("roles/doctor/files/collect.py")

KEY = "dgx-spark-test-key-5f1c9a"
TOKEN = "0f3a9c1e77d24b6a8e5d0c3b9a1f2e4d"


def test_the_secret_files_values_are_found_unquoted_and_as_written() -> None:
    values = collect.secret_values([f"VLLM_API_KEY='{KEY}'\n", f"{TOKEN}\n", "export HF_TOKEN=hf_abcdefgh\n"])
    assert {KEY, f"'{KEY}'", TOKEN, "hf_abcdefgh"} <= values


def test_values_too_short_to_be_a_secret_are_not_redacted_everywhere() -> None:
    assert collect.secret_values(["A=1\n", "abc\n"]) == set()


def test_every_occurrence_of_a_secret_is_redacted_the_longest_first() -> None:
    text = f"started with --api-key {KEY} and {KEY}-suffix; token {TOKEN}"
    redacted = collect.redact(text, {KEY, KEY[:10], TOKEN})
    assert KEY not in redacted and KEY[:10] not in redacted and TOKEN not in redacted
    assert redacted == "started with --api-key REDACTED and REDACTED-suffix; token REDACTED"


def test_an_env_file_keeps_its_settings_and_loses_every_secret_value() -> None:
    env = f"NCCL_IB_HCA=rocep1s0f0,roceP2p1s0f0\nHF_TOKEN=hf_other\nMY_PASSWORD=x\nNOTE=uses {TOKEN}\n"
    assert collect.redact_env(env, {TOKEN}) == \
        "NCCL_IB_HCA=rocep1s0f0,roceP2p1s0f0\nHF_TOKEN=REDACTED\nMY_PASSWORD=REDACTED\nNOTE=uses REDACTED\n"


def test_a_report_is_redacted_in_every_string_keys_included() -> None:
    report = {"units": {"u": {"StatusText": f"key {KEY}"}}, KEY: [f"{KEY}"], "n": 3}
    assert collect.redact_tree(report, {KEY}) == {"units": {"u": {"StatusText": "key REDACTED"}},
                                                  "REDACTED": ["REDACTED"], "n": 3}


def test_secret_files_are_never_read_out_only_the_units_env_files(tmp_path: Path) -> None:
    (tmp_path / "vllm-serve.env").write_text(f"NCCL_SOCKET_IFNAME=enp1s0f0np0\nX={KEY}\n")
    (tmp_path / "vllm-serve.secrets.env").write_text(f"VLLM_API_KEY={KEY}\n")
    (tmp_path / "hf-token.env").write_text("HF_TOKEN=hf_abcdefgh\n")
    assert collect.env_files(str(tmp_path), {KEY}) == {"vllm-serve.env": "NCCL_SOCKET_IFNAME=enp1s0f0np0\nX=REDACTED\n"}


def test_the_helper_holds_no_jinja_since_playbooks_pass_it_through_a_lookup() -> None:
    text = (REPO / "roles/doctor/files/collect.py").read_text()
    assert not [marker for marker in ("{{", "{%", "{#") if marker in text]


# ---- what looks wrong ---------------------------------------------------------------

def unit(state: str = "active", sub: str = "running", result: str = "success", restarts: int = 0,
         load: str = "loaded") -> dict[str, str]:
    return {"LoadState": load, "ActiveState": state, "SubState": sub, "Result": result, "NRestarts": str(restarts)}


def net(operstate: str = "up", mtu: int = 9000, rdma: list[str] | None = None) -> dict[str, Any]:
    return {"operstate": operstate, "mtu": str(mtu), "rdma": rdma or [], "pci": "0000:01:00.0"}


HEALTHY: dict[str, Any] = {
    "machine": "aarch64",
    "units": {"vllm-serve": unit(), "vllm-serve-guard": unit(),
              "ray-head": unit(state="inactive", sub="dead", load="not-found")},
    "containers": {"vllm-serve": {"Status": "running", "OOMKilled": False}},
    "interfaces": {"enp1s0f0np0": net(rdma=["rocep1s0f0"]), "enP2p1s0f0np0": net(rdma=["roceP2p1s0f0"]),
                   "enp1s0f1np1": net(operstate="down", mtu=1500, rdma=["rocep1s0f1"]), "wlP9s9": net("down", 1500)},
    "rdma": {"rocep1s0f0": {}, "roceP2p1s0f0": {}, "rocep1s0f1": {}},
    "fabric_env": {"NCCL_SOCKET_IFNAME": "enp1s0f0np0", "NCCL_IB_HCA": "=rocep1s0f0,roceP2p1s0f0"},
    "psi": {"memory": {"some_avg60": 0.5}},
    "image": {"name": "nvcr.io/nvidia/vllm:26.05-py3", "present": True, "architecture": "arm64"},
}
SETTINGS = {"expected_units": ["vllm-serve"], "mtu": 9000, "memory_pressure": 10}


def test_a_healthy_node_has_nothing_wrong_unused_ports_and_optional_units_included() -> None:
    assert collect.findings(copy.deepcopy(HEALTHY), SETTINGS) == []


@pytest.mark.parametrize("state, finding", [
    (unit(state="inactive", sub="dead"), "unit vllm-serve is inactive"),
    (unit(state="failed", sub="failed", result="exit-code"), "unit vllm-serve is failed (exit-code)"),
    (unit(state="activating", sub="auto-restart", restarts=4), "unit vllm-serve is restarting (auto-restart, restarts 4)"),
    (unit(restarts=2), "unit vllm-serve restarted 2 time(s) on its own since it was last started"),
    (unit(state="inactive", sub="dead", load="not-found"), "unit vllm-serve is not installed"),
])
def test_a_serving_unit_that_is_down_restarting_or_missing_is_named(state: dict[str, str], finding: str) -> None:
    report = copy.deepcopy(HEALTHY)
    report["units"]["vllm-serve"] = state
    assert collect.findings(report, SETTINGS) == [finding]


def test_an_optional_unit_is_named_only_when_it_failed() -> None:
    report = copy.deepcopy(HEALTHY)
    report["units"]["vllm-serve-guard"] = unit(state="inactive", sub="dead")
    assert collect.findings(report, SETTINGS) == []
    report["units"]["vllm-serve-guard"] = unit(state="failed", sub="failed", result="signal")
    assert collect.findings(report, SETTINGS) == ["unit vllm-serve-guard is failed (signal)"]


def test_a_fabric_link_down_is_named_with_the_setting_that_uses_it() -> None:
    report = copy.deepcopy(HEALTHY)
    report["interfaces"]["enP2p1s0f0np0"]["operstate"] = "down"
    assert collect.findings(report, SETTINGS) == ["link enP2p1s0f0np0 (NCCL_IB_HCA) is down"]


def test_a_fabric_mtu_below_9000_is_named_on_a_node_with_rdma_devices_only() -> None:
    report = copy.deepcopy(HEALTHY)
    report["interfaces"]["enp1s0f0np0"]["mtu"] = "1500"
    assert collect.findings(report, SETTINGS) == ["MTU of enp1s0f0np0 (NCCL_SOCKET_IFNAME) is 1500, not 9000"]
    report["rdma"] = {}
    assert collect.findings(report, SETTINGS) == []


def test_a_fabric_interface_the_node_no_longer_has_is_named() -> None:
    report = copy.deepcopy(HEALTHY)
    report["fabric_env"]["NCCL_SOCKET_IFNAME"] = "eth0"
    assert collect.findings(report, SETTINGS) == ["interface eth0 (NCCL_SOCKET_IFNAME) does not exist"]


def test_high_memory_pressure_and_an_oom_kill_are_named() -> None:
    report = copy.deepcopy(HEALTHY)
    report["psi"]["memory"]["some_avg60"] = 42.0
    report["containers"]["vllm-serve"]["OOMKilled"] = True
    assert collect.findings(report, SETTINGS) == ["container vllm-serve was killed for memory (OOM)",
                                                  "memory pressure is high: some avg60 42.0% (/proc/pressure/memory)"]


@pytest.mark.parametrize("machine, architecture, wrong", [
    ("aarch64", "arm64", False), ("x86_64", "amd64", False), ("aarch64", "amd64", True), ("x86_64", "arm64", True)])
def test_an_image_for_another_architecture_is_named(machine: str, architecture: str, wrong: bool) -> None:
    report = copy.deepcopy(HEALTHY)
    report["machine"], report["image"]["architecture"] = machine, architecture
    expected = [f"image nvcr.io/nvidia/vllm:26.05-py3 is for {architecture}, the node is {machine}"] if wrong else []
    assert collect.findings(report, SETTINGS) == expected


def test_a_missing_image_is_named() -> None:
    report = copy.deepcopy(HEALTHY)
    report["image"] = {"name": "img:1", "present": False, "error": "No such image"}
    assert collect.findings(report, SETTINGS) == ["image img:1 is not on the node (No such image)"]


def test_the_version_comes_from_a_label_without_running_anything() -> None:
    assert collect.vllm_version({"labels": {"com.nvidia.vllm.version": "0.11.0"}}, ["vllm-serve"], 1) == \
        "0.11.0 (label com.nvidia.vllm.version)"
    assert collect.vllm_version({"labels": {}}, [], 1).startswith("unknown")


# ---- reading sysfs ---------------------------------------------------------------------

ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
GIDS = [("fe80:0000:0000:0000:4e9d:e4ff:fe12:3456", "IB/RoCE v1"), ("fe80:0000:0000:0000:4e9d:e4ff:fe12:3456", "RoCE v2"),
        ("0000:0000:0000:0000:0000:ffff:c0a8:c80c", "IB/RoCE v1"), ("0000:0000:0000:0000:0000:ffff:c0a8:c80c", "RoCE v2"),
        (ZERO_GID, "")]


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def spark_sysfs(root: Path) -> Path:
    """A sysfs tree of one cabled CX7 twin as a Spark shows it: PCI device, interface, RDMA device, GIDs."""
    sys_root = root / "sys"
    pci = sys_root / "devices/pci0000:00/0000:01:00.0"
    (sys_root / "bus/pci/drivers/mlx5_core").mkdir(parents=True)
    pci.mkdir(parents=True)
    (pci / "driver").symlink_to(sys_root / "bus/pci/drivers/mlx5_core")
    (pci / "infiniband/rocep1s0f0").mkdir(parents=True)
    (pci / "net/enp1s0f0np0").mkdir(parents=True)
    net = sys_root / "class/net/enp1s0f0np0"
    for name, text in {"operstate": "up\n", "carrier": "1\n", "mtu": "9000\n", "speed": "200000\n",
                       "address": "4c:9d:e4:12:34:56\n"}.items():
        write(net / name, text)
    (net / "device").symlink_to(pci)
    write(sys_root / "class/net/lo/operstate", "unknown\n")
    device = sys_root / "class/infiniband/rocep1s0f0"
    write(device / "fw_ver", "28.45.1020\n")
    (device / "device").symlink_to(pci)
    port = device / "ports/1"
    for name, text in {"state": "4: ACTIVE\n", "phys_state": "5: LinkUp\n", "rate": "200 Gb/sec (2X NDR)\n",
                       "link_layer": "Ethernet\n"}.items():
        write(port / name, text)
    for index, (gid, kind) in enumerate(GIDS):
        write(port / f"gids/{index}", gid + "\n")
        write(port / f"gid_attrs/types/{index}", kind + "\n")
        write(port / f"gid_attrs/ndevs/{index}", "enp1s0f0np0\n" if kind else "")
    return sys_root


def test_interfaces_show_state_mtu_speed_driver_and_their_rdma_devices(tmp_path: Path) -> None:
    nets = collect.interfaces(str(spark_sysfs(tmp_path)))
    assert nets["enp1s0f0np0"] == {"operstate": "up", "carrier": "1", "mtu": "9000", "speed": "200000",
                                   "address": "4c:9d:e4:12:34:56", "driver": "mlx5_core", "pci": "0000:01:00.0",
                                   "rdma": ["rocep1s0f0"]}
    assert nets["lo"]["pci"] == "" and nets["lo"]["rdma"] == [] and nets["lo"]["speed"] == ""


def test_rdma_devices_show_firmware_port_state_and_the_set_gids_with_their_type(tmp_path: Path) -> None:
    devices = collect.rdma_devices(str(spark_sysfs(tmp_path)))
    device = devices["rocep1s0f0"]
    assert device["fw_ver"] == "28.45.1020" and device["netdevs"] == ["enp1s0f0np0"]
    port = device["ports"]["1"]
    assert (port["state"], port["rate"], port["link_layer"]) == ("4: ACTIVE", "200 Gb/sec (2X NDR)", "Ethernet")
    assert [(g["index"], g["type"], g["netdev"]) for g in port["gids"]] == [
        (0, "IB/RoCE v1", "enp1s0f0np0"), (1, "RoCE v2", "enp1s0f0np0"),
        (2, "IB/RoCE v1", "enp1s0f0np0"), (3, "RoCE v2", "enp1s0f0np0")]
