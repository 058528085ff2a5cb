"""Filter ``memory_fit``: whether the model fits each serving node's memory, with the numbers.

A DGX Spark's GB10 shares one pool of memory (about 119.7 GiB) between the CPU and the GPU.
vLLM takes ``gpu_memory_utilization`` x that total for the weights, the KV cache and the
activations; what is left must hold the OS, sshd and the node's own services. Each node holds
``weights x gpus_per_node / (tensor x pipeline parallel)`` of the weights. Preflight (with the
declared size) and the serving role (with the staged size) assert that no node has errors
before anything is written on any host. The rules are documented in ``memory_fit.yml``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

GIB = 1024**3
# vLLM's own gpu_memory_utilization when none is given.
VLLM_DEFAULT_UTILIZATION = 0.9
SHARES = "vllm_serve_tensor_parallel_size x vllm_serve_pipeline_parallel_size / dgx_spark_gpus_per_node"
FIXES = ("serve it over more nodes (a larger vllm_serve_tensor_parallel_size or vllm_serve_pipeline_parallel_size), "
         "or choose a smaller model or a quantized one (FP8, NVFP4, AWQ)")


def _number(value: Any) -> float | None:
    """A non-negative number given as a number or as its text; None when unset or not one."""
    if value is None or isinstance(value, bool) or (isinstance(value, str) and not value.strip()):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


def _gib(value: float) -> str:
    return f"{value:.1f} GiB"


def _node(host: str, node: Mapping[str, Any], weights: float | None, weights_from: str,
          shards: float, reserve: float) -> dict[str, Any]:
    """One node's estimate and its errors."""
    total = int(node["mem_total_kib"]) * 1024 / GIB
    limit = total - reserve
    gpu = bool(node.get("gpu", False))
    set_utilization = _number(node.get("utilization"))
    utilization = set_utilization if set_utilization is not None else VLLM_DEFAULT_UTILIZATION
    utilization_text = (f"vllm_serve_gpu_memory_utilization {utilization:g}" if set_utilization is not None
                        else f"vLLM's default gpu_memory_utilization {utilization:g}")
    engine = utilization * total if gpu else None
    per_node = weights / shards if weights is not None else None
    errors: list[str] = []
    where = f"Host {host}:"
    if limit <= 0:
        errors.append(f"{where} vllm_serve_memory_reserve_gib ({reserve:g}) is not below its MemTotal "
                      f"({_gib(total)}): lower it in group_vars/sparks.")
    if engine is not None and engine > limit > 0:
        most = int(limit / total * 100) / 100
        errors.append(f"{where} vLLM would take {_gib(engine)} ({utilization_text} x MemTotal {_gib(total)}), "
                      f"more than the {_gib(limit)} the node can give (MemTotal - vllm_serve_memory_reserve_gib "
                      f"{reserve:g}) without starving the OS and sshd: set vllm_serve_gpu_memory_utilization to "
                      f"at most {most:g} in group_vars/sparks.")
    if per_node is not None and engine is not None and per_node > engine:
        errors.append(f"{where} the weights need {_gib(per_node)} per node ({weights_from} {_gib(weights)} / "
                      f"{shards:g}, {SHARES}) but vLLM takes only {_gib(engine)} there ({utilization_text} x "
                      f"MemTotal {_gib(total)}), leaving nothing for the KV cache: {FIXES}; a higher "
                      f"vllm_serve_gpu_memory_utilization only helps up to MemTotal - vllm_serve_memory_reserve_gib "
                      f"({_gib(limit)}).")
    elif per_node is not None and engine is None and per_node > limit:
        errors.append(f"{where} the weights need {_gib(per_node)} per node ({weights_from} {_gib(weights)} / "
                      f"{shards:g}, {SHARES}), more than the {_gib(limit)} it can give (MemTotal "
                      f"{_gib(total)} - vllm_serve_memory_reserve_gib {reserve:g}): {FIXES}.")
    kv_cache = engine - per_node if engine is not None and per_node is not None else None
    return {"memory_gib": round(total, 1), "weights_gib": None if per_node is None else round(per_node, 1),
            "engine_gib": None if engine is None else round(engine, 1),
            "kv_cache_gib": None if kv_cache is None else round(kv_cache, 1),
            "limit_gib": round(limit, 1),
            "summary": _summary(host, total, limit, per_node, engine, kv_cache, utilization_text, weights_from),
            "errors": errors}


def _summary(host: str, total: float, limit: float, per_node: float | None, engine: float | None,
             kv_cache: float | None, utilization_text: str, weights_from: str) -> str:
    weights_text = (f"weights {_gib(per_node)} per node (from {weights_from})" if per_node is not None
                    else "weights unknown until staged (set vllm_serve_model_weights_gib to see them now)")
    engine_text = (f"vLLM takes {_gib(engine)} ({utilization_text} x MemTotal {_gib(total)})"
                   if engine is not None else f"MemTotal {_gib(total)}, no GPU (vLLM's CPU backend)")
    kv_text = f", {_gib(kv_cache)} left for the KV cache and activations" if kv_cache is not None else ""
    return f"{host}: {weights_text}; {engine_text}{kv_text}; the serving container is limited to {_gib(limit)}."


def memory_fit(nodes: Mapping[str, Mapping[str, Any]], weights_gib: Any = None, tensor_parallel: Any = 1,
               pipeline_parallel: Any = 1, gpus_per_node: Any = 1, reserve_gib: Any = 8,
               weights_from: str = "vllm_serve_model_weights_gib") -> dict[str, dict[str, Any]]:
    """Each node's estimate (GiB, one decimal), a one-line summary and its errors.

    ``nodes`` maps a host to ``mem_total_kib`` (/proc/meminfo's MemTotal), ``gpu`` (the node's
    GPU shares that memory) and ``utilization`` (vllm_serve_gpu_memory_utilization, None for
    vLLM's default). ``weights_gib`` is the model's whole weights (None: unknown)."""
    weights = _number(weights_gib)
    reserve = _number(reserve_gib)
    shards = (_number(tensor_parallel) or 1) * (_number(pipeline_parallel) or 1) / (_number(gpus_per_node) or 1)
    return {host: _node(host, node, weights, weights_from, shards, reserve if reserve is not None else 0.0)
            for host, node in nodes.items()}


class FilterModule:
    """Ansible entry point for the ``memory_fit`` filter."""

    def filters(self) -> dict[str, Callable[..., dict[str, dict[str, Any]]]]:
        return {"memory_fit": memory_fit}
