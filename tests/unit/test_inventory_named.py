"""Every Ansible run in the project's tools, tests, molecule playbooks, CI and docs names its inventory.

ansible.cfg has no default inventory; a run without -i would reach whatever ANSIBLE_INVENTORY
or a user's own configuration names. The scan reads the files git tracks (the checker's own
planted cases below are in this file, which the scan leaves out).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from support.ansible_run import playbook_command
from support.inventory_named import (markdown_runs_without_inventory, python_runs_without_inventory,
                                     runs_without_inventory, shell_runs_without_inventory,
                                     yaml_runs_without_inventory)

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("tools", "tests", "molecule", ".ci", "playbooks", "docs", "README.md")


def tracked_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "--", *SCANNED], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.split()
    assert listed, "git lists no files: the scan would pass on nothing"
    return [REPO / name for name in listed if REPO / name != Path(__file__)]


def test_no_ansible_run_in_the_project_lacks_an_inventory() -> None:
    files = tracked_files()
    found = {str(path.relative_to(REPO)): runs for path in files if path.is_file()
             for runs in [runs_without_inventory(path)] if runs}
    assert found == {}, "runs without -i (add -i with the inventory they are for): " + repr(found)
    assert any(path.name == "sandbox" for path in files), "tools/sandbox was not scanned"


@pytest.mark.parametrize("text", [
    "ansible-playbook site.yml",
    "set -e\nansible-playbook molecule/mp/prepare.yml\n",
    "cd x && ansible-playbook \\\n  site.yml --check",
    "(cd /tmp && ansible all -m ping)",
    'exec "$repo/.venv/bin/ansible-playbook" serve.yml',
    "nice -n 5 ansible-playbook site.yml | tee log",
])
def test_a_shell_run_without_an_inventory_is_found(text: str) -> None:
    assert shell_runs_without_inventory(text)


@pytest.mark.parametrize("text", [
    "ansible-playbook -i inventories/sandbox site.yml",
    "ansible-playbook site.yml --inventory=inventories/sparks",
    "ansible-playbook \\\n  -i inv site.yml",
    "ansible-playbook --version",
    "command -v ansible-playbook",
    "echo 'run ansible-playbook site.yml by hand'",
    "ansible-galaxy collection build . && ansible-doc -t filter x",
])
def test_a_shell_run_with_an_inventory_or_none_at_all_passes(text: str) -> None:
    assert shell_runs_without_inventory(text) == []


def test_python_command_lists_and_shell_strings_are_read() -> None:
    planted = ('import subprocess\n"""ansible-playbook site.yml (a docstring is prose)"""\n'
               'subprocess.run(["ansible-playbook", "site.yml"])\n'
               'subprocess.run("ansible-playbook serve.yml", shell=True)\n'
               'subprocess.run(["ansible-playbook", "-i", "inv", "site.yml"])\n')
    assert python_runs_without_inventory(planted) == ["ansible-playbook site.yml", "ansible-playbook serve.yml"]


def test_yaml_command_tasks_are_read() -> None:
    planted = ("- hosts: localhost\n  tasks:\n"
               "    - name: Run ansible-playbook site.yml (a name is prose)\n"
               "      ansible.builtin.command: ansible-playbook site.yml\n"
               "    - ansible.builtin.command:\n        argv: [ansible-playbook, serve.yml]\n"
               "    - ansible.builtin.shell: ansible-playbook -i inv stop.yml\n")
    assert yaml_runs_without_inventory(planted) == ["ansible-playbook site.yml", "ansible-playbook serve.yml"]


def test_markdown_shell_blocks_are_read() -> None:
    planted = "Run ansible-playbook site.yml.\n\n```sh\nansible-playbook playbooks/status.yml\n```\n"
    assert markdown_runs_without_inventory(planted) == ["ansible-playbook playbooks/status.yml"]


def test_the_one_playbook_runner_refuses_to_run_without_an_inventory() -> None:
    with pytest.raises(ValueError, match="names no inventory"):
        playbook_command("site.yml", [])
    assert playbook_command("site.yml", ["inv"])[2:4] == ["-i", "inv"]
