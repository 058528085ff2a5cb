"""The seed's trap, reproduced and healed: a worker whose Ray node advertises the head's fabric address.

Set through the roles' own variables (ray_worker_extra_args), as a user
copying the head's settings would. The run must fail in bounded time naming the
missing node, with both nodes' Ray journals; site.yml with the right settings
then heals the cluster and serving. Runs last: it breaks the cluster on purpose.
"""
from __future__ import annotations

import time

from endpoint import seconds_to_first_completion
from nodes import FABRIC
from ansible_run import write_overlay_inventory
from playbook_run import failure, run_playbook

WAIT = 60  # ray_node_wait_timeout for the bad run, seconds


def test_worker_advertising_the_head_address_fails_in_bounded_time_with_both_journals(tmp_path):
    wait = f"ray_node_wait_timeout: {WAIT}\n"  # the head waits, and says what it found
    bad = str(write_overlay_inventory(tmp_path / "inventory", {
        "spark1": wait,
        "spark2": wait + f"ray_worker_extra_args: ['--node-ip-address={FABRIC['spark1']}']\n"}))
    started = time.monotonic()
    result = run_playbook("site.yml", inventories=(bad,))
    seconds = time.monotonic() - started
    output = result.stdout + result.stderr
    print(f"site.yml with the worker's Ray node on the head's address failed after {seconds:.0f} s")
    assert result.returncode != 0, output[-3000:]
    # the fatal message, with the YAML callback's line folding undone
    message = " ".join(output[output.find("fatal: "):].split())
    print(message[:3000])
    assert "Missing: spark2." in message, failure(output)
    assert "===== spark1: journalctl --unit ray-head" in message, failure(output)
    assert "===== spark2: journalctl --unit ray-worker" in message, failure(output)
    assert seconds < WAIT + 300, seconds  # the wait, and site.yml's steps before the Ray layer


def test_site_heals_the_cluster_and_serving():
    started = time.monotonic()
    result = run_playbook("site.yml")
    assert result.returncode == 0, failure(result.stdout + result.stderr)
    print(f"site.yml healed the cluster in {time.monotonic() - started:.0f} s")
    assert seconds_to_first_completion(time.monotonic(), deadline=120) is not None
