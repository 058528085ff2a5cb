"""The running cluster's settings as its inventory gives them, for the tests to read instead of
repeating them: a port, the API key, the served name.

Where a setting comes from, first found: the scenario's group_vars (the folder beside
MOLECULE_INVENTORY_FILE, which molecule links to the scenario's inventory/group_vars; the sandbox's
own, inventories/sandbox, when no scenario runs), then the roles' defaults. Only plain values are
read: a templated one (``{{ ... }}``) is Ansible's to evaluate, and asking for it is an error.
"""
from __future__ import annotations

import os
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
SANDBOX = REPO / "inventories" / "sandbox"
# The scenarios' tiny model on the controller (what their model_src names; molecule/shared/artifacts.yml
# makes it). A plain path, for inventories that need one: within a model's serving (dgx_spark_models),
# model_src is that model's own src, so "{{ model_src }}" there would name itself.
TINY_MODEL = Path(os.environ.get("DGX_SPARK_CACHE") or Path.home() / ".cache" / "dgx-spark-vllm") / "tiny-llama"


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


def another_model(directory: Path) -> dict[str, str]:
    """The settings of a model switch, the served name kept: the tiny model's files under another
    name (a copy in `directory`), which the run moves to every node and serves from its own folder
    there, as it would a new model."""
    copy = directory / "tiny-llama-switched"
    if not copy.exists():
        shutil.copytree(TINY_MODEL, copy)
    return {"model_name": copy.name, "model_src": str(copy)}
