"""The run's inputs stamp (filter inputs_stamp, set by playbooks/preflight.yml) through Ansible.

playbooks/preflight.yml on the example inventory, run locally with the two Sparks' recorded
facts (as test_preflight.py does), then a play that prints the stamp. The same inputs give the
same stamp from run to run; a collection variable given with -e changes it, a variable of the
user's own does not.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from support.ansible_run import REPO
from support.example_inventory import HOSTS, run_locally
from support.facts import load_facts

PRINT_STAMP = f"""---
- name: Preflight
  ansible.builtin.import_playbook: {REPO}/playbooks/preflight.yml

- name: Print the stamp
  hosts: sparks
  gather_facts: false
  tasks:
    - name: The stamp
      ansible.builtin.debug:
        msg: "STAMP {{{{ dgx_spark_inputs_stamp }}}} ON {{{{ inventory_hostname }}}}"
"""


def stamps(tmp_path: Path, extra: dict[str, Any] | None = None) -> set[str]:
    """The stamp every node holds after preflight (each run in a new folder of tmp_path)."""
    run = tmp_path / str(len(list(tmp_path.iterdir())))
    run.mkdir()
    playbook = run / "print-stamp.yml"
    playbook.write_text(PRINT_STAMP)
    proc = run_locally(run, playbook, {host: load_facts(host) for host in HOSTS}, extra=extra)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    found = dict((host, stamp) for stamp, host in re.findall(r"STAMP (\w*) ON (\w+)", proc.stdout))
    assert set(found) == set(HOSTS), proc.stdout[-4000:]
    return set(found.values())


def test_the_same_inputs_give_every_node_the_same_stamp_from_run_to_run(tmp_path: Path) -> None:
    first = stamps(tmp_path)
    assert len(first) == 1 and re.fullmatch(r"[0-9a-f]{64}", next(iter(first)))
    assert stamps(tmp_path) == first


def test_a_collection_variable_changes_it_one_of_the_users_own_does_not(tmp_path: Path) -> None:
    base = stamps(tmp_path)
    assert stamps(tmp_path, {"vllm_serve_max_model_len": 4096}) != base
    assert stamps(tmp_path, {"my_own_note": "anything"}) == base
