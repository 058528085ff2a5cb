"""The reachable_subnet filter through Ansible itself, not called as a function.

Templar resolves ``dgx_spark.vllm.reachable_subnet`` by its collection name; ansible-playbook
runs it over Ansible's real lazy HostVars with facts from a jsonfile fact cache (as after
setup) and a templated ansible_host_ib. The filter's rules are covered by the unit tests; these
check that it is found, fed and reported the way a playbook uses it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from support.ansible_run import (
    flat_output,
    run_ansible_playbook,
    write_ansible_cfg,
    write_fact_cache,
)
from support.facts import DEPLOYED, Facts, addresses, hostvars

EXPRESSION = "{{ hostvars | dgx_spark.vllm.reachable_subnet(groups['sparks']) }}"

PLAY = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.copy:
        dest: "{{ out }}"
        content: "{{ hostvars | dgx_spark.vllm.reachable_subnet(groups['sparks']) | to_json }}"
"""


def render(variables: dict[str, Any]) -> Any:
    """Template the filter expression the way a task's argument is templated."""
    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.template(trust_as_template(EXPRESSION))


def test_through_templar(sparks: tuple[Facts, Facts]) -> None:
    variables = {"hostvars": hostvars({"spark1": sparks[0], "spark2": sparks[1]}),
                 "groups": {"sparks": ["spark1", "spark2"]}}
    result = render(variables)
    assert result["cidr"] == "192.168.200.0/24"
    assert addresses(result) == DEPLOYED
    variables["hostvars"]["spark1"]["ansible_host_ib"] = "10.1.230.180"
    with pytest.raises(AnsibleFilterError, match="ansible_host_ib=10.1.230.180"):
        render(variables)


def inventory(ib: str) -> dict[str, Any]:
    """localhost runs the play; spark1 and spark2 are only hostvars (their facts are cached)."""
    return {"all": {
        "hosts": {"localhost": {"ansible_connection": "local",
                                "ansible_python_interpreter": sys.executable}},
        "children": {"sparks": {"hosts": {
            "spark1": {"ansible_host": "spark1.lab", "ib_last_octet": 12,
                       "ansible_host_ib": ib},
            "spark2": {"ansible_host": "spark2.lab"}}}}}}


def run_play(tmp_path: Path, facts: dict[str, Facts], ib: str) -> subprocess.CompletedProcess[str]:
    """Run PLAY with ``facts`` in a fact cache, so hostvars is Ansible's real lazy HostVars and
    ansible_facts come from the cache as after setup."""
    cache = write_fact_cache(tmp_path / "facts", facts)
    config = write_ansible_cfg(tmp_path, fact_cache=cache)
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory(ib)))
    (tmp_path / "play.yml").write_text(PLAY)
    return run_ansible_playbook(tmp_path / "play.yml", [tmp_path / "hosts.yml"],
                                extra_vars={"out": str(tmp_path / "out.json")},
                                config=config, cwd=tmp_path, timeout=120)


def test_through_ansible_playbook_with_real_hostvars(sparks: tuple[Facts, Facts],
                                                     tmp_path: Path) -> None:
    # a templated ansible_host_ib, resolved lazily through HostVars
    proc = run_play(tmp_path, {"spark1": sparks[0], "spark2": sparks[1]},
                    "192.168.200.{{ ib_last_octet }}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["cidr"] == "192.168.200.0/24"
    assert addresses(result) == DEPLOYED


def test_through_ansible_playbook_error(sparks: tuple[Facts, Facts], tmp_path: Path) -> None:
    proc = run_play(tmp_path, {"spark1": sparks[0], "spark2": sparks[1]}, "10.1.230.180")
    assert proc.returncode != 0
    flat = flat_output(proc)
    assert "host 'spark1' sets ansible_host_ib=10.1.230.180" in flat
    assert "192.168.200.0/24 (spark1: 192.168.200.12 on enp1s0f0np0" in flat
