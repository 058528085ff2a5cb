"""playbooks/status.yml through ansible-playbook without a cluster: this machine is spark1 (a local
connection), spark2 answers nowhere (ssh to a closed port of this machine), and Prometheus on the
head is a stand-in on loopback answering canned figures. The live figures show per group in the text,
and -e status_format=json prints one document (read as a script would, with the json callback) with
the nodes' reports and the same figures; Prometheus off or down leaves the run green and says so; an
unknown format is refused before anything runs."""
from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from support.ansible_run import REPO, flat_output, run_ansible_playbook, write_ansible_cfg, write_half_down_inventory


def vector(*samples: tuple[dict[str, str], str]) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "vector",
                                          "result": [{"metric": m, "value": [1764780000.0, v]} for m, v in samples]}}


def answer(query: str) -> dict[str, Any]:
    """Prometheus' answer to each of status.yml's queries, as for group main under load."""
    if query.startswith("up{"):
        return vector(({"job": "vllm", "group": "main", "node": "spark1"}, "1"))
    if "request_success_total" in query:
        return vector(({"group": "main"}, "2.5"))
    if "generation_tokens_total" in query:
        return vector(({"group": "main"}, "320"))
    if "time_to_first_token" in query:
        return vector(({"group": "main"}, "0.25" if query.startswith("histogram_quantile(0.99") else "0.05"))
    if "kv_cache_usage_perc" in query:
        return vector(({"group": "main"}, "0.125"))
    if "dgx_spark_guard_engine_starts_total" in query and 'unit="vllm-serve"' in query:
        return vector(({"node": "spark1"}, "1"))
    return {"status": "error", "errorType": "bad_data", "error": f"unexpected query {query}"}


ALERTS = {"status": "success", "data": {"alerts": [
    {"labels": {"alertname": "DgxSparkMemoryLow", "severity": "warning", "node": "spark1"}, "state": "firing",
     "annotations": {"summary": "spark1 has less than 10 % memory available", "runbook": "docs/monitoring.md#memory"},
     "activeAt": "2026-12-03T18:00:00Z"}]}}


class Prometheus(BaseHTTPRequestHandler):
    """The two APIs status.yml asks: /api/v1/query and /api/v1/alerts."""

    def do_GET(self) -> None:  # noqa: N802 (BaseHTTPRequestHandler's name)
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/api/v1/query":
            body = answer(urllib.parse.parse_qs(url.query)["query"][0])
        elif url.path == "/api/v1/alerts":
            body = ALERTS
        else:
            body = {"status": "error", "error": "not found"}
        data = json.dumps(body).encode()
        self.send_response(200 if body["status"] == "success" else 400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def prometheus() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Prometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def run_status(tmp_path: Path, port: int, *extra_args: str) -> tuple[str, int, str]:
    hosts = write_half_down_inventory(tmp_path, {
        "vllm_serve_api_key": "dgx-spark-test-key", "dgx_spark_image": "dgx-spark-vllm-test/absent:none",
        "model_name": "dgx-spark-test/absent-model"})
    proc = run_ansible_playbook(REPO / "playbooks/status.yml", [hosts],
                                config=write_ansible_cfg(tmp_path), cwd=tmp_path, timeout=240,
                                extra_args=extra_args, extra_vars={"dgx_spark_prometheus_port": port})
    return flat_output(proc), proc.returncode, proc.stdout


def test_the_text_shows_the_live_figures_of_each_group(tmp_path: Path, prometheus: int) -> None:
    flat, rc, _stdout = run_status(tmp_path, prometheus)
    assert rc == 0, flat[-3000:]
    assert f"live figures (Prometheus http://127.0.0.1:{prometheus}, last minute):" in flat, flat[-3000:]
    for line in ("group main (head spark1)", "requests/s 2.50", "tokens/s 320.0", "TTFT p50/p99 50.0 ms / 250.0 ms",
                 "KV cache 12.5 %", "restarts (1 h) 1", "alerts DgxSparkMemoryLow", "firing alerts: 1"):
        assert line in flat, line
    assert "spark2: no report: unreachable" in flat  # what status.yml showed before stays


def test_json_is_one_document_with_the_nodes_and_the_same_figures(tmp_path: Path, prometheus: int,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANSIBLE_STDOUT_CALLBACK", "json")  # as the playbook's header tells a script
    _flat, rc, stdout = run_status(tmp_path, prometheus, "-e", "status_format=json")
    run = json.loads(stdout)
    assert rc == 0
    documents = [host["msg"] for play in run["plays"] for task in play["tasks"]
                 if task["task"]["name"] == "Status as JSON" for host in task["hosts"].values()]
    assert len(documents) == 1
    document = documents[0]
    assert document["groups"] == [{"group": "main", "head": "spark1", "scraped": True, "requests_per_s": 2.5,
                                   "tokens_per_s": 320.0, "ttft_p50_s": 0.05, "ttft_p99_s": 0.25,
                                   "kv_cache_usage": 0.125, "restarts_1h": 1, "alerts": ["DgxSparkMemoryLow"]}]
    assert [a["name"] for a in document["alerts"]] == ["DgxSparkMemoryLow"]
    assert document["nodes"]["spark2"] is None
    assert set(document["nodes"]["spark1"]["units"]) >= {"vllm-serve"}
    shown = [task["task"]["name"] for play in run["plays"] for task in play["tasks"]
             if any("msg" in host for host in task["hosts"].values())]
    assert "Show the live figures" not in shown and not any(name.startswith("Report every node") for name in shown)


def test_prometheus_down_leaves_the_run_green_and_says_so(tmp_path: Path) -> None:
    flat, rc, _stdout = run_status(tmp_path, 1)
    assert rc == 0, flat[-3000:]
    assert "live figures: none (HTTP -1:" in flat and "Prometheus at http://127.0.0.1:1 on the head" in flat


def test_monitoring_off_asks_nothing(tmp_path: Path, prometheus: int) -> None:
    flat, rc, _stdout = run_status(tmp_path, prometheus, "-e", '{"monitoring_enabled": false}')
    assert rc == 0, flat[-3000:]
    assert "live figures: none (monitoring is off (monitoring_enabled: false))" in flat


def test_an_unknown_format_is_refused_first(tmp_path: Path, prometheus: int) -> None:
    flat, rc, _stdout = run_status(tmp_path, prometheus, "-e", "status_format=yaml")
    assert rc != 0
    assert "status_format=yaml is not a format of playbooks/status.yml" in flat
    assert "Read every node" not in flat
