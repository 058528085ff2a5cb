"""Filters ``live_status_queries``, ``live_status`` and ``live_status_lines``: the live figures of
playbooks/status.yml, per serving group, from Prometheus on the head.

``live_status_queries`` gives the PromQL of each figure (one home for the queries and for how
their answers are read); the playbook asks Prometheus' ``/api/v1/query`` for each, and
``/api/v1/alerts``; ``live_status`` turns those answers into one document (what
``-e status_format=json`` prints); ``live_status_lines`` renders it for a terminal, one block per
group. The rules are documented in the sidecar ``live_status.yml``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

# Figure -> (PromQL, the label its series are keyed by). {unit}: the serving unit, whose guard
# counts the engine's starts. Rates over the last minute; vLLM's series are those of job vllm,
# labelled group (replica name, or main) and node (the group head) by the scrape config.
QUERIES: dict[str, tuple[str, str]] = {
    "up": ('up{job="vllm"}', "group"),
    "requests_per_s": ('sum by (group) (rate(vllm:request_success_total{job="vllm"}[1m]))', "group"),
    "tokens_per_s": ('sum by (group) (rate(vllm:generation_tokens_total{job="vllm"}[1m]))', "group"),
    "ttft_p50_s": ('histogram_quantile(0.5, sum by (group, le) '
                   '(rate(vllm:time_to_first_token_seconds_bucket{job="vllm"}[1m])))', "group"),
    "ttft_p99_s": ('histogram_quantile(0.99, sum by (group, le) '
                   '(rate(vllm:time_to_first_token_seconds_bucket{job="vllm"}[1m])))', "group"),
    "kv_cache_usage": ('max by (group) (vllm:kv_cache_usage_perc{job="vllm"})', "group"),
    # On the group head's node (label node), whose guard runs the group's engine (role head).
    "restarts_1h": ('sum by (node) (increase(dgx_spark_guard_engine_starts_total{{unit="{unit}",role="head"}}[1h]))',
                    "node"),
}
# No series means no traffic (or no request yet since the engine started): 0, not unknown.
ZERO_WITHOUT_DATA = ("requests_per_s", "tokens_per_s", "restarts_1h")
FIGURES = ("requests_per_s", "tokens_per_s", "ttft_p50_s", "ttft_p99_s", "kv_cache_usage", "restarts_1h")


def _fail(message: str) -> None:
    raise AnsibleFilterError("live_status: " + message)


def live_status_queries(unit: str) -> dict[str, str]:
    """Figure name -> PromQL, for the serving unit ``unit`` (dgx_spark_serve_unit)."""
    if not isinstance(unit, str) or not unit:
        _fail(f"the serving unit must be a non-empty string (dgx_spark_serve_unit), got {unit!r}")
    return {name: query.format(unit=unit) if name == "restarts_1h" else query for name, (query, _key) in QUERIES.items()}


def _number(text: Any) -> float | None:
    """Prometheus' sample value (a string); None for NaN (a quantile of no observations) or junk."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) or math.isinf(value) else value


def _answer_error(answer: Mapping[str, Any]) -> str | None:
    """Why one uri result holds no Prometheus answer, or None when it holds one."""
    if answer.get("unreachable"):
        return f"the head is unreachable ({answer.get('msg', '')})".replace(" ()", "")
    body = answer.get("json")
    if answer.get("status") != 200 or not isinstance(body, Mapping) or body.get("status") != "success":
        detail = (body or {}).get("error") if isinstance(body, Mapping) else None
        return f"HTTP {answer.get('status', '?')}: {detail or answer.get('msg') or 'no answer'}"
    return None


def _series(answer: Mapping[str, Any], key: str) -> dict[str, float | None]:
    """An instant vector's samples keyed by one label."""
    found: dict[str, float | None] = {}
    for sample in answer["json"].get("data", {}).get("result", []) or []:
        label = (sample.get("metric") or {}).get(key)
        if label is not None:
            found[str(label)] = _number((sample.get("value") or [None, None])[1])
    return found


def _by_name(answers: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The uri loop's results keyed by figure name (each result's item is {key: name, value: query})."""
    named = {}
    for answer in answers or []:
        item = answer.get("item") if isinstance(answer, Mapping) else None
        if isinstance(item, Mapping) and item.get("key") in QUERIES:
            named[str(item["key"])] = answer
    return named


def _firing(alerts_answer: Mapping[str, Any] | None) -> tuple[list[dict[str, Any]], str | None]:
    if not alerts_answer:
        return [], "not asked"
    error = _answer_error(alerts_answer)
    if error:
        return [], error
    firing = []
    for alert in alerts_answer["json"].get("data", {}).get("alerts", []) or []:
        if alert.get("state") != "firing":
            continue
        labels = dict(alert.get("labels") or {})
        annotations = alert.get("annotations") or {}
        firing.append({"name": labels.get("alertname", "?"), "severity": labels.get("severity", ""),
                       "group": labels.get("group"), "node": labels.get("node"),
                       "summary": annotations.get("summary", ""), "runbook": annotations.get("runbook", ""),
                       "since": alert.get("activeAt", "")})
    return sorted(firing, key=lambda a: (a["name"], a["group"] or "", a["node"] or "")), None


def _group_heads(groups: Any) -> dict[str, str]:
    """Group name -> its head node, from the inventory's groups ([{name, head, ...}])."""
    heads = {}
    for group in groups or []:
        if not isinstance(group, Mapping) or not group.get("name") or not group.get("head"):
            _fail(f"each serving group must be a mapping with name and head, got {group!r}")
        heads[str(group["name"])] = str(group["head"])
    return heads


def live_status(answers: Sequence[Mapping[str, Any]], alerts: Mapping[str, Any] | None, groups: Any,
                url: str = "", enabled: bool = True) -> dict[str, Any]:
    """The live figures per group, the firing alerts and whether Prometheus answered (see live_status.yml)."""
    heads = _group_heads(groups)
    document: dict[str, Any] = {"prometheus": {"enabled": bool(enabled), "url": url, "answered": False,
                                               "error": None},
                                "groups": [], "alerts": []}
    if not enabled:
        document["prometheus"]["error"] = "monitoring is off (monitoring_enabled: false)"
        return document
    named = _by_name(answers)
    errors = [e for e in (_answer_error(named[n]) if n in named else "not asked" for n in QUERIES) if e]
    if errors:
        document["prometheus"]["error"] = errors[0]
        return document
    document["prometheus"]["answered"] = True
    figures = {name: _series(named[name], key) for name, (_query, key) in QUERIES.items()}
    # A group is what the inventory serves, and any other that Prometheus scrapes (a stale target).
    for name in list(heads) + sorted(set(figures["up"]) - set(heads)):
        row: dict[str, Any] = {"group": name, "head": heads.get(name), "scraped": figures["up"].get(name) == 1.0}
        for figure in FIGURES:
            key = heads.get(name) if QUERIES[figure][1] == "node" else name
            value = figures[figure].get(key) if key is not None else None
            row[figure] = 0.0 if value is None and figure in ZERO_WITHOUT_DATA else value
        row["restarts_1h"] = round(row["restarts_1h"]) if row["restarts_1h"] is not None else None
        document["groups"].append(row)
    document["alerts"], alerts_error = _firing(alerts)
    if alerts_error:
        document["prometheus"]["error"] = f"alerts: {alerts_error}"
    for row in document["groups"]:
        row["alerts"] = [a["name"] for a in document["alerts"]
                         if a["group"] == row["group"] or (a["group"] is None and row["head"] is not None
                                                           and a["node"] == row["head"])]
    return document


def _fmt(value: float | None, scale: float, unit: str, missing: str) -> str:
    return missing if value is None else f"{value * scale:.1f}{unit}"


def live_status_lines(document: Mapping[str, Any]) -> list[str]:
    """The document of live_status for a terminal: one block per group, then every firing alert."""
    if not isinstance(document, Mapping) or "prometheus" not in document:
        _fail(f"the input must be live_status's document, got {type(document).__name__}")
    prometheus = document["prometheus"]
    if not prometheus.get("answered"):
        return [f"live figures: none ({prometheus.get('error') or 'no answer'}"
                + (f"; Prometheus at {prometheus['url']} on the head" if prometheus.get("enabled") else "") + ")"]
    lines = [f"live figures (Prometheus {prometheus.get('url', '')}, last minute):"]
    for row in document["groups"]:
        lines += [f"group {row['group']}" + (f" (head {row['head']})" if row.get("head") else " (not in the inventory)")
                  + ("" if row["scraped"] else ": its vLLM target is DOWN or not scraped"),
                  f"  requests/s     {row['requests_per_s']:.2f}",
                  f"  tokens/s       {row['tokens_per_s']:.1f}",
                  "  TTFT p50/p99   " + (f"{_fmt(row['ttft_p50_s'], 1000, ' ms', '-')} / "
                                         f"{_fmt(row['ttft_p99_s'], 1000, ' ms', '-')}"
                                         if row["ttft_p50_s"] is not None else "- (no request in the last minute)"),
                  f"  KV cache       {_fmt(row['kv_cache_usage'], 100, ' %', 'unknown (no sample)')}",
                  f"  restarts (1 h) {row['restarts_1h'] if row['restarts_1h'] is not None else 'unknown'}",
                  f"  alerts         {', '.join(row['alerts']) or 'none firing'}"]
    alerts = document.get("alerts") or []
    lines.append(f"firing alerts: {len(alerts) or 'none'}")
    lines += [f"  {a['name']} ({a['severity'] or 'no severity'}"
              + "".join(f", {k} {a[k]}" for k in ("group", "node") if a.get(k)) + f", since {a['since']}): "
              f"{a['summary']}" + (f" (runbook: {a['runbook']})" if a["runbook"] else "") for a in alerts]
    if prometheus.get("error"):
        lines.append(f"note: {prometheus['error']}")
    return lines


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {"live_status_queries": live_status_queries, "live_status": live_status,
                "live_status_lines": live_status_lines}
