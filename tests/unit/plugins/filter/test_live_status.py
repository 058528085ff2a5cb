"""The live_status filters: Prometheus' answers become one row per serving group (no traffic reads 0,
not an error), the firing alerts are listed, and Prometheus off or unreachable gives no figures and a
plain reason instead of a failure."""
from __future__ import annotations

import json
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.dgx_spark.vllm.plugins.filter.live_status import (
    live_status,
    live_status_lines,
    live_status_queries,
)

GROUPS = [{"name": "a", "head": "spark1"}, {"name": "b", "head": "spark3"}]
URL = "http://127.0.0.1:9090"


def vector(*samples: tuple[dict[str, str], str]) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "vector",
                                          "result": [{"metric": m, "value": [1764780000.0, v]} for m, v in samples]}}


def answers(overrides: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The uri loop's results for a cluster of two groups, a under load and b idle."""
    bodies = {
        "up": vector(({"job": "vllm", "group": "a", "node": "spark1"}, "1"),
                     ({"job": "vllm", "group": "b", "node": "spark3"}, "1")),
        "requests_per_s": vector(({"group": "a"}, "3.2"), ({"group": "b"}, "0")),
        "tokens_per_s": vector(({"group": "a"}, "409.6"), ({"group": "b"}, "0")),
        "ttft_p50_s": vector(({"group": "a"}, "0.021"), ({"group": "b"}, "NaN")),
        "ttft_p99_s": vector(({"group": "a"}, "0.09"), ({"group": "b"}, "NaN")),
        "kv_cache_usage": vector(({"group": "a"}, "0.42"), ({"group": "b"}, "0")),
        "restarts_1h": vector(({"node": "spark1"}, "2.0000001"), ({"node": "spark3"}, "0")),
    }
    bodies.update(overrides or {})
    return [{"item": {"key": name, "value": query}, "status": 200, "json": bodies[name]}
            for name, query in live_status_queries("vllm-serve").items()]


def alerts(*firing: dict[str, Any]) -> dict[str, Any]:
    return {"status": 200, "json": {"status": "success", "data": {"alerts": list(firing)}}}


def alert(name: str, state: str = "firing", **labels: str) -> dict[str, Any]:
    return {"labels": {"alertname": name, "severity": "critical", **labels}, "state": state,
            "annotations": {"summary": f"{name} summary", "runbook": f"docs/monitoring.md#{name.lower()}"},
            "activeAt": "2026-12-03T18:00:00Z"}


def row(document: dict[str, Any], group: str) -> dict[str, Any]:
    return next(r for r in document["groups"] if r["group"] == group)


def test_the_queries_name_the_serving_unit_and_the_metrics() -> None:
    queries = live_status_queries("vllm-serve")
    assert 'unit="vllm-serve"' in queries["restarts_1h"] and "[1h]" in queries["restarts_1h"]
    assert "rate(vllm:request_success_total" in queries["requests_per_s"]
    assert "rate(vllm:generation_tokens_total" in queries["tokens_per_s"]
    assert queries["ttft_p99_s"].startswith("histogram_quantile(0.99,")


def test_figures_per_group() -> None:
    document = live_status(answers(), alerts(), GROUPS, URL)
    assert document["prometheus"] == {"enabled": True, "url": URL, "answered": True, "error": None}
    assert row(document, "a") == {"group": "a", "head": "spark1", "scraped": True, "requests_per_s": 3.2,
                                  "tokens_per_s": 409.6, "ttft_p50_s": 0.021, "ttft_p99_s": 0.09,
                                  "kv_cache_usage": 0.42, "restarts_1h": 2, "alerts": []}


def test_an_idle_group_reads_zero_and_no_ttft() -> None:
    b = row(live_status(answers(), alerts(), GROUPS, URL), "b")
    assert (b["requests_per_s"], b["tokens_per_s"], b["ttft_p50_s"], b["ttft_p99_s"]) == (0.0, 0.0, None, None)


def test_no_series_at_all_reads_zero_for_rates_and_restarts() -> None:
    empty = vector()
    document = live_status(answers({name: empty for name in live_status_queries("u")}), alerts(), GROUPS, URL)
    a = row(document, "a")
    assert (a["requests_per_s"], a["tokens_per_s"], a["restarts_1h"]) == (0.0, 0.0, 0)
    assert (a["kv_cache_usage"], a["scraped"]) == (None, False)
    assert "DOWN or not scraped" in "\n".join(live_status_lines(document))


def test_a_group_only_prometheus_knows_is_listed_too() -> None:
    up = vector(({"group": "a"}, "1"), ({"group": "b"}, "1"), ({"group": "old"}, "0"))
    document = live_status(answers({"up": up}), alerts(), GROUPS, URL)
    assert [r["group"] for r in document["groups"]] == ["a", "b", "old"]
    assert "group old (not in the inventory): its vLLM target is DOWN" in "\n".join(live_status_lines(document))


def test_firing_alerts_are_listed_and_attached_to_their_group() -> None:
    document = live_status(answers(), alerts(alert("DgxSparkServingDown", group="b", node="spark3"),
                                             alert("DgxSparkMemoryLow", node="spark3"),
                                             alert("DgxSparkKvCacheHigh", state="pending", group="a")), GROUPS, URL)
    assert [a["name"] for a in document["alerts"]] == ["DgxSparkMemoryLow", "DgxSparkServingDown"]
    assert row(document, "a")["alerts"] == []
    assert row(document, "b")["alerts"] == ["DgxSparkMemoryLow", "DgxSparkServingDown"]
    text = "\n".join(live_status_lines(document))
    assert "firing alerts: 2" in text
    assert ("DgxSparkServingDown (critical, group b, node spark3, since 2026-12-03T18:00:00Z): DgxSparkServingDown "
            "summary (runbook: docs/monitoring.md#dgxsparkservingdown)") in text


def test_the_text_shows_each_figure_in_its_unit() -> None:
    lines = live_status_lines(live_status(answers(), alerts(), GROUPS, URL))
    block = lines[lines.index("group a (head spark1)"):][:7]
    assert block == ["group a (head spark1)", "  requests/s     3.20", "  tokens/s       409.6",
                     "  TTFT p50/p99   21.0 ms / 90.0 ms", "  KV cache       42.0 %", "  restarts (1 h) 2",
                     "  alerts         none firing"]
    assert "  TTFT p50/p99   - (no request in the last minute)" in lines


def test_monitoring_off_gives_no_figures_and_says_so() -> None:
    document = live_status([], None, GROUPS, URL, enabled=False)
    assert document["groups"] == [] and document["prometheus"]["answered"] is False
    assert live_status_lines(document) == ["live figures: none (monitoring is off (monitoring_enabled: false))"]


@pytest.mark.parametrize("failed, reason", [
    ({"status": -1, "msg": "Status code was -1: Connection refused"}, "HTTP -1: Status code was -1: Connection refused"),
    ({"unreachable": True, "msg": "ssh: timed out"}, "the head is unreachable (ssh: timed out)"),
    ({"status": 400, "json": {"status": "error", "error": "parse error"}}, "HTTP 400: parse error"),
])
def test_prometheus_unreachable_or_failing_gives_no_figures(failed: dict[str, Any], reason: str) -> None:
    broken = [{**a, **failed} if a["item"]["key"] == "up" else a for a in answers()]
    for answer in broken:
        if answer["item"]["key"] == "up" and "json" not in failed:
            answer.pop("json")
    document = live_status(broken, alerts(), GROUPS, URL)
    assert document["prometheus"]["error"] == reason and document["groups"] == []
    assert live_status_lines(document) == [f"live figures: none ({reason}; Prometheus at {URL} on the head)"]


def test_alerts_that_fail_leave_the_figures_and_say_so() -> None:
    document = live_status(answers(), {"status": 503, "msg": "unavailable"}, GROUPS, URL)
    assert row(document, "a")["requests_per_s"] == 3.2 and document["alerts"] == []
    assert live_status_lines(document)[-1] == "note: alerts: HTTP 503: unavailable"


def test_the_document_is_plain_json() -> None:
    document = live_status(answers(), alerts(alert("DgxSparkGuardStale", node="spark1")), GROUPS, URL)
    assert json.loads(json.dumps(document)) == document


@pytest.mark.parametrize("groups", [[{"name": "a"}], ["a"]])
def test_groups_without_a_head_are_refused(groups: Any) -> None:
    with pytest.raises(AnsibleFilterError, match="each serving group must be a mapping with name and head"):
        live_status(answers(), alerts(), groups, URL)


def test_the_lines_want_the_document() -> None:
    with pytest.raises(AnsibleFilterError, match="live_status's document"):
        live_status_lines({"groups": []})
