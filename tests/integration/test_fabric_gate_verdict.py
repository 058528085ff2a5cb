"""The fabric gate's verdict through Ansible (roles/ib_network/tasks/bandwidth.yml), without a
cluster: the example inventory's two Sparks run locally from their recorded facts, as GPU nodes
with RDMA devices, and a stand-in ``docker`` runs the gate's own script (the source the task
passes with ``python3 -c``) with only the measurement replaced: each rank's bus bandwidth and
NCCL log are planted. A planted NET/Socket log on one node fails the run naming that node,
whatever the figure; the same log on nodes without RDMA devices passes. Each node records the
gate's result for Prometheus (fabric-gate.prom in its metrics folder), a failed gate too."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from support.ansible_run import flat_output
from support.example_inventory import HOSTS, run_locally
from support.facts import load_facts
from support.textfile import check_metrics, samples

RING = "ring spark1 (192.168.200.12) <-> spark2 (192.168.200.13)"
IB_LOG = "spark1:40:40 [0] NCCL INFO NET/IB : Using [0]rocep1s0f0:1/RoCE [1]roceP2p1s0f0:1/RoCE\n" \
         "spark1:40:40 [0] NCCL INFO Using network IB\n"
SOCKET_LOG = "spark2:41:41 [0] NCCL INFO NET/IB : No device found.\n" \
             "spark2:41:41 [0] NCCL INFO NET/Socket : Using [0]enp1s0f0np0:192.168.200.13<0>\n" \
             "spark2:41:41 [0] NCCL INFO Using network Socket\n"
RDMA = {"dgx_spark_rdma_devices": ["rocep1s0f0", "roceP2p1s0f0"]}
PLAYBOOK = """\
- name: The base role's preflight (the facts the gate reads)
  hosts: sparks
  gather_facts: false
  roles: [dgx_spark.vllm.dgx_spark]

- name: The fabric gate
  hosts: sparks
  gather_facts: false
  tasks:
    - name: Gate
      ansible.builtin.include_role:
        name: dgx_spark.vllm.ib_network
        tasks_from: bandwidth.yml
"""
# `docker run ... --entrypoint python3 IMAGE -c SOURCE ARGS`: the gate's script, its measurement
# and NCCL log replaced by the plan for this rank.
FAKE_DOCKER = """\
#!{python}
import json, os, sys, types
argv = sys.argv[1:]
source, args = argv[argv.index("-c") + 1], argv[argv.index("-c") + 2:]
plan = json.load(open(os.environ["FAKE_GATE_PLAN"]))[args[args.index("--rank") + 1]]
gate = types.ModuleType("fabric_bandwidth")
sys.modules["fabric_bandwidth"] = gate
exec(compile(source, "fabric_bandwidth.py", "exec"), gate.__dict__)
def measure(arguments, report):
    report.sizes = [gate.SizeResult(512 * 2**20, 0.01, plan["busbw"] * 2, plan["busbw"])]
gate.measure = measure
gate.read_and_remove = lambda path: plan["log"]
sys.exit(gate.main(args))
"""


def run_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plan: dict[str, dict[str, object]],
             host_vars: dict[str, dict[str, object]]) -> tuple[int, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(FAKE_DOCKER.format(python=sys.executable))
    docker.chmod(0o755)
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    (tmp_path / "gate.yml").write_text(PLAYBOOK)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_GATE_PLAN", str(tmp_path / "plan.json"))
    # Each node's own metrics folder (both run on this machine), made by the fabric's layer before.
    host_vars = {host: {**host_vars.get(host, {}), "dgx_spark_metrics_dir": str(tmp_path / "metrics" / host)}
                 for host in HOSTS}
    for host in HOSTS:
        (tmp_path / "metrics" / host).mkdir(parents=True, mode=0o755)
    proc = run_locally(tmp_path, tmp_path / "gate.yml", {host: load_facts(host) for host in HOSTS},
                       host_vars=host_vars, extra={"dgx_spark_node_has_gpu": True})
    return proc.returncode, flat_output(proc)


def gate_metrics(tmp_path: Path, host: str) -> dict[str, float]:
    """The gate's result as the node exporter would read it from HOST's metrics folder."""
    text = (tmp_path / "metrics" / host / "fabric-gate.prom").read_text()
    check_metrics(text)
    return {name: value for (name, _labels), value in samples(text).items()}


def test_a_planted_net_socket_log_on_a_node_with_rdma_fails_the_gate_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rc, output = run_gate(tmp_path, monkeypatch, {"0": {"busbw": 25.0, "log": IB_LOG},
                                                  "1": {"busbw": 25.0, "log": SOCKET_LOG}},
                          {"spark1": RDMA, "spark2": RDMA})
    assert rc != 0, output[-3000:]
    fatal = output[output.find("fatal: "):]
    assert f"Fabric gate: all_gather bus bandwidth over {RING}: 25.00 GB/s (nccl, NCCL over NET/IB), at least " \
           "21.875 GB/s expected: pass" in fatal
    assert f"spark2: all_gather bus bandwidth over {RING}: 25.00 GB/s (nccl, NCCL over NET/Socket): NCCL used " \
           "NET/Socket on a node with RDMA devices, not RDMA." in fatal
    assert "changed=0" in output
    for host in HOSTS:  # recorded before the run stopped: the ring failed, on every node
        recorded = gate_metrics(tmp_path, host)
        assert recorded["dgx_spark_fabric_gate_passed"] == 0
        assert recorded["dgx_spark_fabric_gate_busbw_gbps"] == 25.0
        assert recorded["dgx_spark_fabric_gate_min_busbw_gbps"] == 21.875


def test_both_nodes_on_net_ib_above_the_two_node_figure_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rc, output = run_gate(tmp_path, monkeypatch, {"0": {"busbw": 22.5, "log": IB_LOG},
                                                  "1": {"busbw": 22.5, "log": IB_LOG}},
                          {"spark1": RDMA, "spark2": RDMA})
    assert rc == 0, output[-3000:]
    assert "22.50 GB/s (nccl, NCCL over NET/IB), at least 21.875 GB/s expected: pass" in output
    recorded = gate_metrics(tmp_path, "spark2")
    assert recorded["dgx_spark_fabric_gate_passed"] == 1 and recorded["dgx_spark_fabric_gate_busbw_gbps"] == 22.5
    assert abs(recorded["dgx_spark_fabric_gate_timestamp_seconds"] - time.time()) < 600


def test_below_the_two_node_figure_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rc, output = run_gate(tmp_path, monkeypatch, {"0": {"busbw": 12.0, "log": IB_LOG},
                                                  "1": {"busbw": 12.0, "log": IB_LOG}},
                          {"spark1": RDMA, "spark2": RDMA})
    assert rc != 0, output[-3000:]
    assert "12.00 GB/s (nccl, NCCL over NET/IB), below the 21.875 GB/s expected" in output


def test_sockets_on_nodes_without_rdma_devices_pass_when_fast_enough(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rc, output = run_gate(tmp_path, monkeypatch, {"0": {"busbw": 25.0, "log": SOCKET_LOG},
                                                  "1": {"busbw": 25.0, "log": SOCKET_LOG}}, {})
    assert rc == 0, output[-3000:]
    assert "25.00 GB/s (nccl, NCCL over NET/Socket), at least 21.875 GB/s expected: pass" in output
