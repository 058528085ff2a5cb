"""The Grafana dashboard (roles/monitoring/files/dgx-spark-vllm-dashboard.json) and the metric names
of the monitoring's queries.

- Every metric the dashboard and the alert rules use is one something exports: the collection's own
  (issue 28's contract: the guard's, the firewall watchdog's and ib_network's textfiles), vLLM's,
  node exporter 1.5's, or Prometheus' ``up``. A name misspelt there is no error anywhere, only an
  empty panel or an alert that never fires. (The cluster test, molecule/shared/tests/
  test_dashboard_metrics.py, checks the same names against a live scrape.)
- The dashboard imports into any Grafana: its datasource is the ``${DS_PROMETHEUS}`` input.
- Its queries are PromQL Prometheus accepts (promtool, on them as recording rules), and its fabric
  panel shows fabric interfaces only (promtool evaluates it on series of a fabric and a LAN
  interface).
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.promql_names import DASHBOARD, dashboard_expressions, used_metric_names

REPO = Path(__file__).resolve().parents[2]

# Issue 28's contract: what the serving guard, the firewall watchdog and ib_network write.
COLLECTION_METRICS = {
    "dgx_spark_guard_last_update_timestamp_seconds", "dgx_spark_guard_serving", "dgx_spark_guard_engine_starts_total",
    "dgx_spark_guard_restarts_total", "dgx_spark_guard_start_limit_hit", "dgx_spark_guard_epoch_info",
    "dgx_spark_guard_last_failure_timestamp_seconds", "dgx_spark_guard_probe_duration_seconds",
    "dgx_spark_firewall_table_loaded", "dgx_spark_firewall_table_restores_total",
    "dgx_spark_firewall_last_check_timestamp_seconds",
    "dgx_spark_fabric_expected_mtu_bytes", "dgx_spark_fabric_gate_passed", "dgx_spark_fabric_gate_busbw_gbps",
    "dgx_spark_fabric_gate_min_busbw_gbps", "dgx_spark_fabric_gate_timestamp_seconds"}
# vLLM's (0.32), as the contract lists them.
VLLM_METRICS = {
    "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total", "vllm:request_success_total", "vllm:time_to_first_token_seconds_bucket",
    "vllm:inter_token_latency_seconds_bucket", "vllm:e2e_request_latency_seconds_bucket"}
# Node exporter 1.5's (Debian bookworm's prometheus-node-exporter): meminfo, pressure (PSI "some" is
# waiting, "full" stalled), netclass and netdev.
NODE_EXPORTER_METRICS = {
    "node_memory_MemAvailable_bytes", "node_memory_MemTotal_bytes", "node_pressure_memory_waiting_seconds_total",
    "node_pressure_memory_stalled_seconds_total", "node_network_up", "node_network_mtu_bytes",
    "node_network_receive_bytes_total", "node_network_transmit_bytes_total"}
PROMETHEUS_METRICS = {"up"}
KNOWN = COLLECTION_METRICS | VLLM_METRICS | NODE_EXPORTER_METRICS | PROMETHEUS_METRICS
# What the dashboard shows (issue 28, deliverable 3), each by a metric its queries must use.
SHOWN = {
    "requests/s": "vllm:request_success_total", "tokens/s": "vllm:generation_tokens_total",
    "TTFT": "vllm:time_to_first_token_seconds_bucket", "ITL": "vllm:inter_token_latency_seconds_bucket",
    "running": "vllm:num_requests_running", "waiting": "vllm:num_requests_waiting",
    "KV usage": "vllm:kv_cache_usage_perc", "restarts": "dgx_spark_guard_engine_starts_total",
    "memory": "node_memory_MemAvailable_bytes", "PSI": "node_pressure_memory_waiting_seconds_total",
    "fabric received": "node_network_receive_bytes_total", "fabric sent": "node_network_transmit_bytes_total"}
# Grafana's variables, as a query of the dashboard would get them.
GRAFANA_VALUES = {"$__rate_interval": "1m", "$group": ".*", "$node": ".*"}


def model() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def panels(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [panel for node in nodes for panel in [node, *panels(node.get("panels", []))]]


def as_prometheus_sees_it(expr: str) -> str:
    return re.sub(r"\$\w+", lambda match: GRAFANA_VALUES[match.group()], expr)


@pytest.fixture(scope="module")
def promtool() -> str:
    """The path of a promtool; fails (never skips) when there is none to be had."""
    result = subprocess.run([str(REPO / "tools" / "ensure-promtool")], capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"tools/ensure-promtool found no promtool:\n{result.stderr}"
    return result.stdout.strip().splitlines()[-1]


def test_every_metric_used_is_one_something_exports() -> None:
    used = used_metric_names()
    unknown = {name: sorted(where) for name, where in used.items() if name not in KNOWN}
    assert unknown == {}, f"metrics nothing exports (name: where used): {unknown}"


@pytest.mark.parametrize(("what", "metric"), SHOWN.items(), ids=list(SHOWN))
def test_the_dashboard_shows(what: str, metric: str) -> None:
    assert any(metric in expr for expr in dashboard_expressions().values()), f"no panel shows {what} ({metric})"


def test_the_latency_panels_are_percentiles_of_the_histograms() -> None:
    exprs = [expr for expr in dashboard_expressions().values() if "_seconds_bucket" in expr]
    quantiles = {re.match(r"histogram_quantile\((0\.\d+),", expr).group(1) for expr in exprs}
    assert quantiles == {"0.5", "0.99"}, exprs


def test_the_dashboard_imports_into_any_grafana() -> None:
    dashboard = model()
    assert [item["name"] for item in dashboard["__inputs"]] == ["DS_PROMETHEUS"]
    assert dashboard["__inputs"][0]["pluginId"] == "prometheus"
    sources = [panel.get("datasource") for panel in panels(dashboard["panels"]) if panel["type"] != "row"]
    sources += [target.get("datasource") for panel in panels(dashboard["panels"]) for target in panel.get("targets", [])]
    sources += [variable.get("datasource") for variable in dashboard["templating"]["list"]]
    assert sources and all(source == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"} for source in sources), sources
    ids = [panel["id"] for panel in panels(dashboard["panels"])]
    assert len(ids) == len(set(ids)), "two panels share an id"


def test_prometheus_accepts_every_query_of_the_dashboard(promtool: str, tmp_path: Path) -> None:
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{number}", "expr": as_prometheus_sees_it(expr)}
        for number, expr in enumerate(dashboard_expressions().values())]}]}
    path = tmp_path / "dashboard.rules.yml"
    path.write_text(yaml.safe_dump(rules))
    result = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_fabric_panel_shows_the_fabric_interfaces_only(promtool: str, tmp_path: Path) -> None:
    """On a node with a fabric interface (named by fabric.prom) and a LAN interface, both busy,
    the fabric panel's queries give the fabric interface's traffic alone, with its node."""
    fabric = [expr for expr in dashboard_expressions().values() if "node_network_" in expr]
    assert len(fabric) == 2, fabric
    node = 'job="node",instance="192.168.200.12:9100",node="spark1"'
    series = [
        {"series": f'dgx_spark_fabric_expected_mtu_bytes{{{node},device="enp1s0f0np0"}}', "values": "9000x20"}]
    for direction in ("receive", "transmit"):
        series += [{"series": f'node_network_{direction}_bytes_total{{{node},device="{device}"}}', "values": "0+600x20"}
                   for device in ("enp1s0f0np0", "enP7s7")]
    tests = {"tests": [{"interval": "10s", "input_series": series, "promql_expr_test": [
        {"expr": as_prometheus_sees_it(expr), "eval_time": "2m",
         "exp_samples": [{"labels": f'{{{node},device="enp1s0f0np0"}}', "value": 60}]} for expr in fabric]}]}
    path = tmp_path / "fabric_panel.yml"
    path.write_text(yaml.safe_dump(tests))
    result = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
