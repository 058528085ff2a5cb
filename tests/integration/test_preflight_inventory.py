"""playbooks/preflight.yml refuses an inventory that cannot be a cluster with its own message.

The example inventory (inventories/sparks) copied and changed: spark_head without a host, or a
listed host with no machine behind it. The message must name the group or the host and the fix,
before any other task reads a group or a host (Ansible's own errors there name neither).
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from support.ansible_run import (
    REPO,
    flat_output,
    run_ansible_playbook,
    write_ansible_cfg,
    write_fact_cache,
)
from support.facts import load_facts

VAULT = {"vault_vllm_serve_api_key": "test-key-not-a-secret"}
LOCAL = {"ansible_connection": "local", "ansible_become": False, "ansible_python_interpreter": sys.executable}


def copy_inventory(tmp_path: Path, hosts: dict[str, Any], host_vars: dict[str, dict[str, Any]]) -> Path:
    """inventories/sparks with hosts.yml replaced by ``hosts`` and each host's vars extended."""
    inventory = tmp_path / "inventory"
    shutil.copytree(REPO / "inventories/sparks", inventory)
    (inventory / "hosts.yml").write_text(json.dumps(hosts))
    for host, variables in host_vars.items():
        path = inventory / "host_vars" / f"{host}.yml"
        text = path.read_text() if path.exists() else "---\n"
        path.write_text(text + "".join(f"{key}: {json.dumps(value)}\n" for key, value in variables.items()))
    return inventory


def run_preflight(tmp_path: Path, hosts: dict[str, Any], host_vars: dict[str, dict[str, Any]]) -> tuple[int, str]:
    """playbooks/preflight.yml on the copied inventory, spark1's and spark2's facts from the cache."""
    cache = write_fact_cache(tmp_path / "facts", {host: load_facts(host) for host in ("spark1", "spark2")})
    config = write_ansible_cfg(tmp_path, fact_cache=cache)
    proc = run_ansible_playbook(REPO / "playbooks/preflight.yml", [copy_inventory(tmp_path, hosts, host_vars)],
                                extra_vars=VAULT, config=config, cwd=tmp_path, timeout=300)
    return proc.returncode, flat_output(proc)


def test_a_head_group_without_a_host_is_named(tmp_path: Path) -> None:
    hosts = {"sparks": {"children": {"spark_head": {"hosts": {}},
                                     "spark_workers": {"hosts": {"spark1": None, "spark2": None}}}}}
    cached = {**LOCAL, "dgx_spark_gather_facts": False}
    rc, output = run_preflight(tmp_path, hosts, {"spark1": cached, "spark2": cached})
    assert rc != 0, output
    assert "group spark_head must hold exactly one host (it has 0: none)" in output, output[-3000:]
    assert "Fix the groups in your inventory's hosts.yml" in output
    assert "has no element 0" not in output


def test_a_host_with_no_machine_behind_it_is_named(tmp_path: Path) -> None:
    hosts = {"sparks": {"children": {"spark_head": {"hosts": {"spark1": None}},
                                     "spark_workers": {"hosts": {"spark2": None, "spark3": None}}}}}
    cached = {**LOCAL, "dgx_spark_gather_facts": False}
    # spark3: Ansible runs a Python that is not there, as on a machine that does not answer.
    absent = {**LOCAL, "ansible_python_interpreter": str(tmp_path / "no-such-python3"),
              "ansible_host_ib": "192.168.200.14", "dgx_spark_gather_facts": True}
    rc, output = run_preflight(tmp_path, hosts, {"spark1": cached, "spark2": cached, "spark3": absent})
    assert rc != 0, output
    assert "Host spark3: Ansible could not gather its facts" in output, output[-3000:]
    assert "Check that the machine is up" in output and "ansible.builtin.ping" in output
    assert "deserialization failed" not in output
