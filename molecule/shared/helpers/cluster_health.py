"""Whether this test session found the cluster broken, and which test found it first.

A test that finds the cluster unable to serve (a unit stopped for good, no recovery from a fault)
raises ClusterBroken; the scenario plugin (scenario_plugin.py) records it here, and from then on
fails every test at once with the first reason, instead of letting each sit out its deadlines
against a cluster that cannot pass it. What heals the cluster (a site run that serves again)
clears the record.
"""
from __future__ import annotations

_found: tuple[str, str] | None = None  # (test, reason) of the first finding


class ClusterBroken(AssertionError):
    """The cluster cannot serve: the tests after this one cannot pass until it is healed. `reason`
    is the short cause the later tests repeat; `details` (journals) only this test shows."""

    def __init__(self, reason: str, details: str = "") -> None:
        super().__init__(f"{reason}\n{details}" if details else reason)
        self.reason = reason


def mark_broken(reason: str, test: str) -> None:
    """Record that `test` found the cluster broken; the first finding stays until clear()."""
    global _found
    if _found is None:
        _found = (test, reason)


def broken() -> str | None:
    """What the later tests fail with, or None while the cluster is not known to be broken."""
    if _found is None:
        return None
    test, reason = _found
    return f"the cluster was found broken by {test}: {reason}"


def clear() -> None:
    """The cluster was healed (it serves again): the tests after this run as usual."""
    global _found
    _found = None
