"""site.yml brings the firewall's table up to date before the fabric check, in the run's own order
(ansible-playbook --list-tasks: nothing is contacted).

A node whose fabric moved to another interface (a cable on the other CX7 port, a rename) keeps the
old table until the firewall role writes and loads the new one: its anti-spoof rule drops what
arrives for the node's fabric address on any interface but the old one. Were the check first, it
would fail on that table, and no site.yml run could heal the node.
"""
from __future__ import annotations

import pytest

from support.ansible_run import REPO, run_ansible_playbook

WRITE = "dgx_spark.vllm.firewall : Write the firewall table"
LOAD = "Enable the firewall and load the table now"
CHECK = "dgx_spark.vllm.ib_network : Every pair of nodes connects over the fabric"


@pytest.mark.parametrize("tags", [[], ["--tags", "ib_network"]])
def test_the_firewall_is_written_and_loaded_before_the_fabric_check(tags: list[str]) -> None:
    proc = run_ansible_playbook(REPO / "site.yml", [REPO / "inventories/sparks"],
                                extra_args=["--list-tasks", *tags], cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tasks = [line.strip() for line in proc.stdout.splitlines()]
    positions = {name: next((i for i, task in enumerate(tasks) if task.startswith(name)), None)
                 for name in (WRITE, LOAD, CHECK)}
    assert None not in positions.values(), (positions, proc.stdout)
    assert positions[WRITE] < positions[LOAD] < positions[CHECK], (positions, proc.stdout)
