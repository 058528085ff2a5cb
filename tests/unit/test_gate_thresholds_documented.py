"""The fabric gate's expected figures in the README and the docs are the ones the code uses
(roles/ib_network/defaults/main.yml), in the unit it reports (GB/s)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEFAULTS = yaml.safe_load((REPO / "roles/ib_network/defaults/main.yml").read_text())
DOCS = ["README.md", "docs/bench-and-gate.md", "roles/ib_network/README.md"]


@pytest.mark.parametrize("doc", DOCS)
def test_two_node_and_ring_thresholds_in_the_docs_match_the_defaults(doc: str) -> None:
    text = " ".join((REPO / doc).read_text().split())
    assert f"{DEFAULTS['ib_network_bandwidth_min_busbw_two_nodes']:g} GB/s" in text
    assert f"{DEFAULTS['ib_network_bandwidth_min_busbw_ring']:g} GB/s" in text


@pytest.mark.parametrize("doc", DOCS[1:])
def test_the_cpu_threshold_in_the_docs_matches_the_default(doc: str) -> None:
    text = " ".join((REPO / doc).read_text().split())
    assert f"{DEFAULTS['ib_network_bandwidth_min_busbw_cpu']:g} GB/s" in text


def test_the_defaults_are_the_figures_of_record() -> None:
    assert (DEFAULTS["ib_network_bandwidth_min_busbw_two_nodes"], DEFAULTS["ib_network_bandwidth_min_busbw_ring"]) \
        == (21.875, 10.0)
