"""A restart rolls over replicas: two single-node replicas (a: spark1, b: spark2) behind the
endpoint, under a steady load through the front (load.py, 2 requests/s).

- A flag change through serve.yml: one group at a time leaves the front's rotation, drains,
  restarts, answers a completion and comes back; no request fails.
- A model switch, then an image switch, through site.yml (another model's files, the served
  name kept; another variant of the image the head builds): the weights or the image reach every
  node while both groups serve, then the same roll; no request fails. Each change keeps the ones
  before it, so that it is the only difference.
- A canary that cannot start (its engine fails at start, after vLLM's argument check passed):
  the run fails naming the first group's head, that group serves the previous configuration
  again, the second group's engine is never restarted and its files are the previous ones, and
  no request fails.

The module converges the cluster to the replicas first and back to the inventory's own layout
(tensor parallel 2 over both nodes) at the end.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ansible_run import write_overlay_inventory
from endpoint import assert_completes
from load import SteadyLoad
from nodes import NODES, env_file, node_host
from playbook_run import converged, failure, run_playbook
from settings import another_model, setting

REPLICAS = [{"name": "a", "head": NODES[0], "nodes": [NODES[0]]},
            {"name": "b", "head": NODES[1], "nodes": [NODES[1]]}]
LAYOUT = {"dgx_spark_replicas": REPLICAS, "vllm_serve_tensor_parallel_size": 1}
# The flag the roll changes: vLLM's limit of sequences in one batch.
CHANGED_FLAGS = [*setting("vllm_serve_extra_args"), "--max-num-seqs", "8"]
# An engine that fails at start, past vLLM's argument and config check (tasks/check_command.yml):
# a CPU KV cache of 100000 GiB cannot be allocated.
UNSTARTABLE_ENV = {**setting("vllm_serve_env"), "VLLM_CPU_KVCACHE_SPACE": "100000"}
RATE = 2.0
# Another image: the head builds the scenario's recipe (molecule/shared/files/serving-build) as
# another variant, under another tag.
SWITCHED_IMAGE = {"dgx_spark_image": "dgx-spark-vllm-test/serving-cpu:switched",
                  "docker_image_build_args": {**setting("docker_image_build_args"), "VARIANT": "switched"}}


def start_time(name: str) -> int:
    """When the node's serving unit last started (systemd's monotonic clock, µs)."""
    return int(node_host(name).check_output(
        "systemctl show --property=ExecMainStartTimestampMonotonic --value vllm-serve"))


def with_layout(directory: Path, **settings: Any) -> tuple[str, ...]:
    """The replicas (and these settings) over the molecule inventory, for every node."""
    return (str(write_overlay_inventory(directory, {name: {**LAYOUT, **settings} for name in NODES})),)


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The cluster on two single-node replicas; the inventory's own layout again afterwards."""
    directory = tmp_path_factory.mktemp("rolling")
    with converged(*with_layout(directory / "replicas")):
        yield directory


def test_a_flag_change_rolls_one_group_at_a_time_with_no_failed_request(replicas: Path) -> None:
    before = {name: start_time(name) for name in NODES}
    started = time.monotonic()
    with SteadyLoad(rate=RATE) as load:
        result = run_playbook("playbooks/serve.yml",
                              inventories=with_layout(replicas / "flags", vllm_serve_extra_args=CHANGED_FLAGS))
    report = load.report()
    print(f"roll of 2 groups: {time.monotonic() - started:.0f} s; load: {report.describe()}")
    output = result.stdout + result.stderr
    assert result.returncode == 0, failure(output)
    # Whitespace collapsed, no quote: the YAML result format folds a long message and doubles its quotes.
    announced = " ".join(output.split())
    assert "Rolling restart over 2 waves, each out of the front" in announced, failure(output)
    assert f"while it restarts: {NODES[0]}, then {NODES[1]}." in announced, failure(output)
    after = {name: start_time(name) for name in NODES}
    assert all(after[name] > before[name] for name in NODES), (before, after)
    # One at a time: the second group started after the first answered (at least one engine start later).
    assert after[NODES[1]] - after[NODES[0]] > 10_000_000, (after, "the groups restarted together")
    assert report.failed == 0, report.describe()
    assert report.sent >= 20, report.describe()


def switch_rolls_with_no_failed_request(directory: Path, change: str, **settings: Any) -> None:
    """site.yml with these settings under load: a roll of 2 waves, one group after the other, and
    no failed request."""
    before = {name: start_time(name) for name in NODES}
    started = time.monotonic()
    with SteadyLoad(rate=RATE) as load:
        result = run_playbook("site.yml", inventories=with_layout(directory, **settings))
    report = load.report()
    print(f"{change} over 2 groups: {time.monotonic() - started:.0f} s; load: {report.describe()}")
    output = result.stdout + result.stderr
    assert result.returncode == 0, failure(output)
    assert "Rolling restart over 2 waves" in " ".join(output.split()), failure(output)
    after = {name: start_time(name) for name in NODES}
    assert all(after[name] > before[name] for name in NODES), (before, after)
    assert after[NODES[1]] - after[NODES[0]] > 10_000_000, (after, "the groups restarted together")
    assert report.failed == 0, report.describe()
    assert report.sent >= 20, report.describe()


def test_a_model_switch_rolls_with_no_failed_request(replicas: Path) -> None:
    switch = another_model(replicas)
    switch_rolls_with_no_failed_request(replicas / "model", "model switch",
                                        vllm_serve_extra_args=CHANGED_FLAGS, **switch)
    # Each engine serves the new model's folder now (its container runs `vllm serve <that folder>`).
    for name in NODES:
        assert f"/{switch['model_name']}" in node_host(name).check_output(
            "docker inspect --format '{{json .Args}}' vllm-serve"), name


def test_an_image_switch_rolls_with_no_failed_request(replicas: Path) -> None:
    switch_rolls_with_no_failed_request(replicas / "image", "image switch", vllm_serve_extra_args=CHANGED_FLAGS,
                                        **another_model(replicas), **SWITCHED_IMAGE)
    for name in NODES:
        assert node_host(name).check_output(
            "docker inspect --format '{{.Config.Image}}' vllm-serve") == SWITCHED_IMAGE["dgx_spark_image"], name


def test_a_canary_that_cannot_start_is_rolled_back_and_the_roll_stops(replicas: Path) -> None:
    before = {name: start_time(name) for name in NODES}
    with SteadyLoad(rate=RATE) as load:
        result = run_playbook("playbooks/serve.yml", inventories=with_layout(
            replicas / "canary", vllm_serve_extra_args=CHANGED_FLAGS, vllm_serve_env=UNSTARTABLE_ENV))
    report = load.report()
    print(f"failed canary: load: {report.describe()}")
    output = result.stdout + result.stderr
    assert result.returncode != 0, failure(output)
    assert f"The new serving configuration did not come up on {NODES[0]}" in output, failure(output)
    assert "ROLLED BACK: the last known good configuration is back" in output, failure(output)
    assert "The roll stopped at this group. Not restarted" in output and NODES[1] in output, failure(output)

    # The canary serves the previous configuration; the second group was never restarted, and its
    # files are the previous ones again (what the canary failed with is nowhere on disk).
    assert start_time(NODES[1]) == before[NODES[1]], "the second group's engine was restarted"
    for name in NODES:
        assert env_file(node_host(name), "vllm-serve")["VLLM_CPU_KVCACHE_SPACE"] == \
            setting("vllm_serve_env")["VLLM_CPU_KVCACHE_SPACE"], name
    assert_completes()
    assert report.failed == 0, report.describe()
