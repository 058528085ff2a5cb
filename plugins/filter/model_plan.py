"""Filter ``model_plan``: the models of ``dgx_spark_models`` as the roles use them.

Preflight has checked the list (filter ``model_errors``); this fills in what an entry may leave
out and what follows from it: the head (default the first node), the layout's defaults and the
model's engine as the endpoint reaches it (its head's fabric address and its ``api_port``). The rules are documented in ``model_plan.yml``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any


def _engine(address: str, port: int) -> str:
    """host:port, with an IPv6 address in brackets (as nginx's server directive takes it)."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def _entry(model: Mapping[str, Any], fabric: Mapping[str, str]) -> dict[str, Any]:
    nodes = list(model["nodes"])
    head = str(model.get("head") or nodes[0])
    api_port = int(model["api_port"])
    return {
        "name": str(model["name"]),
        "model": str(model["model"]),
        "src": str(model.get("src") or ""),
        "nodes": nodes,
        "head": head,
        "tensor_parallel_size": int(model.get("tensor_parallel_size", 1)),
        "pipeline_parallel_size": int(model.get("pipeline_parallel_size", 1)),
        "gpu_memory_utilization": float(model["gpu_memory_utilization"]),
        "api_port": api_port,
        "master_port": int(model["master_port"]) if model.get("master_port") not in (None, "") else None,
        "guard_port": int(model["guard_port"]),
        "extra_args": [str(arg) for arg in model.get("extra_args") or []],
        "engines": [_engine(fabric[head], api_port)],
    }


def model_plan(models: Sequence[Mapping[str, Any]] | None, fabric: Mapping[str, str]) -> list[dict[str, Any]]:
    """Each model of ``models`` (checked by model_errors) completed: ``fabric`` maps each host to
    its fabric address."""
    return [_entry(model, fabric) for model in models or []]


class FilterModule:
    """Ansible entry point for the ``model_plan`` filter."""

    def filters(self) -> dict[str, Callable[..., list[dict[str, Any]]]]:
        return {"model_plan": model_plan}
