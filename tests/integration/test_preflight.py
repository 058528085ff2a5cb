"""playbooks/preflight.yml against the example inventory, with recorded facts.

The inventory is inventories/sparks itself (spark1 head at 10.1.230.180 with
fabric 192.168.200.12, spark2 at 192.168.200.13), overlaid only to run locally
from a fact cache holding setup-module facts of two Sparks. Each bad input must
fail with a message that names the host, the variable and the fix.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.example_inventory import run_preflight


def test_example_inventory_passes(tmp_path: Path) -> None:
    rc, output = run_preflight(tmp_path)
    assert rc == 0, output
    assert "changed=0" in output and "failed=0" in output


def test_without_the_collection_firewall_preflight_names_the_ports_to_close(tmp_path: Path) -> None:
    rc, output = run_preflight(tmp_path, extra={"firewall_enabled": False})
    assert rc == 0, output
    assert "firewall_enabled is false: the collection does not filter. Close TCP ports 6379, 6380" in output
    assert "10002-10199" in output and "to everything but the fabric 192.168.200.0/24" in output


def test_serving_without_an_api_key_is_an_explicit_choice(tmp_path: Path) -> None:
    rc, output = run_preflight(tmp_path, extra={"vault_vllm_serve_api_key": "",
                                                "vllm_serve_allow_no_api_key": True})
    assert rc == 0, output


@pytest.mark.parametrize("case, host_vars, extra, hosts, expected", [
    ("head ansible_host_ib on its management address",
     {"spark1": {"ansible_host_ib": "10.1.230.180"}}, None, None,
     ["host 'spark1' sets ansible_host_ib=10.1.230.180", "192.168.200.0/24", "host_vars/spark1.yml"]),
    ("ansible_host_ib on no interface",
     {"spark2": {"ansible_host_ib": "192.168.200.99"}}, None, None,
     ["host 'spark2' sets ansible_host_ib=192.168.200.99", "no interface of spark2 holds that address"]),
    ("ansible_host_ib not an address",
     {"spark2": {"ansible_host_ib": "192.168.200"}}, None, None,
     ["host 'spark2' sets ansible_host_ib='192.168.200', which is not an IPv4 address"]),
    ("two heads", None, None,
     {"all": {"children": {"spark_head": {"hosts": {"spark2": {}}}}}},
     ["group spark_head must hold exactly one host (it has 2: spark1, spark2)", "hosts.yml"]),
    ("tensor x pipeline parallel does not match the GPUs", None,
     {"vllm_serve_tensor_parallel_size": 4}, None,
     ["vllm_serve_tensor_parallel_size (4) x vllm_serve_pipeline_parallel_size (1) must equal the GPUs of the "
      "cluster: 2 nodes x dgx_spark_gpus_per_node 1 = 2"]),
    ("GPUs per node not a number", None, {"dgx_spark_gpus_per_node": "one"}, None,
     ["[spark1]", "argument 'dgx_spark_gpus_per_node' is of type str and we were unable to convert to int"]),
    ("no GPUs per node", None, {"dgx_spark_gpus_per_node": 0}, None,
     ["dgx_spark_gpus_per_node=0 is not a positive whole number", "group_vars/sparks"]),
    ("no model", None, {"model_name": ""}, None,
     ["Host spark1: model_name is empty"]),
    ("unknown executor", None, {"dgx_spark_executor": "slurm"}, None,
     ["[spark1]", "value of dgx_spark_executor must be one of: ray, mp, got: slurm"]),
    ("two cluster ports the same", None, {"dgx_spark_master_port": 6379}, None,
     ["The cluster's ports must be distinct TCP ports", "dgx_spark_master_port", "group_vars/sparks"]),
    ("a unit name systemd cannot take", None, {"dgx_spark_serve_unit": "vllm serve; rm -rf /"}, None,
     ["Unit names become systemd units and container names", "dgx_spark_serve_unit", "group_vars/sparks"]),
    ("archive source without an archive", None, {"docker_image_source": "archive"}, None,
     ["docker_image_source=archive needs docker_image_archive"]),
    ("a model folder the controller does not have", None,
     {"model_download": False, "model_src": "/nonexistent/tiny-llama"}, None,
     ["The model cannot be sent: model_src=/nonexistent/tiny-llama is not a folder on the controller",
      "ansible.posix.synchronize"]),
    ("image name missing", None, {"dgx_spark_image": ""}, None,
     ["dgx_spark_image is not an image name"]),
    ("no API key", None, {"vault_vllm_serve_api_key": ""}, None,
     ["Host spark1: vllm_serve_api_key is empty", "ansible-vault create", "vllm_serve_allow_no_api_key: true"]),
    ("Ray's token on two lines", None, {"dgx_spark_ray_auth_token": "abc def"}, None,
     ["dgx_spark_ray_auth_token printable ASCII without spaces", "openssl rand -hex 32"]),
    ("the API on one of Ray's ports", None, {"dgx_spark_api_port": 10050}, None,
     ["\"dgx_spark_api_port\": 10050", "ports Ray also takes", "10002-10199", "group_vars/sparks"]),
    ("SSH on one of the internal ports", {"spark2": {"ansible_port": 6381}}, None, None,
     ["Host spark2: the internal ports 6381-6381 would include SSH (6381)", "must stay open on the LAN"]),
    ("the fabric gate on the rendezvous port", None, {"dgx_spark_fabric_gate_port": 29501}, None,
     ["The cluster's ports must be distinct TCP ports", "\"dgx_spark_fabric_gate_port\": 29501"]),
    ("a fabric gate action it does not know", None, {"ib_network_bandwidth_action": "ignore"}, None,
     ["the fabric gate wants ib_network_bandwidth_action fail or warn (it is ignore)"]),
    ("a fabric gate size that could exhaust a GB10's memory", None, {"ib_network_bandwidth_sizes_mb": [512, 8192]},
     None, ["ib_network_bandwidth_sizes_mb one to eight sizes of more than 0 and at most 4096 MiB ([512, 8192]",
            "group_vars/sparks"]),
    ("a GID index that is not a number", {"spark2": {"dgx_spark_nccl_ib_gid_index": "three"}}, None, None,
     ["fabric_env: host spark2: dgx_spark_nccl_ib_gid_index='three' is not a GID index (0 or more)",
      "set a whole number in host_vars"]),
])
def test_bad_input_is_refused_naming_host_variable_and_fix(
        tmp_path: Path, case: str, host_vars: dict[str, dict[str, Any]] | None,
        extra: dict[str, Any] | None, hosts: dict[str, Any] | None, expected: list[str]) -> None:
    rc, output = run_preflight(tmp_path, host_vars, extra, hosts)
    assert rc != 0, f"{case}: preflight passed"
    for needle in expected:
        assert needle in output, f"{case}: {needle!r} not in output:\n{output[-3000:]}"
