"""playbooks/status.yml's live figures under load: while a bounded load of completions goes through
the endpoint (from outside the cluster, as a client sends them), status.yml shows non-zero requests/s
and tokens/s for every serving group, read from Prometheus on the head; -e status_format=json prints
one document, read as the playbook's header tells a script to (the json callback), with the same
figures and each node's report. Shared by the scenarios (each links this file into its tests/)."""
from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator

import pytest

from endpoint import COMPLETION, call
from nodes import NODES
from playbook_run import failure, run_playbook, status_document

pytestmark = pytest.mark.gate

# Prometheus scrapes every 10 s and status.yml's rates span the last minute: a load running this
# long before the first run gives every rate at least two samples that differ.
WARM_UP_S = 35
# The load's bounds: a few clients in a row each, for at most this long.
CLIENTS = 2
LOAD_LIMIT_S = 600
FIGURES = ("requests_per_s", "tokens_per_s", "ttft_p50_s", "ttft_p99_s", "kv_cache_usage", "restarts_1h", "alerts")


@pytest.fixture(scope="module")
def load() -> Iterator[list[int]]:
    """CLIENTS clients sending completions one after another until the module's tests end (or
    LOAD_LIMIT_S); yields the statuses answered so far."""
    stop = threading.Event()
    statuses: list[int] = []
    began = time.monotonic()

    def client() -> None:
        while not stop.is_set() and time.monotonic() - began < LOAD_LIMIT_S:
            try:
                statuses.append(call("/v1/completions", body=COMPLETION, timeout=30)[0])
            except OSError:
                statuses.append(0)
                time.sleep(1)

    threads = [threading.Thread(target=client, daemon=True) for _number in range(CLIENTS)]
    for thread in threads:
        thread.start()
    time.sleep(WARM_UP_S)
    yield statuses
    stop.set()
    for thread in threads:
        thread.join(60)


def test_status_shows_the_load_per_group(load: list[int]) -> None:
    result = run_playbook("playbooks/status.yml")
    output = result.stdout + result.stderr
    assert result.returncode == 0, failure(output)
    assert load and load.count(200) > 0, f"the load got no completion: {sorted(set(load))}"
    print(output[output.find("TASK [Show the live figures]"):][:3000])
    assert "live figures (Prometheus http://127.0.0.1:" in output, output[-3000:]
    # Whatever the callback's result format (JSON strings or YAML, quoted or not).
    groups = re.findall(r"group (\S+) \(head ([^)\s]+)\)", output)
    requests = [float(v) for v in re.findall(r"  requests/s\s+([0-9.]+)", output)]
    tokens = [float(v) for v in re.findall(r"  tokens/s\s+([0-9.]+)", output)]
    assert groups and len(requests) == len(tokens) == len(groups), output[-3000:]
    assert all(value > 0 for value in requests + tokens), dict(zip(groups, zip(requests, tokens)))
    assert "TTFT p50/p99" in output and "KV cache" in output and "restarts (1 h)" in output


def test_status_json_parses_with_the_same_figures(load: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANSIBLE_STDOUT_CALLBACK", "json")
    result = run_playbook("playbooks/status.yml", "-e", "status_format=json")
    assert result.returncode == 0, failure(result.stdout + result.stderr)
    document = status_document(result.stdout)
    print(json.dumps(document["groups"], indent=1))
    assert load.count(200) > 0
    assert document["prometheus"]["answered"] is True, document["prometheus"]
    assert document["groups"], document
    for group in document["groups"]:
        assert set(FIGURES) <= set(group), group
        assert group["scraped"] is True, group
        assert group["requests_per_s"] > 0 and group["tokens_per_s"] > 0, group
        assert group["ttft_p50_s"] is not None and 0 < group["ttft_p50_s"] <= group["ttft_p99_s"], group
        assert 0 <= group["kv_cache_usage"] <= 1, group
    assert isinstance(document["alerts"], list)
    assert set(document["nodes"]) == set(NODES)
    assert all(report and report["units"] for report in document["nodes"].values()), document["nodes"]
