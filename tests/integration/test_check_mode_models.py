"""`ansible-playbook site.yml --check --diff` on a first deploy of the example inventory serving
two models (dgx_spark_models: big over both nodes, small beside it on spark2), with the stand-ins
of test_check_mode_first_deploy (systemd and Docker that know nothing yet).

Every layer runs through without failing; each model gets its own units on its own nodes with its
own API port and served name; the front routes by model over both; nothing changes, and the API
key appears nowhere in the output.
"""
from __future__ import annotations

import re

import pytest

from support.example_inventory import HOSTS, VAULT, FirstDeploy, check_mode_first_deploy, recap

FABRIC = {"spark1": "192.168.200.12", "spark2": "192.168.200.13"}
MODELS = [{"name": "big", "model": "org/big", "nodes": ["spark1", "spark2"], "tensor_parallel_size": 2,
           "gpu_memory_utilization": 0.6, "api_port": 8001, "master_port": 29501, "guard_port": 29601},
          {"name": "small", "model": "org/small", "nodes": ["spark2"], "gpu_memory_utilization": 0.25,
           "api_port": 8002, "guard_port": 29602}]


@pytest.fixture(scope="module")
def first_deploy(tmp_path_factory: pytest.TempPathFactory) -> FirstDeploy:
    return check_mode_first_deploy(tmp_path_factory.mktemp("check-models"), {
        "dgx_spark_executor": "mp", "dgx_spark_models": MODELS})


def test_every_layer_runs_through_without_failing(first_deploy: FirstDeploy) -> None:
    assert first_deploy.rc == 0, first_deploy.output[-4000:]
    for host in HOSTS:
        counts = recap(first_deploy.output, host)
        assert counts["failed"] == 0 and counts["ignored"] == 0, first_deploy.output[-4000:]


def started_on(output: str, unit: str) -> set[str]:
    """The hosts the run (in check mode: would) start ``unit`` on."""
    task = f"TASK [dgx_spark.vllm.dgx_spark : Enable and start the unit, or restart it when it changed: {unit}]"
    assert task in output, unit
    section = output.split(task, 1)[1].split("TASK [", 1)[0]
    return set(re.findall(r"changed: \[(\w+)\]", section))


def test_each_model_gets_its_own_units_on_its_own_nodes(first_deploy: FirstDeploy) -> None:
    output = first_deploy.output
    assert started_on(output, "vllm-serve-big") == {"spark1", "spark2"}
    assert started_on(output, "vllm-serve-small") == {"spark2"}
    assert started_on(output, "vllm-serve-small-guard") == {"spark2"}
    assert "/etc/systemd/system/vllm-serve.service" not in output
    # each head serves its model's API on its own fabric address and port, under the model's name
    assert re.search(rf"--host {re.escape(FABRIC['spark1'])} \\\s*\+\s+--port 8001\b", output)
    assert re.search(rf"--host {re.escape(FABRIC['spark2'])} \\\s*\+\s+--port 8002\b", output)
    assert "--served-model-name big " in output and "--served-model-name small " in output
    assert '"epoch_url": "http://192.168.200.12:29601/epoch"' in output


def test_the_front_routes_by_model_to_each_models_head(first_deploy: FirstDeploy) -> None:
    output = first_deploy.output
    assert """js_var $endpoint_routes '{"big": 0, "small": 1}';""" in output
    assert f"server {FABRIC['spark1']}:8001 " in output and f"server {FABRIC['spark2']}:8002 " in output


def test_nothing_changes_and_the_key_is_not_shown(first_deploy: FirstDeploy) -> None:
    assert VAULT["vault_vllm_serve_api_key"] not in first_deploy.output
