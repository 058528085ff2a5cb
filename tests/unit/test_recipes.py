"""Every recipe in inventories/recipes fits a GB10: its settings layered over the inventory it is
for (inventories/sparks) give each Spark a share of the weights that leaves room for the KV cache,
within what the node can spare, by the same filter preflight runs."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.dgx_spark.vllm.plugins.filter.memory_fit import memory_fit
from ansible_collections.dgx_spark.vllm.plugins.filter.replica_errors import replica_errors

REPO = Path(__file__).resolve().parents[2]
RECIPES = REPO / "inventories/recipes"
BASE = REPO / "inventories/sparks"
# A GB10's MemTotal: 119.7 GiB.
GB10_KIB = round(119.7 * 1024 * 1024)


def group_vars(inventory: Path) -> dict[str, Any]:
    return yaml.safe_load((inventory / "group_vars/sparks/main.yml").read_text())


def hosts(inventory: Path) -> list[str]:
    children = yaml.safe_load((inventory / "hosts.yml").read_text())["sparks"]["children"]
    return [host for group in children.values() for host in group["hosts"]]


def recipes() -> list[Path]:
    found = sorted(path.parent.parent.parent for path in RECIPES.glob("*/group_vars/sparks/main.yml"))
    assert len(found) >= 3, found
    return found


def settings(recipe: Path) -> dict[str, Any]:
    """The recipe over the example inventory, as `-i inventories/sparks -i RECIPE` layers them."""
    return {**group_vars(BASE), **group_vars(recipe)}


@pytest.mark.parametrize("recipe", recipes(), ids=lambda path: path.name)
def test_each_recipe_fits_a_gb10_with_room_for_the_kv_cache(recipe: Path) -> None:
    merged = settings(recipe)
    assert merged["vllm_serve_model_weights_gib"] > 0, "a recipe declares its weights"
    nodes = {host: {"mem_total_kib": GB10_KIB, "gpu": True,
                    "utilization": merged.get("vllm_serve_gpu_memory_utilization", 0.8)} for host in hosts(BASE)}
    fit = memory_fit(nodes, merged["vllm_serve_model_weights_gib"], merged["vllm_serve_tensor_parallel_size"],
                     merged.get("vllm_serve_pipeline_parallel_size", 1), merged["dgx_spark_gpus_per_node"], 8)
    for host, node in fit.items():
        assert node["errors"] == [], node["errors"]
        assert node["kv_cache_gib"] >= 16, f"{host}: only {node['kv_cache_gib']} GiB for the KV cache"


@pytest.mark.parametrize("recipe", recipes(), ids=lambda path: path.name)
def test_each_recipe_matches_the_inventory_it_is_for(recipe: Path) -> None:
    merged = settings(recipe)
    tensor, pipeline = merged["vllm_serve_tensor_parallel_size"], merged.get("vllm_serve_pipeline_parallel_size", 1)
    replicas = merged.get("dgx_spark_replicas")
    if replicas:
        assert replica_errors(replicas, hosts(BASE), "spark1", tensor, pipeline, merged["dgx_spark_gpus_per_node"],
                              merged["dgx_spark_executor"]) == []
    else:
        assert tensor * pipeline == len(hosts(BASE)) * merged["dgx_spark_gpus_per_node"]


@pytest.mark.parametrize("recipe", recipes(), ids=lambda path: path.name)
def test_each_recipe_is_named_in_the_recipes_readme(recipe: Path) -> None:
    assert f"`{recipe.name}`" in (RECIPES / "README.md").read_text()
