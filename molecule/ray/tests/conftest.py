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

# test_ray_wrong_address last: it breaks the Ray layer on purpose, and only its own last test heals
# it (site.yml); test_sources reads what converge left, and wants a serving cluster.
ORDER = [
    "test_check_mode",
    "test_endpoint",
    "test_lan_exposure",
    "test_preflight_rejects",
    "test_ray_cluster",
    "test_ray_executor",
    "test_ray_from_head",
    "test_sources",
    "test_ray_wrong_address",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items[:] = in_order(items, ORDER)
