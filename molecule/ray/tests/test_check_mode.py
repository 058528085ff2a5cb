"""--check --diff is truthful: it changes nothing and reports what a run would change."""
from __future__ import annotations

import re

from cluster_state import node_states
from nodes import FABRIC, HEAD, NODES
from playbook_run import changed_per_node as recap
from playbook_run import changed_roles, overlay_inventory, preflight_tasks_not_shown_once, run_playbook


def test_check_mode_shows_a_pending_change_without_making_it(tmp_path):
    extra = overlay_inventory(tmp_path / "inventory", "spark2", "ray_worker_env:\n  NCCL_DEBUG: INFO\n")

    before = node_states(NODES)
    result = run_playbook("playbooks/ray.yml", "--check", "--diff", inventories=(extra,))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "+NCCL_DEBUG=INFO" in output
    changed = recap(output)
    assert changed["spark1"] == 0 and changed["spark2"] >= 1, changed
    assert node_states(NODES) == before


def group_vars_overlay(directory, sparks_vars: str) -> str:
    """An extra inventory that sets cluster settings in group_vars/sparks, as a user would."""
    (directory / "group_vars").mkdir(parents=True)
    (directory / "hosts.yml").write_text("sparks:\n  hosts:\n    spark1:\n    spark2:\n")
    (directory / "group_vars" / "sparks.yml").write_text(sparks_vars)
    return str(directory)


def test_a_changed_ray_port_reaches_every_unit_and_check_and_preflight_runs_once(tmp_path):
    """One home per setting: dgx_spark_ray_port set in group_vars reaches the head's unit, the
    workers' unit, the fabric check and the firewall; and a run of every layer this scenario deploys shows each
    role's preflight tasks exactly once. The layers the port does not reach report nothing in check
    mode (a converged cluster's own check-mode run, with nothing pending, is the mp scenario's
    test_check_mode.py and, for the Ray units, the pending-change test above)."""
    extra = group_vars_overlay(tmp_path / "inventory", "dgx_spark_ray_port: 6380\n")

    before = node_states(NODES)
    result = run_playbook("molecule/ray/converge.yml", "--check", "--diff", inventories=(extra,))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert node_states(NODES) == before

    assert re.search(r"^\+\s+--port=6380 \\$", output, re.M), "head unit"
    assert re.search(rf"^\+\s+--address={re.escape(FABRIC[HEAD])}:6380 \\$", output, re.M), "worker unit"
    # The fabric check connected to each peer on the configured port (a real connection).
    assert re.search(rf"ok: \[spark1\] => \(item=spark2 {re.escape(FABRIC['spark2'])}:6380\)", output), "fabric check"
    assert re.search(rf"ok: \[spark2\] => \(item=spark1 {re.escape(FABRIC[HEAD])}:6380\)", output), "fabric check"

    # The firewall closes the moved Ray ports (the GCS and the six after it).
    assert re.search(r"^\+\s+elements = \{ 6380, 6381, 6382, 6383, 6384, 6385, 6386, ", output, re.M), "firewall"
    assert preflight_tasks_not_shown_once(output) == []
    # The image from the registry, the fabric and the model copy: nothing to change for a new port
    # (dgx_spark: its shared unit task restarts the Ray and serving units on their roles' behalf).
    assert changed_roles(output) <= {"dgx_spark", "firewall", "ray_head", "ray_worker", "ray_node", "vllm_serve"}, \
        changed_roles(output)
