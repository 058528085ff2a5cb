"""playbooks/preflight.yml against the example inventory, with recorded facts.

The inventory is inventories/sparks itself (spark1 head at 10.1.230.180 with
fabric 192.168.200.12, spark2 at 192.168.200.13), overlaid only to run locally
from a fact cache holding setup-module facts of two Sparks. Each bad input must
fail with a message that names the host, the variable and the fix.
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
from ansible.plugins.loader import cache_loader, init_plugin_loader
from ansible.utils.collection_loader import AnsibleCollectionConfig

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "unit" / "plugins" / "filter" / "fixtures"

if AnsibleCollectionConfig.collection_finder is None:
    init_plugin_loader([str(REPO / ".collections")])


def run_preflight(tmp_path: pathlib.Path, host_vars: dict[str, dict] | None = None,
                  extra: dict | None = None, hosts: dict | None = None) -> tuple[int, str]:
    cache = tmp_path / "facts"
    cache.mkdir()
    writer = cache_loader.get("ansible.builtin.jsonfile", _uri=str(cache))
    for host in ("spark1", "spark2"):
        # stored as the setup module returns them, with the ansible_ prefix
        facts = json.loads((FIXTURES / f"{host}.json").read_text())
        writer.set(host, {k if k.startswith("_") else f"ansible_{k}": v for k, v in facts.items()})
    overlay = tmp_path / "overlay"
    (overlay / "host_vars").mkdir(parents=True)
    (overlay / "hosts.yml").write_text(json.dumps(hosts or {"all": {"hosts": {"spark1": {}, "spark2": {}}}}))
    for host in ("spark1", "spark2"):
        local = {"ansible_connection": "local", "ansible_become": False,
                 "ansible_python_interpreter": sys.executable, **(host_vars or {}).get(host, {})}
        (overlay / "host_vars" / f"{host}.yml").write_text(json.dumps(local))
    (tmp_path / "ansible.cfg").write_text(
        f"[defaults]\ncollections_path = {REPO / '.collections'}\n"
        f"fact_caching = ansible.builtin.jsonfile\nfact_caching_connection = {cache}\n")
    env = {**os.environ, "ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".collections")}
    command = [str(pathlib.Path(sys.executable).parent / "ansible-playbook"), str(REPO / "playbooks/preflight.yml"),
               "-i", str(REPO / "inventories/sparks"), "-i", str(overlay),
               "-e", json.dumps({"dgx_spark_gather_facts": False, **(extra or {})})]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    return proc.returncode, re.sub(r"\s+", " ", proc.stdout + proc.stderr)


def test_example_inventory_passes(tmp_path):
    rc, output = run_preflight(tmp_path)
    assert rc == 0, output
    assert "changed=0" in output and "failed=0" in output


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
     ["dgx_spark_gpus_per_node=one is not a positive whole number"]),
    ("no model", None, {"vllm_serve_model": ""}, None,
     ["Host spark1: vllm_serve_model is empty"]),
    ("unknown executor", None, {"vllm_serve_executor": "slurm"}, None,
     ["Host spark1: vllm_serve_executor=slurm is not an executor this role knows", "ray", "mp"]),
    ("archive source without an archive", None, {"docker_image_source": "archive"}, None,
     ["docker_image_source=archive needs docker_image_archive"]),
    ("image name missing", None, {"dgx_spark_image": ""}, None,
     ["dgx_spark_image is not an image name"]),
])
def test_bad_input_is_refused_naming_host_variable_and_fix(tmp_path, case, host_vars, extra, hosts, expected):
    rc, output = run_preflight(tmp_path, host_vars, extra, hosts)
    assert rc != 0, f"{case}: preflight passed"
    for needle in expected:
        assert needle in output, f"{case}: {needle!r} not in output:\n{output[-3000:]}"
