"""The running cluster's settings as its inventory gives them, for the tests to read instead of
repeating them: a port, the API key, the served name.

Where a setting comes from, first found: the scenario's group_vars (the folder beside
MOLECULE_INVENTORY_FILE, which molecule links to the scenario's inventory/group_vars; the sandbox's
own, inventories/sandbox, when no scenario runs), then the roles' defaults. Only plain values are
read: a templated one (``{{ ... }}``) is Ansible's to evaluate, and asking for it is an error.
"""
from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
SANDBOX = REPO / "inventories" / "sandbox"


def inventory_dir() -> Path:
    """The running cluster's inventory folder: the scenario's (molecule's, or the sandbox's when
    MOLECULE_INVENTORY_FILE names it), or the sandbox's."""
    named = Path(os.environ.get("MOLECULE_INVENTORY_FILE") or SANDBOX)
    return named if named.is_dir() else named.parent


def _merged(files: list[Path]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for path in files:
        values.update(yaml.safe_load(path.read_text()) or {})
    return values


@cache
def _sources() -> tuple[tuple[str, dict[str, Any]], ...]:
    group_vars = inventory_dir() / "group_vars"
    return ((str(group_vars), _merged(sorted(group_vars.glob("*/*.yml")) + sorted(group_vars.glob("*.yml")))),
            ("roles/*/defaults/main.yml", _merged(sorted(REPO.glob("roles/*/defaults/main.yml")))))


def setting(name: str) -> Any:
    """The value of one inventory variable (see the module's docstring for where it is looked up)."""
    for source, values in _sources():
        if name in values:
            value = values[name]
            if isinstance(value, str) and "{{" in value:
                raise KeyError(f"{name} is templated in {source} ({value!r}): read a plain setting, "
                               f"or ask Ansible for it")
            return value
    raise KeyError(f"{name} is in no group_vars of {inventory_dir()} and in no role's defaults")
