"""The order a scenario's test modules run in: the one its tests/conftest.py declares (ORDER), not
pytest's alphabetical one. Modules change the cluster for those after them (a layout, a served
name, a stopped unit), so each module's place is chosen, and a new module must be given one."""
from __future__ import annotations

import pytest


def in_order(items: list[pytest.Item], order: list[str]) -> list[pytest.Item]:
    """The collected items, module by module as `order` (module names without .py) lists them;
    within a module, pytest's own order (sorted() is stable). A module missing from `order` is a
    usage error, named: running it at some place by chance could break the modules after it."""
    rank = {module: place for place, module in enumerate(order)}
    unplaced = sorted({item.path.stem for item in items} - rank.keys())
    if unplaced:
        raise pytest.UsageError(f"test modules without a place in this scenario's ORDER (its tests/conftest.py): "
                                f"{', '.join(unplaced)}; add each where it belongs")
    return sorted(items, key=lambda item: rank[item.path.stem])
