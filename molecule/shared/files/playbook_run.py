"""Run the collection's own playbooks against the molecule inventory from a testinfra test.

A thin adapter over tests/support/ansible_run.py (molecule/*/tests/conftest.py puts that folder
on sys.path): it adds only what is molecule's, the scenario inventory from
MOLECULE_INVENTORY_FILE, so these runs get the same environment and command line as the tests
under tests/.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ansible_run import REPO, run_ansible_playbook, write_overlay_inventory


def run_playbook(playbook: str, *extra: str, inventories: tuple[str, ...] = (),
                 timeout: int = 1800) -> subprocess.CompletedProcess[str]:
    """ansible-playbook REPO/playbook -i <molecule inventory> [-i more] extra..."""
    return run_ansible_playbook(REPO / playbook,
                                [os.environ["MOLECULE_INVENTORY_FILE"], *inventories],
                                extra_args=extra, timeout=timeout)


def overlay_inventory(directory: Path, host: str, host_vars_yaml: str) -> str:
    """An extra inventory that sets variables of one host over the molecule inventory
    (a later -i source wins), as a user's host_vars would. Returns its path."""
    return str(write_overlay_inventory(directory, {host: host_vars_yaml}))


def failure(output: str, tail: int = 3000) -> str:
    """What a failed run says first (its fatal task's message), then the end of its output."""
    start = output.find("fatal: ")
    head = output[start:start + 3000] if start >= 0 else ""
    return f"{head}\n...\n{output[-tail:]}"
