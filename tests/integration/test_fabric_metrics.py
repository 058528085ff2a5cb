"""fabric.prom (roles/ib_network/tasks/metrics.yml) through Ansible, without a cluster: the example
inventory's two Sparks run locally from their recorded facts (as test_fabric_gate_verdict.py does),
each with a metrics folder of its own. spark1's cabled port has two twins, whose MTU the facts
tell; spark2's fabric is managed by netplan with an MTU of its own. The file names every fabric
interface with the MTU the monitoring should expect, parses, and a second run changes nothing."""
from __future__ import annotations

from pathlib import Path

import pytest

from support.ansible_run import flat_output
from support.example_inventory import HOSTS, recap, run_locally
from support.facts import load_facts
from support.textfile import check_metrics, samples

PLAYBOOK = """\
- name: The base role's preflight (the facts the fabric's metrics read)
  hosts: sparks
  gather_facts: false
  roles: [dgx_spark.vllm.dgx_spark]

- name: The fabric's metrics
  hosts: sparks
  gather_facts: false
  tasks:
    - name: Both twins of spark1's cabled port (this machine has no CX7 for the preflight to read)
      ansible.builtin.set_fact:
        dgx_spark_fabric_twins: [enp1s0f0np0, enP2p1s0f0np0]
      when: inventory_hostname == 'spark1'
    - name: Metrics
      ansible.builtin.include_role:
        name: dgx_spark.vllm.ib_network
        tasks_from: metrics.yml
"""
MANAGED = {"ib_network_manage": True, "ib_network_mtu": 9000,
           "ib_network_interfaces": [{"device": "enp1s0f0np0", "address": "192.168.200.13/24", "mtu": 4092}]}


def run(tmp_path: Path, name: str) -> str:
    """A run of the playbook, its files under tmp_path/name; the nodes' metrics under tmp_path/metrics."""
    (tmp_path / name).mkdir()
    (tmp_path / name / "fabric.yml").write_text(PLAYBOOK)
    host_vars = {"spark1": {}, "spark2": dict(MANAGED)}
    for host in HOSTS:
        host_vars[host]["dgx_spark_metrics_dir"] = str(tmp_path / "metrics" / host)
    proc = run_locally(tmp_path / name, tmp_path / name / "fabric.yml",
                       {host: load_facts(host) for host in HOSTS}, host_vars=host_vars)
    output = flat_output(proc)
    assert proc.returncode == 0, output[-3000:]
    return output


@pytest.fixture(scope="module")
def twice(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    tmp_path = tmp_path_factory.mktemp("fabric-metrics")
    run(tmp_path, "first")
    return tmp_path, run(tmp_path, "second")


def expected_mtu(tmp_path: Path, host: str) -> dict[str, float]:
    prom = tmp_path / "metrics" / host / "fabric.prom"
    assert prom.stat().st_mode & 0o777 == 0o644
    text = prom.read_text()
    check_metrics(text)
    found = samples(text)
    assert {name for name, _labels in found} == {"dgx_spark_fabric_expected_mtu_bytes"}
    return {dict(labels)["device"]: value for (_name, labels), value in found.items()}


def test_both_twins_of_the_cabled_port_with_the_mtu_they_have(twice: tuple[Path, str]) -> None:
    assert expected_mtu(twice[0], "spark1") == {"enp1s0f0np0": 9000, "enP2p1s0f0np0": 9000}


def test_a_managed_fabric_expects_the_mtu_netplan_gives_it(twice: tuple[Path, str]) -> None:
    assert expected_mtu(twice[0], "spark2") == {"enp1s0f0np0": 4092}


def test_a_second_run_changes_nothing(twice: tuple[Path, str]) -> None:
    for host in HOSTS:
        assert recap(twice[1], host)["changed"] == 0, twice[1][-3000:]
