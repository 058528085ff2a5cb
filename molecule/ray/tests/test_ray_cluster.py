"""Behaviour of the Ray layer on the container cluster (testinfra)."""
from __future__ import annotations

from nodes import FABRIC, HEAD, RAY_PORT, UNITS, env_file, interface_of, node


def test_unit_runs_on_its_node_only(host):
    me = node(host)
    assert host.service(UNITS[me]).is_running
    assert host.service(UNITS[me]).is_enabled
    other = UNITS["spark2" if me == HEAD else "spark1"]
    assert not host.file(f"/etc/systemd/system/{other}.service").exists


def test_env_file_is_root_only_and_holds_own_fabric_address(host):
    me = node(host)
    unit = UNITS[me]
    f = host.file(f"/etc/dgx-spark-vllm/{unit}.env")
    assert (f.user, f.group, f.mode) == ("root", "root", 0o600)
    env = env_file(host, unit)
    assert env["VLLM_HOST_IP"] == FABRIC[me]
    assert env["MASTER_ADDR"] == FABRIC[HEAD]
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
        assert f"--address={FABRIC[HEAD]}:{RAY_PORT}" in args
    mode = host.check_output("docker inspect --format '{{.HostConfig.NetworkMode}} {{.HostConfig.IpcMode}} "
                             "{{.HostConfig.AutoRemove}} {{.HostConfig.RestartPolicy.Name}}' %s", UNITS[me])
    assert mode.split() == ["host", "host", "true", "no"]
