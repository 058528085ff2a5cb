"""Behaviour of the Ray layer on the container cluster (testinfra)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

FILES = Path(__file__).resolve().parents[2] / "shared" / "files"
FABRIC = {"spark1": "198.51.100.11", "spark2": "198.51.100.12"}
HEAD_MANAGEMENT = "198.18.0.11"
UNITS = {"spark1": "ray-head", "spark2": "ray-worker"}


def node(host) -> str:
    return host.backend.get_hostname().rsplit("-", 1)[-1]


def env_file(host, unit: str) -> dict[str, str]:
    content = host.file(f"/etc/dgx-spark-vllm/{unit}.env").content_string
    return dict(line.split("=", 1) for line in content.splitlines() if line and not line.startswith("#"))


def interface_of(host, address: str) -> str:
    for line in host.check_output("ip -o -4 addr show").splitlines():
        fields = line.split()
        if fields[3].split("/")[0] == address:
            return fields[1]
    raise AssertionError(f"{address} is on no interface of {node(host)}")


def run_on_head(host, script: str, *args: str):
    """Run a Python script inside the head's Ray container (a driver on the cluster)."""
    return host.run("docker exec -i ray-head python - " + " ".join(args) + " <<'PYEOF'\n" + script + "\nPYEOF")


def test_unit_runs_on_its_node_only(host):
    me = node(host)
    assert host.service(UNITS[me]).is_running
    assert host.service(UNITS[me]).is_enabled
    other = UNITS["spark2" if me == "spark1" else "spark1"]
    assert not host.file(f"/etc/systemd/system/{other}.service").exists


def test_env_file_is_root_only_and_holds_own_fabric_address(host):
    me = node(host)
    unit = UNITS[me]
    f = host.file(f"/etc/dgx-spark-vllm/{unit}.env")
    assert (f.user, f.group, f.mode) == ("root", "root", 0o600)
    env = env_file(host, unit)
    assert env["VLLM_HOST_IP"] == FABRIC[me]
    assert env["MASTER_ADDR"] == FABRIC["spark1"]
    ifname = interface_of(host, FABRIC[me])
    for key in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "UCX_NET_DEVICES",
                "OMPI_MCA_btl_tcp_if_include"):
        assert env[key] == ifname, key
    assert env["RAY_memory_monitor_refresh_ms"] == "0"


def test_container_runs_ray_on_own_fabric_address(host):
    me = node(host)
    args = host.check_output("docker inspect --format '{{json .Args}}' %s", UNITS[me])
    assert f"--node-ip-address={FABRIC[me]}" in args
    if me == "spark2":
        assert f"--address={FABRIC['spark1']}:6379" in args
    mode = host.check_output("docker inspect --format '{{.HostConfig.NetworkMode}} {{.HostConfig.IpcMode}} "
                             "{{.HostConfig.AutoRemove}} {{.HostConfig.RestartPolicy.Name}}' %s", UNITS[me])
    assert mode.split() == ["host", "host", "true", "no"]


def test_dashboard_is_off(host):
    if node(host) != "spark1":
        pytest.skip("the dashboard belongs to the head")
    assert not host.socket("tcp://0.0.0.0:8265").is_listening
    assert "--include-dashboard=false" in host.file("/etc/systemd/system/ray-head.service").content_string


def test_head_lists_every_node_by_fabric_address_with_gpus(host):
    if node(host) != "spark1":
        pytest.skip("asked on the head")
    script = (FILES.parent.parent.parent / "roles/ray_head/files/ray_cluster_state.py").read_text()
    state = json.loads(run_on_head(host, script).stdout.strip().splitlines()[-1])
    assert state["addresses"] == sorted(FABRIC.values())
    assert state["gpus"] == 2


def test_gloo_rendezvous_over_fabric_sums_across_nodes(host):
    if node(host) != "spark1":
        pytest.skip("driven from the head")
    out = run_on_head(host, (FILES / "ray_rendezvous.py").read_text(), "''", "60")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["ok"], result
    assert result["world"] == 2
    assert sorted(r["node"] for r in result["ranks"]) == sorted(FABRIC.values())
    assert all(r["vllm_host_ip"] == r["node"] for r in result["ranks"])
    assert all(r["master"] == FABRIC["spark1"] for r in result["ranks"])
    assert [r["sum"] for r in result["ranks"]] == [3.0, 3.0]  # 1 + 2 on both ranks


def test_rendezvous_at_head_management_address_fails_fast(host):
    """The failure this project exists to prevent, reproduced: the worker cannot reach it."""
    if node(host) != "spark1":
        pytest.skip("driven from the head")
    out = run_on_head(host, (FILES / "ray_rendezvous.py").read_text(), HEAD_MANAGEMENT, "15")
    assert out.rc == 1, out.stdout + out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert not result["ok"]
    assert re.search(r"timed out|Timed out|failed to connect", result["error"]), result["error"]
    assert result["seconds"] < 60
