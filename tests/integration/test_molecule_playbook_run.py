"""The molecule tests' playbook_run adapter, run here on localhost without a container cluster.

The molecule scenarios only run in the full suite (minutes, Docker); this keeps the adapter's
contract with them checked on every unit stage: its import path (set up the way
molecule/*/tests/conftest.py does), MOLECULE_INVENTORY_FILE first, an overlay inventory that
wins over it, extra ansible-playbook arguments passed through.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from support.ansible_run import REPO

PLAY = """\
- hosts: spark2
  gather_facts: false
  tasks:
    - ansible.builtin.copy:
        dest: "{{ out }}"
        content: "{{ {'marker': marker, 'mode': mode} | to_json }}"
"""


@pytest.fixture
def playbook_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    """playbook_run imported as molecule's verifier imports it, with a local scenario inventory."""
    for helpers in (REPO / "tests" / "support", REPO / "molecule" / "shared" / "helpers"):
        monkeypatch.syspath_prepend(str(helpers))
    inventory = tmp_path / "molecule-inventory.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {"spark2": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "marker": "from the scenario", "mode": "scenario"}}}}))
    monkeypatch.setenv("MOLECULE_INVENTORY_FILE", str(inventory))
    return importlib.import_module("playbook_run")


def test_overlay_wins_over_the_scenario_inventory(playbook_run: ModuleType, tmp_path: Path) -> None:
    overlay = playbook_run.overlay_inventory(tmp_path / "overlay", "spark2", "marker: from the overlay\n")
    assert isinstance(overlay, str)
    assert (Path(overlay) / "host_vars" / "spark2.yml").read_text() == "marker: from the overlay\n"
    (tmp_path / "play.yml").write_text(PLAY)
    out = tmp_path / "out.json"
    result = playbook_run.run_playbook(str(tmp_path / "play.yml"), "-e", f"out={out}",
                                       inventories=(overlay,), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(out.read_text()) == {"marker": "from the overlay", "mode": "scenario"}
    assert "\x1b[" not in result.stdout  # no colour: the molecule tests match plain text


def test_preflight_names_are_the_tasks_a_run_shows_never_a_blocks_own(playbook_run: ModuleType) -> None:
    tasks = [{"name": "first"},
             {"name": "a block", "block": [{"name": "inside"}, {"name": "nested", "block": [{"name": "deeper"}]}],
              "rescue": [{"name": "rescued"}]}]
    assert playbook_run.task_names(tasks) == ["first", "inside", "deeper", "rescued"]
    # ib_network's preflight checks the node in a block (when it manages netplan): its tasks are counted.
    names = playbook_run.preflight_task_names()["ib_network"]
    assert "The node has netplan" in names and "Check the node before netplan is written there" not in names
