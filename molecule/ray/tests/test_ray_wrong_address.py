"""The seed's trap, reproduced and healed: a worker whose Ray node advertises the head's fabric address.

Set through the roles' own variables (ray_worker_extra_args), as a user
copying the head's settings would, then (re)starting the Ray layer
(playbooks/ray.yml). The run must fail in bounded time naming the missing node,
with both nodes' Ray journals; site.yml with the right settings then heals the
cluster and serving. Runs last: it breaks the cluster on purpose.
"""
from __future__ import annotations

import time

from endpoint import seconds_to_first_completion
from nodes import FABRIC, HEAD, node_host
from ansible_run import write_overlay_inventory
from playbook_run import failure, run_playbook

WAIT = 60  # ray_node_wait_timeout for the bad run, seconds
RAYLET = "'[/]raylet/raylet '"  # pgrep/pkill pattern: Ray's raylet binary, with arguments after it


def test_worker_advertising_the_head_address_fails_in_bounded_time_with_both_journals(tmp_path):
    wait = f"ray_node_wait_timeout: {WAIT}\n"  # the head waits, and says what it found
    bad = str(write_overlay_inventory(tmp_path / "inventory", {
        "spark1": wait,
        "spark2": wait + f"ray_worker_extra_args: ['--node-ip-address={FABRIC[HEAD]}']\n"}))
    started = time.monotonic()
    result = run_playbook("playbooks/ray.yml", inventories=(bad,))
    seconds = time.monotonic() - started
    output = result.stdout + result.stderr
    print(f"playbooks/ray.yml with the worker's Ray node on the head's address failed after {seconds:.0f} s")
    assert result.returncode != 0, output[-3000:]
    # the fatal message, with the YAML callback's line folding undone
    message = " ".join(output[output.find("fatal: "):].split())
    print(message[:3000])
    assert "Missing: spark2." in message, failure(output)
    assert "===== spark1: journalctl --unit ray-head" in message, failure(output)
    assert "===== spark2: journalctl --unit ray-worker" in message, failure(output)
    assert seconds < WAIT + 300, seconds  # the wait, preflight and the units' restarts, on a loaded machine


def test_site_heals_the_cluster_and_serving():
    # Stopping the bad worker can drain the head's raylet (Ray drains the node
    # at the address the worker advertised: the head's), and `ray start --block`
    # runs on without it. Whether it did depends on timing; stop the head's
    # raylet the way a drain ends it, so that site.yml always meets that case.
    head = node_host(HEAD)  # the node sees its containers' processes
    head.run(f"pkill --signal TERM --full {RAYLET}")  # rc 1 if it is already gone
    gone = time.monotonic() + 30
    while head.run(f"pgrep --full {RAYLET}").rc == 0:
        assert time.monotonic() < gone, "the head's raylet did not stop on SIGTERM"
        time.sleep(1)
    time.sleep(3)  # `ray start --block` looks at its children every second
    assert head.service("ray-head").is_running, "the unit should still look active without its raylet"
    started = time.monotonic()
    result = run_playbook("site.yml", timeout=900)
    output = result.stdout + result.stderr
    assert result.returncode == 0, failure(output)
    print(f"site.yml healed the cluster in {time.monotonic() - started:.0f} s")
    assert "Restart the Ray units, the raylet being gone from ray-head" in output, failure(output)
    assert seconds_to_first_completion(time.monotonic(), deadline=120) is not None
