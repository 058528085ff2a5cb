"""The order a scenario's test modules run in: the one its tests/order.txt declares (one module
name a line, without .py; # starts a comment, which says why a module sits where it does), not
pytest's alphabetical one. Modules change the cluster for those after them (a layout, a served
name, a stopped unit), so each module's place is chosen, and a new module must be given one."""
from __future__ import annotations

from pathlib import Path

import pytest

ORDER_FILE = "order.txt"


def declared_order(tests_dir: Path) -> list[str]:
    """The module names tests_dir/order.txt lists, in its order."""
    lines = (line.split("#", 1)[0].strip() for line in (tests_dir / ORDER_FILE).read_text().splitlines())
    return [line for line in lines if line]


def in_order(items: list[pytest.Item], order: list[str]) -> list[pytest.Item]:
    """The collected items, module by module as `order` lists them; within a module, pytest's own
    order (sorted() is stable). A module missing from `order` is a usage error, named: running it
    at some place by chance could break the modules after it."""
    rank = {module: place for place, module in enumerate(order)}
    unplaced = sorted({item.path.stem for item in items} - rank.keys())
    if unplaced:
        raise pytest.UsageError(f"test modules without a place in this scenario's {ORDER_FILE}: "
                                f"{', '.join(unplaced)}; add each where it belongs")
    return sorted(items, key=lambda item: rank[item.path.stem])
