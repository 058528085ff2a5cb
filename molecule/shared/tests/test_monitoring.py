"""The monitoring (role monitoring) on the running cluster: Prometheus on the head scrapes every
serving group's engine and every node's exporter, all up; a query returns vLLM's request and KV
metrics for the served model and every node's available memory; neither Prometheus nor an exporter
answers a stranger, on the LAN or on the fabric; and what the stack costs each node in memory.
Shared by the scenarios (each links this file into its tests/)."""
from __future__ import annotations

import json
import time
from typing import Any

import pytest

import outsider
import prometheus
from nodes import FABRIC, HEAD, HEAD_MANAGEMENT, MODEL, NODES, node_host
from settings import setting

EXPORTER_PORT: int = setting("dgx_spark_node_exporter_port")
# The role's units (roles/monitoring/vars/main.yml).
PROMETHEUS_UNIT = "dgx-spark-vllm-prometheus"
EXPORTER_UNIT = "dgx-spark-vllm-node-exporter"
TARGETS_UP_SECONDS = 60

# Whether each host:port accepts a TCP connection (a dropped SYN times out: no).
PROBE = r"""
import json, socket, sys
def answers(address):
    host, port = address.rsplit(":", 1)
    with socket.socket() as s:
        s.settimeout(3)
        return s.connect_ex((host, int(port))) == 0
print(json.dumps({address: answers(address) for address in sys.argv[1:]}))
"""


def active_targets() -> list[dict[str, Any]]:
    return prometheus.api("/api/v1/targets", state="active")["activeTargets"]


def summary(targets: list[dict[str, Any]]) -> list[str]:
    return [f"{t['labels'].get('job')} {t['labels'].get('node')} {t['scrapeUrl']}: {t['health']} "
            f"{t.get('lastError', '')}" for t in targets]


def test_every_target_is_up_within_a_minute():
    deadline = time.monotonic() + TARGETS_UP_SECONDS
    targets = active_targets()
    while not (targets and all(t["health"] == "up" for t in targets)) and time.monotonic() < deadline:
        time.sleep(2)
        targets = active_targets()
    print("\n".join(summary(targets)))
    exporters = sorted(t["labels"]["node"] for t in targets if t["labels"]["job"] == "node")
    engines = [t for t in targets if t["labels"]["job"] == "vllm"]
    assert exporters == sorted(NODES)
    assert engines and all(t["labels"].get("group") for t in engines)
    assert all(t["scrapeUrl"].startswith(f"http://{FABRIC[t['labels']['node']]}:") for t in targets)
    assert all(t["health"] == "up" for t in targets), summary(targets)


@pytest.mark.parametrize("metric", ["vllm:num_requests_running", "vllm:kv_cache_usage_perc"])
def test_a_query_returns_vllm_metrics_of_the_served_model(metric):
    result = prometheus.query(f'{metric}{{model_name="{MODEL}"}}')
    print(result)
    assert result, f"no {metric} of {MODEL} in Prometheus"
    assert all(sample["metric"]["job"] == "vllm" for sample in result)


def test_a_query_returns_the_available_memory_of_every_node():
    result = prometheus.query("node_memory_MemAvailable_bytes")
    print({sample["metric"]["node"]: sample["value"][1] for sample in result})
    assert sorted(sample["metric"]["node"] for sample in result) == sorted(NODES)
    assert all(float(sample["value"][1]) > 0 for sample in result)


@pytest.fixture(scope="module")
def stranger():
    outsider.start()
    yield
    outsider.stop()


def test_a_stranger_reaches_neither_prometheus_nor_an_exporter(stranger):
    """From the LAN (the head's management address) and from the fabric (an address that is not a
    node's): Prometheus answers loopback only, each exporter the nodes' fabric addresses only."""
    addresses = [f"{HEAD_MANAGEMENT}:{prometheus.PORT}", f"{HEAD_MANAGEMENT}:{EXPORTER_PORT}"]
    addresses += [f"{FABRIC[name]}:{port}" for name in NODES for port in (prometheus.PORT, EXPORTER_PORT)]
    probed = outsider.python(PROBE, *addresses)
    assert probed.returncode == 0, probed.stderr
    answered = json.loads(probed.stdout.strip().splitlines()[-1])
    print(answered)
    assert [address for address, answers in answered.items() if answers] == []


def rss_kib(name: str, unit: str) -> int:
    """The resident memory of a unit's main process on a node, in KiB."""
    host = node_host(name)
    pid = host.check_output(f"systemctl show --property=MainPID --value {unit}").strip()
    assert pid not in ("", "0"), f"{unit} runs no process on {name}"
    status = host.check_output(f"cat /proc/{pid}/status")
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))


def test_the_monitoring_footprint_of_each_node(record_property):
    """Not a limit: the figure the issue asks to state (the RSS of the monitoring's processes)."""
    for name in NODES:
        units = [PROMETHEUS_UNIT, EXPORTER_UNIT] if name == HEAD else [EXPORTER_UNIT]
        footprint = {unit: rss_kib(name, unit) for unit in units}
        for unit, kib in footprint.items():
            record_property(f"monitoring_rss_kib_{name}_{unit}", kib)
        print(f"{name}: " + ", ".join(f"{unit} {kib / 1024:.1f} MiB RSS" for unit, kib in footprint.items()))
        assert all(kib > 0 for kib in footprint.values())
