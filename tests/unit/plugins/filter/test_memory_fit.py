"""The memory_fit filter: a model that fits gives the numbers and no errors; one that cannot fit,
or a utilization that starves the OS, is refused naming the host, the numbers, the variables and
the fix."""
from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.dgx_spark.vllm.plugins.filter.memory_fit import memory_fit

# A GB10's MemTotal: 119.7 GiB.
GB10_KIB = round(119.7 * 1024 * 1024)


def gb10(utilization: Any = 0.8) -> dict[str, Any]:
    return {"mem_total_kib": GB10_KIB, "gpu": True, "utilization": utilization}


def test_the_seed_model_over_two_sparks_fits_with_the_numbers() -> None:
    fit = memory_fit({"spark1": gb10(), "spark2": gb10()}, 117.0, 2, 1, 1, 8)
    spark1 = fit["spark1"]
    assert spark1["errors"] == []
    assert (spark1["memory_gib"], spark1["weights_gib"], spark1["engine_gib"], spark1["kv_cache_gib"],
            spark1["limit_gib"]) == (119.7, 58.5, 95.8, 37.3, 111.7)
    assert "spark1: weights 58.5 GiB per node" in spark1["summary"]
    assert "vLLM takes 95.8 GiB (vllm_serve_gpu_memory_utilization 0.8 x MemTotal 119.7 GiB)" in spark1["summary"]


def test_a_model_too_large_for_its_nodes_is_refused_with_the_numbers_and_the_fixes() -> None:
    fit = memory_fit({"spark1": gb10(), "spark2": gb10()}, 440.0, "2", "1", "1", 8)
    for host in ("spark1", "spark2"):
        (message,) = fit[host]["errors"]
        assert message.startswith(f"Host {host}: the weights need 220.0 GiB per node")
        for needle in ("vllm_serve_model_weights_gib 440.0 GiB / 2", "vLLM takes only 95.8 GiB",
                       "vllm_serve_gpu_memory_utilization 0.8 x MemTotal 119.7 GiB", "more nodes",
                       "vllm_serve_tensor_parallel_size", "quantized"):
            assert needle in message, needle


def test_a_utilization_that_leaves_less_than_the_reserve_is_refused_naming_the_highest_that_fits() -> None:
    (message,) = memory_fit({"spark1": gb10(0.95)}, None, 1, 1, 1, 8)["spark1"]["errors"]
    assert "vLLM would take 113.7 GiB (vllm_serve_gpu_memory_utilization 0.95 x MemTotal 119.7 GiB)" in message
    assert "more than the 111.7 GiB the node can give (MemTotal - vllm_serve_memory_reserve_gib 8)" in message
    assert "set vllm_serve_gpu_memory_utilization to at most 0.93" in message


def test_without_a_utilization_vllms_own_default_is_reckoned() -> None:
    fit = memory_fit({"spark1": gb10(None)}, 100, 1, 1, 1, 16)["spark1"]
    assert fit["engine_gib"] == 107.7
    assert "vLLM's default gpu_memory_utilization 0.9" in fit["errors"][0]


def test_unknown_weights_check_only_the_utilization() -> None:
    fit = memory_fit({"spark1": gb10()}, None, 1, 1, 1, 8)["spark1"]
    assert fit["errors"] == [] and fit["weights_gib"] is None
    assert "weights unknown until staged (set vllm_serve_model_weights_gib" in fit["summary"]


@pytest.mark.parametrize("pipeline", [1, 2])
def test_pipeline_parallel_and_gpus_per_node_divide_the_weights(pipeline: int) -> None:
    fit = memory_fit({"n": gb10()}, 240, 2, pipeline, 2, 8)["n"]
    assert fit["weights_gib"] == 240 * 2 / (2 * pipeline)


def test_a_node_without_a_gpu_holds_the_weights_in_memory_less_the_reserve() -> None:
    node = {"mem_total_kib": 16 * 1024 * 1024, "gpu": False, "utilization": None}
    assert memory_fit({"cpu": node}, 7.0, 1, 1, 1, 8)["cpu"]["errors"] == []
    (message,) = memory_fit({"cpu": node}, 9.0, 1, 1, 1, 8)["cpu"]["errors"]
    assert "Host cpu: the weights need 9.0 GiB per node" in message
    assert "more than the 8.0 GiB it can give (MemTotal 16.0 GiB - vllm_serve_memory_reserve_gib 8)" in message


def test_the_staged_weights_are_named_as_their_source() -> None:
    (message,) = memory_fit({"s": gb10()}, 300, 1, 1, 1, 8, "the staged safetensors")["s"]["errors"]
    assert "(the staged safetensors 300.0 GiB / 1," in message


def test_a_reserve_as_large_as_the_memory_is_refused() -> None:
    errors = memory_fit({"s": gb10()}, None, 1, 1, 1, 120)["s"]["errors"]
    assert any("vllm_serve_memory_reserve_gib (120) is not below its MemTotal (119.7 GiB)" in e for e in errors)
