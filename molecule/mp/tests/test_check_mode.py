"""site.yml --check --diff on the serving cluster: truthful (nothing would change, nothing
changed), and every role's preflight tasks run once in a whole site run."""
from __future__ import annotations

from cluster_state import node_states
from nodes import NODES
from playbook_run import changed_per_node, failure, preflight_tasks_not_shown_once, run_playbook


def test_a_site_run_in_check_mode_changes_nothing_and_checks_each_role_once():
    before = node_states(NODES)
    result = run_playbook("site.yml", "--check", "--diff")
    output = result.stdout + result.stderr
    assert result.returncode == 0, failure(output)
    assert changed_per_node(output) == {name: 0 for name in NODES}, failure(output)
    assert node_states(NODES) == before
    assert preflight_tasks_not_shown_once(output) == []
