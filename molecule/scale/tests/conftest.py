"""Make the shared test helpers importable: molecule/shared/files (the cluster helpers and the
playbook_run adapter) and tests/support (ansible_run, the runner that adapter uses); run this
scenario's test modules in ORDER (molecule/shared/files/ordering.py); once a test found the
cluster broken, fail the tests after it at once; and know the CI gate's marker, gate
(molecule/shared/files/scenario_plugin.py)."""
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
for helpers in (REPO / "tests" / "support", REPO / "molecule" / "shared" / "files"):
    sys.path.insert(0, str(helpers))

from ordering import in_order  # noqa: E402  (importable from the path above)
from scenario_plugin import (  # noqa: E402,F401 (pytest finds them here)  # pylint: disable=unused-import
    fail_at_once_on_a_broken_cluster,
    pytest_configure,
    pytest_runtest_makereport,
)

# The layouts in turn: tensor parallel 4 as converge left it (test_distribution, test_endpoint,
# test_four_nodes), then 2 x pipeline 2 (test_layouts), then two replicas (test_replicas, last:
# it leaves the cluster on them).
ORDER = [
    "test_distribution",
    "test_endpoint",
    "test_four_nodes",
    "test_layouts",
    "test_replicas",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items[:] = in_order(items, ORDER)
