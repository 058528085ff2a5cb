"""Import a Python file a role ships to its nodes (roles/*/files/*.py) as a module, for unit tests."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load_role_file(relative: str) -> ModuleType:
    """The module at REPO/relative, registered in sys.modules (dataclasses look their module up there)."""
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
