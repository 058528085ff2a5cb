"""The metric-name finder the monitoring's name checks rely on (tests/support/promql_names.py):
it finds every metric of an expression, whatever wraps it, and nothing else."""
from __future__ import annotations

import pytest

from support.promql_names import UnknownFunction, metric_names, template_query_expr


@pytest.mark.parametrize(("expr", "names"), [
    ("up == 0", {"up"}),
    ('rate(vllm:request_success_total{group=~"$group", model_name!="x"}[$__rate_interval])',
     {"vllm:request_success_total"}),
    ('histogram_quantile(0.99, sum by (group, le) (rate(vllm:time_to_first_token_seconds_bucket{le!="+Inf"}[5m])))',
     {"vllm:time_to_first_token_seconds_bucket"}),
    ("node_network_mtu_bytes != on (instance, device) group_left (node) dgx_spark_fabric_expected_mtu_bytes",
     {"node_network_mtu_bytes", "dgx_spark_fabric_expected_mtu_bytes"}),
    ("a_metric unless on(instance) (b_metric == 1) or ignoring(job) c_metric * 1e3 + 0.10",
     {"a_metric", "b_metric", "c_metric"}),
    ("time() - last_write_seconds offset 5m > 180", {"last_write_seconds"}),
    ("sum(x_total) without (le) / count by (node) (y_total) and bool_ish_metric", {"x_total", "y_total", "bool_ish_metric"}),
    ("max_over_time(deriv(q[5m])[10m:1m]) > 0", {"q"}),
    ('label_replace(m_10, "a", "$1", "b", "(.*)")', {"m_10"}),
])
def test_finds_the_metrics_and_only_them(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_a_misspelt_function_is_an_error_not_a_metric() -> None:
    with pytest.raises(UnknownFunction, match=r"rat\(\.\.\.\)"):
        metric_names("rat(up[5m])")


@pytest.mark.parametrize(("query", "expr"), [
    ('label_values(up{job="vllm"}, group)', 'up{job="vllm"}'),
    ("label_values(node)", None),
    ("query_result(topk(3, foo_total))", "topk(3, foo_total)"),
    ("bar_total", "bar_total"),
])
def test_a_template_variable_s_query_gives_its_promql(query: str, expr: str | None) -> None:
    assert template_query_expr(query) == expr
