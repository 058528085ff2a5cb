"""Make the collection importable as ``ansible_collections.dgx_spark.vllm`` in unit tests.

The checkout is linked into ``.collections/ansible_collections/dgx_spark/vllm``; installing
Ansible's own collection loader on that path imports the plugin exactly as Ansible does,
so the unit tests and the Templar test exercise the same module.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
from ansible.plugins.loader import init_plugin_loader
from ansible.utils.collection_loader import AnsibleCollectionConfig

REPO_ROOT = pathlib.Path(__file__).resolve().parents[4]
COLLECTIONS_ROOT = REPO_ROOT / ".collections"
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"

if AnsibleCollectionConfig.collection_finder is None:
    init_plugin_loader([str(COLLECTIONS_ROOT)])


@pytest.fixture
def load_facts() -> Any:
    """Return a loader of a fresh copy of a fixture's ``ansible_facts`` (tests mutate them)."""

    def load(name: str) -> dict[str, Any]:
        return json.loads((FIXTURES / f"{name}.json").read_text())

    return load
