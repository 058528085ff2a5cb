"""One tensor-parallel group over both nodes (no replica to serve meanwhile): a flag change
through serve.yml, and a model switch through site.yml (another model's files, the served name
kept), under a steady load (load.py, 2 requests/s) cost no more than the engine's own start.
Everything that can happen while the old engine serves happens first (the image and weights
checked, units rendered, vLLM's own check of the new command); the gap is only the restart, and
clients see 503 with Retry-After from the front there, never a refused connection or another
error.

A forced restart with nothing changed (serve.yml alone, after a converge with the inventory's
own configuration) restarts serving as it is; issue 26's goal, that the old engine begins to stop
at most 10 s into the run and the run costs at most 1.2 x the floor, is measured and reported as
an expected failure until it is met.

What the gap is held against: the engines' own restart inside the same run, read from the nodes'
journals (the longest stop, systemd's Stopping to Stopped, plus the start from the last node's
Starting to the head's API answering), so that both sides share the moment's load; what the run
adds is Ansible's part (the rotation, the turn between stop and start, the front serving again).
The floor, both units restarted by hand to the first completion right before each test's run, is
printed beside it and is what the forced restart is held against: it swung by 25 % between
restarts minutes apart under the suite's other lane (the same engine's start 51 to 76 s), more
than the 10 % the gap may add. Each test leaves the inventory's own configuration in place again
at its end.
"""
from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from ansible_run import write_overlay_inventory
from endpoint import assert_completes, seconds_to_first_completion
from load import SteadyLoad
from nodes import NODES, node_host, serving_marks_since, serving_stopping_at
from playbook_run import failure, run_playbook
from settings import another_model, setting

RATE = 2.0
CHANGED_FLAGS = [*setting("vllm_serve_extra_args"), "--max-num-seqs", "8"]
# The gap may exceed the engines' own restart by this much (Ansible's turns around and between
# stop and start).
GAP_OVER_ENGINES_RESTART = 1.1
# A forced restart with nothing changed: seconds before the old engine begins to stop, and the
# whole run against the floor.
RESTART_BEGINS_WITHIN = 10.0
RESTART_RUN_OVER_FLOOR = 1.2


def head_engine_started_at() -> float:
    """When the head's serving container started (Unix time): the restart's start, give or take its stop."""
    started_at = node_host(NODES[0]).check_output("docker inspect --format '{{.State.StartedAt}}' vllm-serve")
    # Docker gives nanoseconds; fromisoformat takes up to microseconds.
    return datetime.fromisoformat(re.sub(r"(\.\d{6})\d*", r"\1", started_at)).timestamp()


def floor_seconds() -> float:
    """Both serving units restarted at once by hand, to the first completion through the front."""
    started = time.monotonic()
    restarts = [threading.Thread(target=node_host(name).check_output, args=("systemctl restart vllm-serve",))
                for name in NODES]
    for restart in restarts:
        restart.start()
    for restart in restarts:
        restart.join()
    seconds = seconds_to_first_completion(started, deadline=300)
    assert seconds is not None, "the units restarted by hand answered no completion within 300 s"
    return seconds


def engines_own_restart(since: int) -> tuple[float, str]:
    """The engines' own part of the restart a run made since `since`, from the nodes' journals: the
    longest stop (the drain and the container's exit) plus the start from the last node's Starting
    to the head's API answering. Seconds, and how they add up."""
    marks = {name: serving_marks_since(name, since) for name in NODES}
    missing = [f"{name} {mark}" for name in NODES for mark in ("stopping", "stopped", "starting")
               if mark not in marks[name]] + ([] if "ready" in marks[NODES[0]] else [f"{NODES[0]} ready"])
    assert not missing, f"the journals lack the restart's marks: {missing} ({marks})"
    stop = max(node_marks["stopped"] - node_marks["stopping"] for node_marks in marks.values())
    start = marks[NODES[0]]["ready"] - max(node_marks["starting"] for node_marks in marks.values())
    return stop + start, f"stop {stop:.1f} s + start {start:.1f} s"


@pytest.fixture
def floor() -> float:
    """The engine's own start, right before each test's run: the machine's load (the suite's other
    lane) drifts over minutes, and a floor from another test's time is not this run's."""
    return floor_seconds()


@pytest.fixture
def inventory_at_the_end() -> Iterator[None]:
    yield
    result = run_playbook("site.yml")
    assert result.returncode == 0, failure(result.stdout + result.stderr)
    assert_completes()


def update_under_load(playbook: str, overlay: Path, floor: float, change: str) -> None:
    """Run the playbook with the overlay under the steady load; assert what clients may see."""
    started, started_wall = time.monotonic(), time.time()
    with SteadyLoad(rate=RATE) as load:
        result = run_playbook(playbook, inventories=(str(overlay),))
        # Until it serves again through the front (the run waited for it already).
        seconds_to_first_completion(time.monotonic(), deadline=60)
    run_seconds = time.monotonic() - started
    report = load.report()
    gap = report.failing_seconds(1 / RATE)
    restart_began = head_engine_started_at() - started_wall
    output = result.stdout + result.stderr
    assert result.returncode == 0, failure(output)
    engines, engines_parts = engines_own_restart(int(started_wall))
    print(f"one group, {change} under load: run {run_seconds:.0f} s, new head engine started "
          f"{restart_began:.1f} s into it, gap {gap:.1f} s, the engines' own restart {engines:.1f} s ({engines_parts}; "
          f"gap/own {gap / engines:.2f}), floor by hand {floor:.1f} s (gap/floor {gap / floor:.2f}, run/floor "
          f"{run_seconds / floor:.2f}); load: {report.describe()}; failures: {dict(report.failure_kinds)}")
    assert set(report.failure_kinds) <= {"503 service_unavailable"}, report.describe()
    assert gap <= GAP_OVER_ENGINES_RESTART * engines, (
        f"gap {gap:.1f} s > {GAP_OVER_ENGINES_RESTART} x the engines' own restart {engines:.1f} s ({engines_parts})")


def test_a_flag_change_costs_only_the_restart_and_clients_get_503_meanwhile(
        tmp_path: Path, floor: float, inventory_at_the_end: None) -> None:
    overlay = write_overlay_inventory(tmp_path, {name: {"vllm_serve_extra_args": CHANGED_FLAGS} for name in NODES})
    update_under_load("playbooks/serve.yml", overlay, floor, "flag change")


def test_a_model_switch_costs_only_the_restart_and_clients_get_503_meanwhile(
        tmp_path: Path, floor: float, inventory_at_the_end: None) -> None:
    switch = another_model(tmp_path)
    overlay = write_overlay_inventory(tmp_path, {name: switch for name in NODES})
    update_under_load("site.yml", overlay, floor, "model switch")


def test_a_forced_restart_with_nothing_changed_costs_no_more_than_the_engines_start(floor: float) -> None:
    # The test before converged the inventory's own configuration (inventory_at_the_end).
    started, started_wall = time.monotonic(), time.time()
    result = run_playbook("playbooks/serve.yml")
    seconds_to_first_completion(time.monotonic(), deadline=60)
    run_seconds = time.monotonic() - started
    output = result.stdout + result.stderr
    assert result.returncode == 0, failure(output)
    restart_began = serving_stopping_at(NODES[0]) - started_wall
    engines, engines_parts = engines_own_restart(int(started_wall))
    measured = (f"the old head engine began to stop {restart_began:.1f} s into the run, run {run_seconds:.1f} s, "
                f"floor {floor:.1f} s (run/floor {run_seconds / floor:.2f}), the engines' own restart {engines:.1f} s "
                f"({engines_parts}; run/own {run_seconds / engines:.2f})")
    print(f"one group, forced restart with nothing changed: {measured}")
    # Flattened: the callback wraps long messages.
    assert "serving restarts as it is" in " ".join(output.split()), failure(output)
    missed = [f"the restart began {restart_began:.1f} s into the run (goal <= {RESTART_BEGINS_WITHIN:.0f} s)"
              ] if restart_began > RESTART_BEGINS_WITHIN else []
    missed += [f"the run took {run_seconds / floor:.2f} x the floor (goal <= {RESTART_RUN_OVER_FLOOR})"
               ] if run_seconds > RESTART_RUN_OVER_FLOOR * floor else []
    if missed:
        # Issue 26's goal for a restart, open: the restart itself worked (asserted above).
        pytest.xfail("issue 26 deliverable 3 not met yet: " + "; ".join(missed) + f" ({measured})")
