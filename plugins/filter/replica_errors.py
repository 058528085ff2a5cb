"""Filter ``replica_errors``: what is wrong with a list of serving replicas, as error messages.

Several independent serving groups of one model (replicas) sit behind one endpoint on the
cluster head (``dgx_spark_replicas``). Each group is its own vLLM multi-node launch with the
cluster's tensor x pipeline layout, so the inventory must say, without ambiguity, which node
serves in which group and which node is each group's head (rank 0, its API, its
``MASTER_ADDR``). Preflight asserts that this list is empty, before anything changes on any
host. Each message names the host or group, the variable and the fix. The rules are
documented in ``replica_errors.yml``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

# A group's name appears in messages, the balancer's configuration and logs: keep it plain.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
VARIABLE = "dgx_spark_replicas"
WHERE = "in group_vars/sparks"


def _names(values: Sequence[str]) -> str:
    return ", ".join(values) if values else "none"


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _positive(value: Any) -> int | None:
    """A positive whole number given as a number or as its digits; None otherwise."""
    if isinstance(value, bool):
        return None
    text = str(value).strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def _layout(tensor: Any, pipeline: Any, gpus_per_node: Any) -> tuple[int | None, str]:
    """Nodes each group needs (None when the layout cannot say), and how that was reckoned."""
    t, p, g = _positive(tensor), _positive(pipeline), _positive(gpus_per_node)
    how = (f"vllm_serve_tensor_parallel_size {tensor} x vllm_serve_pipeline_parallel_size {pipeline} "
           f"/ dgx_spark_gpus_per_node {gpus_per_node}")
    if t is None or p is None or g is None or (t * p) % g:
        return None, how
    return t * p // g, how


def replica_errors(replicas: Any, hosts: Sequence[str], head: str, tensor_parallel: Any = 1,
                   pipeline_parallel: Any = 1, gpus_per_node: Any = 1, executor: str = "mp") -> list[str]:
    """Every problem of ``replicas`` (the value of dgx_spark_replicas) for the inventory's
    ``hosts`` (groups['sparks']) with ``head`` (the host of spark_head), the layout each group
    runs, and the executor. Empty or undefined replicas (None, [], '') mean one group of every
    node, today's behaviour: no errors."""
    if replicas is None or replicas == "" or (_is_list(replicas) and len(replicas) == 0):
        return []
    if not _is_list(replicas):
        return [f"{VARIABLE} must be a list of groups ({{name, head, nodes}}), got {type(replicas).__name__}: "
                f"set it {WHERE} as in the README (\"Replicas behind one endpoint\"), or remove it for one group "
                "of every node."]
    errors: list[str] = []
    if executor != "mp":
        errors.append(f"{VARIABLE} is set, but dgx_spark_executor is {executor}: replicas need the mp executor "
                      f"(each group is its own vLLM multi-node launch, no Ray). Set dgx_spark_executor: mp {WHERE}, "
                      f"or remove {VARIABLE}.")
    per_group, how = _layout(tensor_parallel, pipeline_parallel, gpus_per_node)
    if per_group is None:
        errors.append(f"{how} is not a whole number of nodes: each replica group needs whole nodes. "
                      f"Change the layout {WHERE}.")
    inventory = list(dict.fromkeys(hosts))
    seen_names: dict[str, int] = {}
    member_of: dict[str, list[str]] = {}
    heads: list[str] = []
    for index, group in enumerate(replicas, start=1):
        if not isinstance(group, Mapping):
            errors.append(f"{VARIABLE} entry {index} is not a mapping ({{name, head, nodes}}): {group!r}. "
                          f"Fix it {WHERE}.")
            continue
        name = group.get("name")
        label = f"{VARIABLE} group {name!r}" if isinstance(name, str) else f"{VARIABLE} entry {index}"
        if not isinstance(name, str) or not NAME.fullmatch(name):
            errors.append(f"{label} needs a name of letters, digits, '_', '.', '-' (got {name!r}): "
                          f"set name: {WHERE}.")
        elif name in seen_names:
            errors.append(f"{VARIABLE} has two groups named {name!r} (entries {seen_names[name]} and {index}): "
                          f"give each group its own name {WHERE}.")
        else:
            seen_names[name] = index
        unknown_keys = sorted(set(group) - {"name", "head", "nodes"})
        if unknown_keys:
            errors.append(f"{label} has keys {', '.join(map(str, unknown_keys))} that mean nothing here: "
                          f"a group has name, head and nodes only. Remove them {WHERE}.")
        nodes = group.get("nodes")
        if not _is_list(nodes) or not nodes or not all(isinstance(node, str) for node in nodes):
            errors.append(f"{label} needs nodes: a list of inventory hosts (got {nodes!r}). Set its nodes {WHERE}.")
            nodes = []
        listed = list(dict.fromkeys(nodes))
        if len(listed) != len(nodes):
            errors.append(f"{label} lists a node twice ({', '.join(nodes)}): list each node once {WHERE}.")
        for node in listed:
            if node not in inventory:
                errors.append(f"Host {node} in {label} is not a host of the inventory group sparks "
                              f"({_names(inventory)}): fix the name {WHERE}, or add the host to hosts.yml.")
            member_of.setdefault(node, []).append(name if isinstance(name, str) else f"entry {index}")
        group_head = group.get("head")
        if not isinstance(group_head, str) or not group_head:
            errors.append(f"{label} has no head: set head: to the one of its nodes ({_names(listed)}) that "
                          f"runs rank 0 and the group's API {WHERE}.")
        elif group_head not in listed:
            errors.append(f"Host {group_head}, head of {label}, is not among its nodes ({_names(listed)}): "
                          f"set head: to one of them, or add {group_head} to its nodes {WHERE}.")
        else:
            heads.append(group_head)
        if per_group is not None and listed and len(listed) != per_group:
            errors.append(f"{label} has {len(listed)} node(s) ({_names(listed)}), but {how} = {per_group} "
                          f"node(s) per group (tensor parallel {tensor_parallel}, pipeline parallel "
                          f"{pipeline_parallel}, {gpus_per_node} GPU(s) per node): give every group "
                          f"{per_group} node(s), or change the layout {WHERE}.")
    for node, groups in member_of.items():
        if len(groups) > 1:
            errors.append(f"Host {node} is in more than one {VARIABLE} group ({', '.join(map(str, groups))}): "
                          f"a node serves in one group; remove it from all but one {WHERE}.")
    for node in inventory:
        if node not in member_of:
            errors.append(f"Host {node} is in no {VARIABLE} group: with replicas, every node of sparks serves "
                          f"in one. Add it to a group's nodes {WHERE} (or remove it from hosts.yml).")
    if head in inventory and head not in heads:
        errors.append(f"Host {head} (spark_head, where the endpoint is) is the head of no {VARIABLE} group: "
                      f"the balancer runs there and needs its own group's head. Make {head} the head: of the "
                      f"group it is in {WHERE} (or move spark_head in hosts.yml).")
    return errors


class FilterModule:
    """Ansible entry point for the ``replica_errors`` filter."""

    def filters(self) -> dict[str, Callable[..., list[str]]]:
        return {"replica_errors": replica_errors}
