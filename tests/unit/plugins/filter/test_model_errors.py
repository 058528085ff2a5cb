"""The model_errors filter: a valid list of models gives no errors; each way it can be wrong gives
one message naming the model or host, the variable, the numbers and the fix."""
from __future__ import annotations

import copy
from typing import Any

import pytest

from ansible_collections.dgx_spark.vllm.plugins.filter.model_errors import model_errors

HOSTS = ["spark1", "spark2"]
RESERVED = {"dgx_spark_api_port": 8000, "dgx_spark_guard_port": 29596}
# A big model over both nodes and a small one beside it on the second.
BIG_AND_SMALL = [
    {"name": "big", "model": "org/big", "nodes": ["spark1", "spark2"], "tensor_parallel_size": 2,
     "gpu_memory_utilization": 0.6, "api_port": 8001, "master_port": 29501, "guard_port": 29601},
    {"name": "small", "model": "/var/lib/dgx-spark-vllm/models/small", "nodes": ["spark2"],
     "gpu_memory_utilization": 0.25, "api_port": 8002, "guard_port": 29602, "extra_args": ["--max-num-seqs", "8"]},
]


def errors(models: Any, executor: str = "mp", gpus: Any = 1) -> list[str]:
    return model_errors(models, HOSTS, gpus, 0.9, RESERVED, executor)


def changed(index: int, **values: Any) -> list[dict[str, Any]]:
    models = copy.deepcopy(BIG_AND_SMALL)
    models[index].update(values)
    return models


def only_error(models: Any, *fragments: str) -> None:
    found = errors(models)
    assert len(found) == 1, found
    for fragment in fragments:
        assert fragment in found[0], found[0]


@pytest.mark.parametrize("models", [None, [], ""])
def test_no_models_is_the_one_model_of_vllm_serve_model(models: Any) -> None:
    assert errors(models, executor="ray") == []


def test_a_big_model_over_two_nodes_and_a_small_one_beside_it_pass() -> None:
    assert errors(BIG_AND_SMALL) == []


def test_numbers_may_be_strings_as_ansible_renders_them() -> None:
    assert errors(changed(0, tensor_parallel_size="2", gpu_memory_utilization="0.6", api_port="8001")) == []


def test_not_a_list_is_refused_with_the_fix() -> None:
    found = errors({"name": "big"})
    assert len(found) == 1 and "must be a list of models" in found[0] and "group_vars/sparks" in found[0]


def test_several_models_need_the_mp_executor() -> None:
    found = errors(BIG_AND_SMALL, executor="ray")
    assert len(found) == 1 and "dgx_spark_executor is ray" in found[0]


def test_memory_over_committed_on_a_node_names_host_models_and_numbers() -> None:
    only_error(changed(1, gpu_memory_utilization=0.4), "Host spark2", "1.00", "'big' 0.6 + 'small' 0.4", "0.9")


def test_same_port_twice_on_one_node_is_refused() -> None:
    models = changed(1, nodes=["spark1"], api_port=8001)
    only_error(models, "Host spark1", "'small' api_port", "'big' api_port", "8001")


def test_same_port_on_different_nodes_is_fine() -> None:
    assert errors(changed(1, api_port=8001)) == []


def test_a_cluster_port_is_refused_naming_its_variable() -> None:
    only_error(changed(1, api_port=8000), "Host spark2", "8000", "dgx_spark_api_port")


def test_a_multi_node_model_needs_its_own_master_port_and_a_single_node_one_does_not() -> None:
    models = changed(0)
    del models[0]["master_port"]
    only_error(models, "'big' needs master_port", "spark1")


@pytest.mark.parametrize("port", [80, 70000, "http", None, True])
def test_a_port_outside_the_unprivileged_range_is_refused(port: Any) -> None:
    only_error(changed(1, api_port=port), "'small' needs api_port", "1024 to 65535")


def test_the_layout_must_fill_the_models_nodes() -> None:
    only_error(changed(0, tensor_parallel_size=1), "'big' runs tensor 1 x pipeline 1 = 1 GPU(s)", "2 node(s)")


def test_unknown_host_is_refused() -> None:
    only_error(changed(1, nodes=["spark9"]), "Host spark9", "not a host of the inventory group sparks")


def test_head_must_be_one_of_the_nodes() -> None:
    only_error(changed(0, head="spark9"), "Host spark9, head of dgx_spark_models model 'big'")


@pytest.mark.parametrize("name", ["", "has space", "a/b", "-dash", None, "x" * 64])
def test_a_name_that_cannot_route_or_name_a_unit_is_refused(name: Any) -> None:
    only_error(changed(1, name=name), "needs a name of letters, digits")


def test_two_models_with_one_name_are_refused() -> None:
    only_error(changed(1, name="big"), "two models named 'big'")


def test_unknown_keys_are_refused() -> None:
    only_error(changed(1, replicas=2), "has keys replicas that mean nothing here")


@pytest.mark.parametrize("share", [0, 1.5, "half", None])
def test_a_memory_share_must_be_a_fraction(share: Any) -> None:
    only_error(changed(1, gpu_memory_utilization=share), "'small' needs gpu_memory_utilization")


def test_a_model_needs_weights() -> None:
    only_error(changed(1, model=""), "'small' needs model")


def test_extra_args_must_be_a_list_of_strings() -> None:
    only_error(changed(1, extra_args="--max-num-seqs 8"), "'small' extra_args must be a list of strings")


def test_every_model_needs_a_guard_port_on_its_head() -> None:
    models = changed(1)
    del models[1]["guard_port"]
    only_error(models, "'small' needs guard_port", "spark2")
