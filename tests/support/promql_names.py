"""The metric names the monitoring's PromQL uses: its alert rules' expressions and its Grafana
dashboard's queries (roles/monitoring/files). The unit tests check them against the metrics the
collection promises; the cluster test (molecule/shared/tests/test_dashboard_metrics.py) against a
live scrape. A name misspelt in a query is no error to Prometheus or Grafana, only an empty panel
or an alert that never fires, so this is what finds it.

Not a PromQL parser: the expression less its string literals, label matchers ``{...}``, ranges
``[...]``, label lists (``by (...)``, ``on (...)``, ...), numbers and Grafana's ``$variables``
leaves identifiers, each a function or aggregation (followed by ``(``), a keyword, or a metric.
An identifier followed by ``(`` that is no PromQL function is an error, not a metric: a misspelt
function is found too.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "roles" / "monitoring" / "files" / "dgx-spark-vllm.rules.yml"
DASHBOARD = REPO / "roles" / "monitoring" / "files" / "dgx-spark-vllm-dashboard.json"

AGGREGATIONS = frozenset({
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
    "quantile"})
FUNCTIONS = frozenset({
    "abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min", "day_of_month",
    "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "exp", "floor", "histogram_count",
    "histogram_sum", "histogram_fraction", "histogram_quantile", "holt_winters", "hour", "idelta", "increase",
    "irate", "label_join", "label_replace", "ln", "log2", "log10", "minute", "month", "predict_linear", "rate",
    "resets", "round", "scalar", "sgn", "sort", "sort_desc", "sqrt", "time", "timestamp", "vector", "year",
    "avg_over_time", "min_over_time", "max_over_time", "sum_over_time", "count_over_time", "quantile_over_time",
    "stddev_over_time", "stdvar_over_time", "last_over_time", "present_over_time", "acos", "acosh", "asin",
    "asinh", "atan", "atanh", "cos", "cosh", "sin", "sinh", "tan", "tanh", "deg", "rad", "pi"})
KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "inf", "nan", "atan2"})
# Followed by a list of label names, not of expressions.
LABEL_LISTS = ("by", "without", "on", "ignoring", "group_left", "group_right")

STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
MATCHERS = re.compile(r"\{[^{}]*\}")
RANGES = re.compile(r"\[[^\[\]]*\]")
LABEL_LIST = re.compile(r"\b(?:%s)\s*\([^()]*\)" % "|".join(LABEL_LISTS))
BARE_LABEL_LIST = re.compile(r"\b(?:group_left|group_right)\b")
VARIABLES = re.compile(r"\$\{[^}]*\}|\$\w+")
OFFSETS = re.compile(r"\boffset\s+-?\w+|@\s*[\w.()]+")
NUMBERS = re.compile(r"(?<![\w:])(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)(?![\w:])")
IDENTIFIER = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# Grafana's template query: label_values(<series selector>, <label>), or label_values(<label>).
LABEL_VALUES = re.compile(r"^\s*label_values\((?:(.*),)?\s*\w+\s*\)\s*$", re.DOTALL)


class UnknownFunction(ValueError):
    """An identifier called like a function that PromQL does not have."""


def _stripped(expr: str) -> str:
    """The expression less everything that holds no metric name."""
    text = STRINGS.sub(" ", expr)
    text = VARIABLES.sub(" ", text)
    # Nested label matchers do not exist; ranges nest only as subqueries ([5m:1m] holds none).
    text = MATCHERS.sub(" ", text)
    text = RANGES.sub(" ", text)
    text = LABEL_LIST.sub(" ", text)
    text = BARE_LABEL_LIST.sub(" ", text)
    text = OFFSETS.sub(" ", text)
    return NUMBERS.sub(" ", text)


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` (PromQL) selects."""
    text = _stripped(expr)
    names: set[str] = set()
    for match in IDENTIFIER.finditer(text):
        word = match.group()
        if word in KEYWORDS or word in AGGREGATIONS:
            continue
        if text[match.end():].lstrip().startswith("("):
            if word not in FUNCTIONS:
                raise UnknownFunction(f"{word}(...) is no PromQL function, in: {expr}")
        else:
            names.add(word)
    return names


def template_query_expr(query: str) -> str | None:
    """The PromQL of a Grafana template variable's query: label_values' selector (None for
    label_values(label): no metric), else the query itself (a query_result's or a plain one)."""
    match = LABEL_VALUES.match(query)
    if match:
        return match.group(1)
    result = re.match(r"^\s*query_result\((.*)\)\s*$", query, re.DOTALL)
    return result.group(1) if result else query


def rule_expressions(path: Path = RULES) -> dict[str, str]:
    """Each alert's (or recording rule's) name -> its expression."""
    groups = yaml.safe_load(path.read_text())["groups"]
    return {rule.get("alert") or rule["record"]: rule["expr"] for group in groups for rule in group["rules"]}


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))  # a collapsed row holds its panels


def dashboard_expressions(path: Path = DASHBOARD) -> dict[str, str]:
    """Each query of the dashboard, named by its panel's title and refId (or its variable's
    name) -> its PromQL."""
    model = json.loads(path.read_text())
    exprs: dict[str, str] = {}
    for panel in _panels(model.get("panels", [])):
        for target in panel.get("targets", []):
            if target.get("expr"):
                exprs[f"panel {panel.get('title')!r} {target.get('refId', '')}"] = target["expr"]
    for variable in model.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            query = variable.get("query")
            query = query.get("query") if isinstance(query, dict) else query
            expr = template_query_expr(query or "")
            if expr:
                exprs[f"variable {variable['name']}"] = expr
    return exprs


def used_metric_names() -> dict[str, set[str]]:
    """Each metric name the rules and the dashboard use -> where (alert, panel or variable)."""
    used: dict[str, set[str]] = {}
    for where, expr in {**rule_expressions(), **dashboard_expressions()}.items():
        for name in metric_names(expr):
            used.setdefault(name, set()).add(where)
    return used
