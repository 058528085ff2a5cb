"""Every metric the dashboard's queries and the alert rules use exists in a live scrape of the
cluster: Prometheus on the head knows its name. A name misspelt, or one an exporter does not
have (a vLLM or node exporter version that renamed it), is no error to Prometheus or Grafana,
only an empty panel or an alert that never fires. The names come from the files the collection
ships (tests/support/promql_names.py); the unit tests check the same names against what the
collection promises. Shared by the scenarios (each links this file into its tests/)."""
from __future__ import annotations

import time

import prometheus
from nodes import HEAD
from promql_names import used_metric_names

# Names that exist only after an event the scenario may not have had: each with that event.
EXEMPT = {
    # The guard writes it at its first failure (a probe failing, a restart it asked for).
    "dgx_spark_guard_last_failure_timestamp_seconds": "written only after a guard saw a failure",
}
# Targets come up within a minute of site.yml (issue 28); the files written at a node's first
# check reach Prometheus at its next scrape.
WAIT_S = 90


def known_names() -> set[str]:
    """The metric names Prometheus on the head holds (loopback only: asked on the head)."""
    return set(prometheus.api("/api/v1/label/__name__/values"))


def test_every_metric_of_the_dashboard_and_the_rules_is_scraped() -> None:
    used = used_metric_names()
    assert "up" in used and len(used) > 10, sorted(used)  # the files were read
    wanted = {name: where for name, where in used.items() if name not in EXEMPT}
    deadline = time.monotonic() + WAIT_S
    while True:
        missing = {name: sorted(where) for name, where in wanted.items() if name not in known_names()}
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(10)
    assert missing == {}, f"used by the dashboard or the rules, but in no scrape of {HEAD}'s Prometheus " \
                          f"(name: where used): {missing}"


def test_the_exempt_names_are_still_used() -> None:
    """An exemption for a name nothing uses any more would hide nothing, but would rot."""
    assert set(EXEMPT) <= set(used_metric_names())
