"""playbooks/preflight.yml for four Sparks as two replicas of tensor parallel 2
(dgx_spark_replicas), through Ansible with recorded facts: the four-node inventory of
test_preflight_four_nodes (the example inventory plus spark3 and spark4).

The example 2 x 2 inventory passes; a group whose size does not match the layout, a node in two
groups, a group without a head and the replicas' port on the API port are refused before
anything changes, naming the host or group, the variable and the fix. Every other refusal of the
replicas' filter is checked, message by message, on the filter itself
(tests/unit/plugins/filter/test_replica_errors.py): through Ansible, each case costs a whole
preflight run.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.ansible_run import REPO, flat_output
from support.example_inventory import FABRIC, facts_of, run_four_node_preflight, run_locally

A = {"name": "a", "head": "spark1", "nodes": ["spark1", "spark2"]}
B = {"name": "b", "head": "spark3", "nodes": ["spark3", "spark4"]}


def replicas(groups: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """Extra vars: the mp executor, tensor parallel 2 per group, and these groups."""
    return {"dgx_spark_executor": "mp", "vllm_serve_tensor_parallel_size": 2,
            "vllm_serve_pipeline_parallel_size": 1, "dgx_spark_replicas": groups, **extra}


def test_the_example_replica_inventory_passes(tmp_path: Path) -> None:
    """inventories/sparks-replicas as it is, run locally from the recorded facts."""
    proc = run_locally(tmp_path, REPO / "playbooks/preflight.yml", {host: facts_of(host) for host in FABRIC},
                       inventory="inventories/sparks-replicas")
    output = flat_output(proc)
    assert proc.returncode == 0, output[-4000:]
    for host in FABRIC:
        assert f"{host} : ok=" in output, output[-2000:]
    assert "changed=0" in output and "failed=0" in output


@pytest.mark.parametrize("case, extra, expected", [
    ("a group whose size does not match the layout",
     replicas([A, B], vllm_serve_tensor_parallel_size=4),
     ["dgx_spark_replicas group 'a' has 2 node(s) (spark1, spark2)",
      "vllm_serve_tensor_parallel_size 4 x vllm_serve_pipeline_parallel_size 1 / dgx_spark_gpus_per_node 1 = 4",
      "give every group 4 node(s), or change the layout in group_vars/sparks"]),
    ("a node in two groups",
     replicas([A, {"name": "b", "head": "spark3", "nodes": ["spark3", "spark2"]}]),
     ["Host spark2 is in more than one dgx_spark_replicas group (a, b)", "remove it from all but one",
      "Host spark4 is in no dgx_spark_replicas group"]),
    ("a group without a head",
     replicas([A, {"name": "b", "nodes": ["spark3", "spark4"]}]),
     # The argument spec's rule (a group's head is required), checked before the replicas' filter.
     ["[spark1]", "missing required arguments: head found in dgx_spark_replicas"]),
    ("the replicas' internal API port on the API port",
     replicas([A, B], dgx_spark_engine_api_port=8000),
     ["The cluster's ports must be distinct TCP ports", "\"dgx_spark_engine_api_port\": 8000"]),
])
def test_bad_replicas_are_refused_naming_host_variable_and_fix(
        tmp_path: Path, case: str, extra: dict[str, Any], expected: list[str]) -> None:
    rc, output = run_four_node_preflight(tmp_path, extra)
    assert rc != 0, f"{case}: preflight passed"
    assert "changed=1" not in output, f"{case}: something changed"
    for needle in expected:
        assert needle in output, f"{case}: {needle!r} not in output:\n{output[-3000:]}"
