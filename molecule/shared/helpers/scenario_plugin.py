"""The pytest hooks and fixture every scenario's tests share. Each tests/conftest.py puts this
folder on sys.path and imports them into its own namespace with ``*``, where pytest finds them
(pytest refuses pytest_plugins in a conftest below the top level); the order its test modules
run in is its tests/order.txt (ordering.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

# tests/support: ansible_run, the runner playbook_run adapts (the same command line as tests/).
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "support"))

import cluster_health  # noqa: E402  (this folder is on sys.path: the conftest put it there)
from ordering import declared_order, in_order  # noqa: E402

__all__ = ["fail_at_once_on_a_broken_cluster", "pytest_collection_modifyitems", "pytest_configure",
           "pytest_runtest_makereport"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "gate: run by the CI gate against the two-node sandbox "
        "(MOLECULE_SCENARIO_NAME=sandbox pytest -m gate molecule/mp/tests)")


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    """Record the first test that found the cluster broken (it raised ClusterBroken)."""
    if call.excinfo is not None and call.excinfo.errisinstance(cluster_health.ClusterBroken):
        cluster_health.mark_broken(call.excinfo.value.reason, item.name)


@pytest.fixture(autouse=True)
def fail_at_once_on_a_broken_cluster() -> None:
    """Once a test found the cluster broken, every later test fails at once with that reason,
    until something heals it (test_self_healing's module fixture runs site.yml): against a broken
    cluster each would only sit out its own deadlines. Function-scoped, it is set up after a
    module's own module-scoped fixtures, so a healing fixture's teardown still runs."""
    found = cluster_health.broken()
    if found is not None:
        pytest.fail(found, pytrace=False)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The scenario's test modules in the order its tests/order.txt lists (the folder of the
    first item collected: the scenario's tests/)."""
    if items:
        items[:] = in_order(items, declared_order(items[0].path.parent))
