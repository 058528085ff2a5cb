"""The Ray cluster seen from its head (testinfra, on spark1 only)."""
from __future__ import annotations

import json
import re

import time

from nodes import FABRIC, FILES, HEAD_MANAGEMENT, REPO, node_host, run_on_head

testinfra_hosts = ["ansible://spark1"]


def test_dashboard_is_off(host):
    assert not host.socket("tcp://8265").is_listening
    assert "--include-dashboard=false" in host.file("/etc/systemd/system/ray-head.service").content_string


def test_head_lists_every_node_by_fabric_address_with_gpus(host):
    script = (REPO / "roles/ray_head/files/ray_cluster_state.py").read_text()
    state = json.loads(run_on_head(host, script).stdout.strip().splitlines()[-1])
    assert state["addresses"] == sorted(FABRIC.values())
    assert state["gpus"] == 2


def test_gloo_rendezvous_over_fabric_sums_across_nodes(host):
    out = run_on_head(host, (FILES / "ray_rendezvous.py").read_text(), "''", "60")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["ok"], result
    assert result["world"] == 2
    assert sorted(r["node"] for r in result["ranks"]) == sorted(FABRIC.values())
    assert all(r["vllm_host_ip"] == r["node"] for r in result["ranks"])
    assert all(r["master"] == FABRIC["spark1"] for r in result["ranks"])
    assert result["ranks"][0]["node"] == FABRIC["spark1"]  # rank 0 holds the store at MASTER_ADDR
    assert [r["sum"] for r in result["ranks"]] == [3.0, 3.0]  # 1 + 2 on both ranks


def test_rendezvous_at_head_management_address_fails_fast(host):
    """The failure this project exists to prevent, reproduced: the worker cannot reach it."""
    out = run_on_head(host, (FILES / "ray_rendezvous.py").read_text(), HEAD_MANAGEMENT, "15")
    assert out.rc == 1, out.stdout + out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert not result["ok"]
    assert re.search(r"timed out|Timed out|failed to connect", result["error"]), result["error"]
    assert result["seconds"] < 60


def test_nothing_binds_the_head_management_address(host):
    """No service is bound to the management address itself.

    Ray 2.60 binds its GCS and some gRPC servers to 0.0.0.0 (it has no bind
    option), so those answer on every address of the head: on a real Spark a
    host firewall must close them on the LAN. What this collection controls
    binds the fabric address or loopback.
    """
    listeners = host.check_output("ss -Hltn | awk '{print $4}'").split()
    assert not [l for l in listeners if l.startswith(HEAD_MANAGEMENT + ":")], listeners
    assert not host.socket("tcp://8265").is_listening


def test_restarted_ray_layer_rejoins_over_the_fabric(host):
    """Time from (re)starting the head and worker units to Ray listing both nodes."""
    script = (REPO / "roles/ray_head/files/ray_cluster_state.py").read_text()
    started = time.monotonic()
    host.check_output("systemctl restart ray-head")
    node_host("spark2").check_output("systemctl restart ray-worker")
    state: dict = {}
    while time.monotonic() - started < 180:
        out = run_on_head(host, script)
        if out.rc == 0:
            state = json.loads(out.stdout.strip().splitlines()[-1])
            if state["addresses"] == sorted(FABRIC.values()) and state["gpus"] == 2:
                break
        time.sleep(1)
    seconds = time.monotonic() - started
    print(f"Ray head and worker units restarted: all nodes joined after {seconds:.0f} s")
    assert state.get("addresses") == sorted(FABRIC.values()), state
    assert state.get("gpus") == 2, state
