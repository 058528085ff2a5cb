"""`ansible-playbook site.yml --check --diff` on a first deploy of the example inventory.

inventories/sparks as it is (pull the image, download the model on the head, Ray executor),
with the recorded facts of the two Sparks, run locally (as test_preflight.py does) against
nodes that hold nothing yet: systemd and the Docker engine are stand-ins that know no unit and
no image (support/fresh_node.py), the data folder an empty temporary one. The run must go
through every layer without failing, say what it would change, and change nothing: no file
under the data folder, no systemctl verb that acts, no Docker request but reads.

Left out, because they need the real fabric: the reachability check (ib_network_verify, it
listens on and connects to the Sparks' fabric addresses). The fabric gate and the readiness
wait skip themselves in check mode.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from support.example_inventory import HOSTS, FirstDeploy, check_mode_first_deploy, recap
from support.fresh_node import READ_ONLY_SYSTEMCTL


@pytest.fixture(scope="module")
def first_deploy(tmp_path_factory: pytest.TempPathFactory) -> FirstDeploy:
    return check_mode_first_deploy(tmp_path_factory.mktemp("check"), {})


def test_every_layer_runs_through_without_failing(first_deploy: FirstDeploy) -> None:
    assert first_deploy.rc == 0, first_deploy.output[-4000:]
    for host in HOSTS:
        assert recap(first_deploy.output, host)["failed"] == 0, first_deploy.output[-4000:]
        # An ignored failure would hide a real one, and marks other hosts failed (any_errors_fatal).
        assert recap(first_deploy.output, host)["ignored"] == 0, first_deploy.output[-4000:]
    # Serving's play ran, and the last one, the monitoring's.
    assert "PLAY [Serve | one vLLM endpoint for the cluster]" in first_deploy.output
    assert "PLAY [Monitoring | a node exporter on every node, Prometheus on the head]" in first_deploy.output


def test_it_says_what_it_would_change(first_deploy: FirstDeploy) -> None:
    for host in HOSTS:
        assert recap(first_deploy.output, host)["changed"] > 0
    # The units' diffs show what would be written.
    assert "+ExecStart=/usr/bin/docker run --rm --name ray-head \\ +" in first_deploy.output
    assert "+ --entrypoint ray \\ +" in first_deploy.output
    assert "would receive the model Qwen/Qwen3.5-122B-A10B-FP8 from spark1" in first_deploy.output


def test_it_changes_nothing(first_deploy: FirstDeploy) -> None:
    for data_dir in first_deploy.data_dirs:
        assert not data_dir.exists(), f"{data_dir} was created in check mode"
    acting = [verb for verb in first_deploy.systemctl if verb not in READ_ONLY_SYSTEMCTL]
    assert acting == [], f"systemctl asked to act in check mode: {acting}"
    assert first_deploy.systemctl, "the stand-in systemctl was never asked: the test would not see an action"
    writes = [request for request in first_deploy.docker_requests
              if not request.startswith(("GET ", "HEAD "))]
    assert writes == [], f"Docker asked to change something in check mode: {writes}"
    assert first_deploy.docker_requests, "the stand-in engine was never asked: the test would not see a write"


def test_a_run_limited_to_one_layer_by_tags_runs_through(tmp_path: Path) -> None:
    """site.yml --tags firewall (as the firewall and fabric tests run it): the argument checks of the
    roles whose tasks it skips still run, and their inputs must not need those tasks' results."""
    limited = check_mode_first_deploy(tmp_path, {}, ("--tags", "firewall"))
    assert limited.rc == 0, limited.output[-4000:]
    assert "TASK [dgx_spark.vllm.firewall : " in limited.output
    assert "TASK [dgx_spark.vllm.vllm_serve : Install" not in limited.output
