"""The replica_errors filter: a valid replica inventory gives no errors; each way it can be wrong
gives one message naming the host or group, the variable and the fix."""
from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.dgx_spark.vllm.plugins.filter.replica_errors import replica_errors

HOSTS = ["spark1", "spark2", "spark3", "spark4"]
TWO_BY_TWO = [{"name": "a", "head": "spark1", "nodes": ["spark1", "spark2"]},
              {"name": "b", "head": "spark3", "nodes": ["spark3", "spark4"]}]


def errors(replicas: Any, tensor: Any = 2, pipeline: Any = 1, gpus: Any = 1, executor: str = "mp",
           hosts: list[str] | None = None, head: str = "spark1") -> list[str]:
    return replica_errors(replicas, hosts if hosts is not None else HOSTS, head, tensor, pipeline, gpus, executor)


@pytest.mark.parametrize("replicas", [None, [], ""])
def test_no_replicas_is_one_group_of_every_node(replicas: Any) -> None:
    assert errors(replicas, tensor=4, executor="ray") == []


def test_two_replicas_of_two_nodes_pass() -> None:
    assert errors(TWO_BY_TWO) == []


def test_layout_values_may_be_strings_as_ansible_renders_them() -> None:
    assert errors(TWO_BY_TWO, tensor="2", pipeline="1", gpus="1") == []


def test_pipeline_parallel_counts_towards_the_group_size() -> None:
    assert errors([{"name": "all", "head": "spark1", "nodes": HOSTS}], tensor=2, pipeline=2) == []


def test_four_single_node_replicas_pass() -> None:
    assert errors([{"name": f"r{n}", "head": h, "nodes": [h]} for n, h in enumerate(HOSTS)], tensor=1) == []


def test_the_head_may_be_listed_anywhere_in_its_group() -> None:
    replicas = [{"name": "a", "head": "spark1", "nodes": ["spark2", "spark1"]}, TWO_BY_TWO[1]]
    assert errors(replicas) == []


def only(found: list[str]) -> str:
    assert len(found) == 1, found
    return found[0]


def test_a_group_whose_size_does_not_match_the_layout_names_group_nodes_and_layout() -> None:
    message = errors(TWO_BY_TWO, tensor=4)[0]
    assert "dgx_spark_replicas group 'a' has 2 node(s) (spark1, spark2)" in message
    assert ("vllm_serve_tensor_parallel_size 4 x vllm_serve_pipeline_parallel_size 1 / dgx_spark_gpus_per_node 1 "
            "= 4 node(s) per group") in message
    assert "give every group 4 node(s), or change the layout in group_vars/sparks" in message


def test_every_group_of_the_wrong_size_is_named() -> None:
    found = errors(TWO_BY_TWO, tensor=1)
    assert len(found) == 2 and "group 'a'" in found[0] and "group 'b'" in found[1]


def test_a_node_in_two_groups() -> None:
    replicas = [{"name": "a", "head": "spark1", "nodes": ["spark1", "spark2"]},
                {"name": "b", "head": "spark3", "nodes": ["spark3", "spark2"]}]
    found = errors(replicas, hosts=["spark1", "spark2", "spark3"])
    message = only(found)
    assert "Host spark2 is in more than one dgx_spark_replicas group (a, b)" in message
    assert "remove it from all but one" in message


def test_a_group_without_a_head() -> None:
    replicas = [TWO_BY_TWO[0], {"name": "b", "nodes": ["spark3", "spark4"]}]
    message = only(errors(replicas))
    assert "dgx_spark_replicas group 'b' has no head: set head: to the one of its nodes (spark3, spark4)" in message


def test_a_head_that_is_not_among_its_nodes() -> None:
    replicas = [TWO_BY_TWO[0], {"name": "b", "head": "spark2", "nodes": ["spark3", "spark4"]}]
    message = only(errors(replicas))
    assert "Host spark2, head of dgx_spark_replicas group 'b', is not among its nodes (spark3, spark4)" in message


def test_a_node_in_no_group() -> None:
    found = errors([TWO_BY_TWO[0]])
    assert [m.split(" is in no", maxsplit=1)[0] for m in found] == ["Host spark3", "Host spark4"]


def test_a_name_that_is_not_an_inventory_host() -> None:
    replicas = [TWO_BY_TWO[0], {"name": "b", "head": "spark3", "nodes": ["spark3", "spark9"]}]
    found = errors(replicas)
    assert any("Host spark9 in dgx_spark_replicas group 'b' is not a host of the inventory group sparks" in m
               for m in found), found
    assert any("Host spark4 is in no dgx_spark_replicas group" in m for m in found), found


def test_two_groups_with_one_name() -> None:
    replicas = [TWO_BY_TWO[0], {**TWO_BY_TWO[1], "name": "a"}]
    message = only(errors(replicas))
    assert "dgx_spark_replicas has two groups named 'a' (entries 1 and 2)" in message


def test_the_cluster_head_must_head_a_group() -> None:
    replicas = [{"name": "a", "head": "spark2", "nodes": ["spark1", "spark2"]}, TWO_BY_TWO[1]]
    message = only(errors(replicas))
    assert "Host spark1 (spark_head, where the endpoint is) is the head of no dgx_spark_replicas group" in message
    assert "Make spark1 the head: of the group it is in" in message


def test_replicas_are_refused_with_ray() -> None:
    message = only(errors(TWO_BY_TWO, executor="ray"))
    assert "dgx_spark_replicas is set, but dgx_spark_executor is ray: replicas need the mp executor" in message
    assert "Set dgx_spark_executor: mp in group_vars/sparks" in message


def test_a_layout_that_is_not_whole_nodes() -> None:
    found = errors(TWO_BY_TWO, tensor=3, gpus=2)
    assert any("is not a whole number of nodes" in m for m in found), found


@pytest.mark.parametrize("replicas, needle", [
    ({"name": "a"}, "dgx_spark_replicas must be a list of groups"),
    (["spark1"], "dgx_spark_replicas entry 1 is not a mapping"),
    ([{"name": "a b", "head": "spark1", "nodes": ["spark1", "spark2"]}, TWO_BY_TWO[1]], "needs a name of letters"),
    ([{**TWO_BY_TWO[0], "port": 1}, TWO_BY_TWO[1]], "has keys port that mean nothing here"),
    ([{"name": "a", "head": "spark1", "nodes": "spark1"}, TWO_BY_TWO[1]], "needs nodes: a list of inventory hosts"),
    ([{"name": "a", "head": "spark1", "nodes": ["spark1", "spark1"]}, TWO_BY_TWO[1]], "lists a node twice"),
])
def test_malformed_replicas_are_refused(replicas: Any, needle: str) -> None:
    found = errors(replicas)
    assert any(needle in m for m in found), found
