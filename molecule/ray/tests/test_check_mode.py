"""--check --diff is truthful: it changes nothing and reports what a run would change."""
from __future__ import annotations

import re

from cluster_state import node_states
from playbook_run import overlay_inventory, run_playbook

NODES = ["spark1", "spark2"]


def recap(output: str) -> dict[str, int]:
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(spark\d)\s+:.*?changed=(\d+)", output, re.M)}


def test_check_mode_on_a_converged_cluster_reports_nothing():
    before = node_states(NODES)
    # what converge ran: preflight, fabric, image, Ray
    result = run_playbook("molecule/ray/converge.yml", "--check", "--diff")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert recap(output) == {"spark1": 0, "spark2": 0}, output[-4000:]
    assert node_states(NODES) == before


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
