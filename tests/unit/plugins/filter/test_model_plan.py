"""The model_plan filter: each checked model completed with its head, layout and engine."""
from __future__ import annotations

from ansible_collections.dgx_spark.vllm.plugins.filter.model_plan import model_plan

FABRIC = {"spark1": "198.51.100.11", "spark2": "fd00::12"}


def test_defaults_and_engine_are_filled_in() -> None:
    plan = model_plan([{"name": "small", "model": "org/small", "nodes": ["spark2"], "gpu_memory_utilization": "0.25",
                        "api_port": "8002", "guard_port": 29602}], FABRIC)
    assert plan == [{"name": "small", "model": "org/small", "src": "", "nodes": ["spark2"], "head": "spark2",
                     "tensor_parallel_size": 1, "pipeline_parallel_size": 1, "gpu_memory_utilization": 0.25,
                     "api_port": 8002, "master_port": None, "guard_port": 29602, "extra_args": [],
                     "engines": ["[fd00::12]:8002"]}]


def test_a_given_head_and_layout_are_kept() -> None:
    plan = model_plan([{"name": "big", "model": "org/big", "nodes": ["spark2", "spark1"], "head": "spark1",
                        "tensor_parallel_size": 2, "gpu_memory_utilization": 0.6, "api_port": 8001,
                        "master_port": 29501, "guard_port": 29601, "extra_args": ["--max-num-seqs", 8]}], FABRIC)
    assert plan[0]["head"] == "spark1" and plan[0]["engines"] == ["198.51.100.11:8001"]
    assert plan[0]["tensor_parallel_size"] == 2 and plan[0]["master_port"] == 29501
    assert plan[0]["extra_args"] == ["--max-num-seqs", "8"]


def test_no_models_is_an_empty_plan() -> None:
    assert model_plan(None, FABRIC) == [] and model_plan([], FABRIC) == []
