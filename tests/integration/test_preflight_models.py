"""playbooks/preflight.yml with several models behind the one endpoint (dgx_spark_models), through
Ansible with the two Sparks' recorded facts (run locally, nothing changes anywhere).

Two models, a big one over both nodes and a small one beside it, pass; memory over-committed on
a node and two ports alike on one node are refused before anything changes, naming the host,
the models, the numbers and the fix. Every other refusal is checked message by message on the
filter itself (tests/unit/plugins/filter/test_model_errors.py): through Ansible each case costs a
whole preflight run.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.example_inventory import run_preflight

BIG = {"name": "big", "model": "org/big", "nodes": ["spark1", "spark2"], "tensor_parallel_size": 2,
       "gpu_memory_utilization": 0.6, "api_port": 8001, "master_port": 29501, "guard_port": 29601}
SMALL = {"name": "small", "model": "org/small", "nodes": ["spark2"], "gpu_memory_utilization": 0.25,
         "api_port": 8002, "guard_port": 29602}


def models(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"dgx_spark_executor": "mp", "dgx_spark_models": list(entries)}


def test_a_big_model_over_both_nodes_and_a_small_one_beside_it_pass(tmp_path: Path) -> None:
    rc, output = run_preflight(tmp_path, extra=models(BIG, SMALL))
    assert rc == 0, output[-4000:]
    assert "changed=0" in output and "failed=0" in output


@pytest.mark.parametrize("case, entries, expected", [
    ("memory over-committed on a node", (BIG, {**SMALL, "gpu_memory_utilization": 0.4}),
     ["Host spark2: the models on it take 1.00 of its memory ('big' 0.6 + 'small' 0.4)", "over the 0.9",
      "lower their gpu_memory_utilization in dgx_spark_models"]),
    ("two ports alike on one node", (BIG, {**SMALL, "nodes": ["spark1"], "api_port": 8001}),
     ["Host spark1: dgx_spark_models model 'small' api_port and dgx_spark_models model 'big' api_port are both 8001",
      "give each its own port in group_vars/sparks"]),
    ("the front's port", (BIG, {**SMALL, "api_port": 8000}),
     ["Host spark2: dgx_spark_models model 'small' api_port 8000 is the cluster's dgx_spark_api_port"]),
])
def test_bad_models_are_refused_naming_host_models_numbers_and_fix(
        tmp_path: Path, case: str, entries: tuple[dict[str, Any], ...], expected: list[str]) -> None:
    rc, output = run_preflight(tmp_path, extra=models(*entries))
    assert rc != 0, f"{case}: preflight passed"
    assert "changed=1" not in output, f"{case}: something changed"
    for needle in expected:
        assert needle in output, f"{case}: {needle!r} not in output:\n{output[-3000:]}"
