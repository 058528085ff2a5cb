"""What every kind of test under tests/ (unit, property, integration) needs before it imports.

tests/ goes on sys.path, so the shared helpers import as ``support.*`` from any test directory.
Ansible's collection loader is installed on .collections (which links back to the checkout), so
``ansible_collections.dgx_spark.vllm`` imports the plugin exactly as Ansible does: the unit
tests and the tests that go through Ansible exercise the same module.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from support.ansible_run import ensure_collection_loader  # noqa: E402  (needs the path above)
from support.facts import Facts, load_facts  # noqa: E402
from support.images import require_docker_images  # noqa: E402

ensure_collection_loader()


@pytest.fixture
def sparks() -> tuple[Facts, Facts]:
    """The deployment: spark1 LAN 10.1.230.180 (default route) and spark2 LAN 10.1.231.44
    (default route), fabric 192.168.200.12/13 on enp1s0f0np0, docker0 on both."""
    return load_facts("spark1"), load_facts("spark2")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "images(*names, root=False): runs real containers of these test images "
        "(support/images.py); tools/test runs these once the images are built")


def pytest_runtest_setup(item: pytest.Item) -> None:
    marker = item.get_closest_marker("images")
    if marker is not None:
        require_docker_images(*marker.args, **marker.kwargs)
