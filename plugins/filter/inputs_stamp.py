"""Filter ``inputs_stamp``: one digest of everything a run of the collection renders from.

The collection's own variables of every node (the names its roles own, by their prefixes), each
node's ``ansible_host_ib``, the nodes' groups and the collection's files (roles, plugins,
playbooks). A restart of serving compares it with the one the last converge that served
recorded: equal, and nothing a converge would render can differ. Documented in
``inputs_stamp.yml``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleError

# This file is <collection>/plugins/filter/inputs_stamp.py.
COLLECTION_ROOT = Path(__file__).resolve().parents[2]
# The folders whose files make what a run renders and does.
COLLECTION_FOLDERS = ("roles", "plugins", "playbooks")
# Facts of the run itself, not inputs: which checks passed, and this stamp.
RUN_FACTS = frozenset({"dgx_spark_preflight_passed", "dgx_spark_inputs_stamp"})


def role_prefixes(root: Path) -> tuple[str, ...]:
    """Each role's variable prefix (its name and an underscore): the names the collection owns."""
    return tuple(sorted(f"{role.name}_" for role in (root / "roles").iterdir() if role.is_dir()))


def owned(name: str, prefixes: Sequence[str]) -> bool:
    """Whether a variable is one of the collection's inputs."""
    return name == "ansible_host_ib" or (name not in RUN_FACTS and name.startswith(tuple(prefixes)))


def files_digest(root: Path, folders: Iterable[str] = COLLECTION_FOLDERS) -> str:
    """sha256 over the path and content of every file under the folders, in a fixed order;
    compiled Python and hidden files left out (they come and go as the collection is used)."""
    digest = hashlib.sha256()
    for folder in folders:
        for path in sorted((root / folder).rglob("*")):
            relative = path.relative_to(root)
            if not path.is_file() or "__pycache__" in relative.parts or any(
                    part.startswith(".") for part in relative.parts):
                continue
            digest.update(str(relative).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def node_inputs(variables: Mapping[str, Any], prefixes: Sequence[str]) -> dict[str, Any]:
    """The collection's variables of one node, with their values."""
    return {name: variables[name] for name in sorted(variables) if owned(name, prefixes)}


def stamp(hostvars: Mapping[str, Mapping[str, Any]], hosts: Sequence[str],
          groups: Mapping[str, Sequence[str]], base: Path) -> str:
    """sha256 of the inputs of a run on these hosts, with the collection at ``base``; empty when
    a variable cannot be templated (a run that cannot stamp its inputs never restarts as it is)."""
    prefixes = role_prefixes(base)
    try:
        inputs = {
            "nodes": {host: node_inputs(hostvars[host], prefixes) for host in hosts},
            "groups": {name: [host for host in members if host in hosts]
                       for name, members in sorted(groups.items()) if set(members) & set(hosts)},
            "files": files_digest(base),
        }
        # Serialized inside: a value may fail only once it is read whole.
        text = json.dumps(inputs, sort_keys=True, default=str)
    except AnsibleError:
        return ""
    return hashlib.sha256(text.encode()).hexdigest()


def inputs_stamp(hostvars: Mapping[str, Mapping[str, Any]], hosts: Sequence[str],
                 groups: Mapping[str, Sequence[str]]) -> str:
    """The stamp of this collection's inputs (see ``stamp``)."""
    return stamp(hostvars, hosts, groups, COLLECTION_ROOT)


class FilterModule:
    """Ansible entry point for the ``inputs_stamp`` filter."""

    def filters(self) -> dict[str, Callable[..., str]]:
        return {"inputs_stamp": inputs_stamp}
