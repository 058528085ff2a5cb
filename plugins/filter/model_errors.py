"""Filter ``model_errors``: what is wrong with the models an inventory serves, as error messages.

Several models can share one cluster behind its one endpoint (``dgx_spark_models``): each names
its nodes (one vLLM launch over them, its own tensor x pipeline layout and ports), and a node may
hold more than one model, each within its share of the node's memory. Preflight asserts that
this list is empty, before anything changes on any host. Each message names the model or host,
the variable, the numbers and the fix. The rules are documented in ``model_errors.yml``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

# The served name routes requests and names the model's units (vllm-serve-<name>): keep it plain.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
VARIABLE = "dgx_spark_models"
WHERE = "in group_vars/sparks"
KEYS = {"name", "model", "src", "nodes", "head", "tensor_parallel_size", "pipeline_parallel_size",
        "gpu_memory_utilization", "api_port", "master_port", "guard_port", "extra_args"}
LOWEST_PORT = 1024
HIGHEST_PORT = 65535


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _whole(value: Any, lowest: int = 1, highest: int | None = None) -> int | None:
    """A whole number in [lowest, highest], given as a number or as its digits; None otherwise."""
    if isinstance(value, bool):
        return None
    text = str(value).strip()
    if not text.isdigit():
        return None
    number = int(text)
    return number if number >= lowest and (highest is None or number <= highest) else None


def _share(value: Any) -> float | None:
    """A fraction in (0, 1]; None otherwise."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if 0 < number <= 1 else None


def _names(values: Sequence[str]) -> str:
    return ", ".join(values) if values else "none"


class _Checker:
    """Collects the errors of one list of models, model by model, then node by node."""

    def __init__(self, hosts: Sequence[str], gpus_per_node: Any, share_limit: float,
                 reserved_ports: Mapping[str, Any]) -> None:
        self.hosts = list(dict.fromkeys(hosts))
        self.gpus_per_node = _whole(gpus_per_node) or 1
        self.share_limit = share_limit
        self.reserved = {_whole(port): variable for variable, port in reserved_ports.items()
                         if _whole(port) is not None}
        self.errors: list[str] = []
        self.names: dict[str, int] = {}
        self.shares: dict[str, list[tuple[str, float]]] = {}
        self.ports: dict[str, list[tuple[int, str]]] = {}

    def model(self, index: int, entry: Any) -> None:
        if not isinstance(entry, Mapping):
            self.errors.append(f"{VARIABLE} entry {index} is not a mapping (name, model, nodes, "
                               f"gpu_memory_utilization, api_port, ...): {entry!r}. Fix it {WHERE}.")
            return
        label, who = self._name(index, entry)
        unknown = sorted(map(str, set(entry) - KEYS))
        if unknown:
            self.errors.append(f"{label} has keys {', '.join(unknown)} that mean nothing here (known: "
                               f"{', '.join(sorted(KEYS))}): remove or rename them {WHERE}.")
        if not isinstance(entry.get("model"), str) or not entry["model"].strip():
            self.errors.append(f"{label} needs model: the Hugging Face id or the directory of its weights "
                               f"(got {entry.get('model')!r}). Set it {WHERE}.")
        nodes = self._nodes(label, entry)
        head = self._head(label, entry, nodes)
        self._layout(label, entry, nodes)
        share = _share(entry.get("gpu_memory_utilization"))
        if share is None:
            self.errors.append(f"{label} needs gpu_memory_utilization: its share of each of its nodes' memory, "
                               f"above 0 and at most 1 (got {entry.get('gpu_memory_utilization')!r}). Set it {WHERE}.")
        else:
            for node in nodes:
                self.shares.setdefault(node, []).append((who, share))
        if head is not None:
            self._port(label, entry, head, "api_port")
            self._port(label, entry, head, "guard_port")
            if len(nodes) > 1:
                self._port(label, entry, head, "master_port")
        if not isinstance(entry.get("src", ""), str):
            self.errors.append(f"{label} src must be a directory on the controller (got {entry['src']!r}). "
                               f"Fix it {WHERE}.")
        if "extra_args" in entry and (not _is_list(entry["extra_args"])
                                      or not all(isinstance(arg, str) for arg in entry["extra_args"])):
            self.errors.append(f"{label} extra_args must be a list of strings, one argument each "
                               f"(got {entry['extra_args']!r}). Fix it {WHERE}.")

    def _name(self, index: int, entry: Mapping[str, Any]) -> tuple[str, str]:
        """How messages name this model: in full, and short (the name, or its entry number)."""
        name = entry.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            self.errors.append(f"{VARIABLE} entry {index} needs a name of letters, digits, '_', '.', '-' "
                               f"(the name clients ask for; got {name!r}): set name: {WHERE}.")
            return f"{VARIABLE} entry {index}", f"entry {index}"
        if name in self.names:
            self.errors.append(f"{VARIABLE} has two models named {name!r} (entries {self.names[name]} and "
                               f"{index}): give each its own name {WHERE}.")
        else:
            self.names[name] = index
        return f"{VARIABLE} model {name!r}", repr(name)

    def _nodes(self, label: str, entry: Mapping[str, Any]) -> list[str]:
        nodes = entry.get("nodes")
        if not _is_list(nodes) or not nodes or not all(isinstance(node, str) for node in nodes):
            self.errors.append(f"{label} needs nodes: a list of inventory hosts (got {nodes!r}). Set them {WHERE}.")
            return []
        listed = list(dict.fromkeys(nodes))
        if len(listed) != len(nodes):
            self.errors.append(f"{label} lists a node twice ({', '.join(nodes)}): list each node once {WHERE}.")
        known = [node for node in listed if node in self.hosts]
        for node in listed:
            if node not in known:
                self.errors.append(f"Host {node} in {label} is not a host of the inventory group sparks "
                                   f"({_names(self.hosts)}): fix the name {WHERE}, or add the host to hosts.yml.")
        return known

    def _head(self, label: str, entry: Mapping[str, Any], nodes: list[str]) -> str | None:
        head = entry.get("head", nodes[0] if nodes else None)
        if head is None:
            return None
        if head not in nodes:
            self.errors.append(f"Host {head}, head of {label}, is not among its nodes ({_names(nodes)}): set "
                               f"head: to one of them (default: the first) {WHERE}.")
            return None
        return str(head)

    def _layout(self, label: str, entry: Mapping[str, Any], nodes: list[str]) -> None:
        tensor = _whole(entry.get("tensor_parallel_size", 1))
        pipeline = _whole(entry.get("pipeline_parallel_size", 1))
        if tensor is None or pipeline is None:
            self.errors.append(f"{label} tensor_parallel_size and pipeline_parallel_size must be whole numbers "
                               f"of at least 1 (got {entry.get('tensor_parallel_size')!r} and "
                               f"{entry.get('pipeline_parallel_size')!r}). Fix them {WHERE}.")
            return
        gpus = tensor * pipeline
        if nodes and gpus != len(nodes) * self.gpus_per_node:
            self.errors.append(f"{label} runs tensor {tensor} x pipeline {pipeline} = {gpus} GPU(s), but its "
                               f"{len(nodes)} node(s) ({_names(nodes)}) have {len(nodes) * self.gpus_per_node} "
                               f"({self.gpus_per_node} per node): give it {gpus // self.gpus_per_node or 1} "
                               f"node(s), or change its layout {WHERE}.")

    def _port(self, label: str, entry: Mapping[str, Any], head: str, key: str) -> None:
        port = _whole(entry.get(key), LOWEST_PORT, HIGHEST_PORT)
        if port is None:
            self.errors.append(f"{label} needs {key}: a port from {LOWEST_PORT} to {HIGHEST_PORT} on its head "
                               f"{head} (got {entry.get(key)!r}). Set it {WHERE}.")
            return
        self.ports.setdefault(head, []).append((port, f"{label} {key}"))

    def nodes(self) -> None:
        for node, shares in self.shares.items():
            total = sum(share for _model, share in shares)
            if total > self.share_limit + 1e-9:
                parts = " + ".join(f"{who} {share:g}" for who, share in shares)
                self.errors.append(f"Host {node}: the models on it take {total:.2f} of its memory ({parts}), over "
                                   f"the {self.share_limit:g} vLLM may have beside the system: lower their "
                                   f"gpu_memory_utilization in {VARIABLE}, or move a model to another node, {WHERE}.")
        for node, ports in self.ports.items():
            seen: dict[int, str] = {}
            for port, owner in ports:
                if port in self.reserved:
                    self.errors.append(f"Host {node}: {owner} {port} is the cluster's {self.reserved[port]}: choose "
                                       f"another port {WHERE}.")
                elif port in seen:
                    self.errors.append(f"Host {node}: {owner} and {seen[port]} are both {port}: give each its own "
                                       f"port {WHERE}.")
                else:
                    seen[port] = owner


def model_errors(models: Any, hosts: Sequence[str], gpus_per_node: Any = 1, share_limit: float = 0.9,
                 reserved_ports: Mapping[str, Any] | None = None, executor: str = "mp") -> list[str]:
    """Every problem of ``models`` (the value of dgx_spark_models) for the inventory's ``hosts``
    (groups['sparks']): names, nodes, layouts, memory shares per node (at most ``share_limit``
    together) and ports per node (none twice, none of ``reserved_ports``, {variable: port}).
    Empty or undefined models (None, [], '') mean the one model of vllm_serve_model: no errors."""
    if models is None or models == "" or (_is_list(models) and len(models) == 0):
        return []
    if not _is_list(models):
        return [f"{VARIABLE} must be a list of models (name, model, nodes, gpu_memory_utilization, api_port, ...), "
                f"got {type(models).__name__}: set it {WHERE} as in docs/inventory.md, or remove it to serve "
                "the one model of vllm_serve_model."]
    checker = _Checker(hosts, gpus_per_node, share_limit, reserved_ports or {})
    if executor != "mp":
        checker.errors.append(f"{VARIABLE} is set, but dgx_spark_executor is {executor}: several models need the mp "
                              f"executor (each model is its own vLLM launch). Set dgx_spark_executor: mp {WHERE}, "
                              f"or remove {VARIABLE}.")
    for index, entry in enumerate(models, start=1):
        checker.model(index, entry)
    checker.nodes()
    return checker.errors


class FilterModule:
    """Ansible entry point for the ``model_errors`` filter."""

    def filters(self) -> dict[str, Callable[..., list[str]]]:
        return {"model_errors": model_errors}
