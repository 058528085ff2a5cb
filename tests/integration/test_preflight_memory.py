"""playbooks/preflight.yml's memory fit on the example inventory, with recorded facts (as in
test_preflight.py). The nodes of these runs are this machine, so the expected numbers are read
from its /proc/meminfo, as the role reads them on a node. A model that cannot fit is refused on
every node with the numbers, the variables and the fix, and nothing changes."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.ansible_run import (REPO, flat_output, run_ansible_playbook, write_ansible_cfg, write_fact_cache,
                                 write_overlay_inventory)
from support.example_inventory import HOSTS, VAULT, local_host_vars, recap, run_preflight
from support.facts import load_facts

GIB = 1024**3
PLAY = """\
- hosts: localhost
  gather_facts: false
  vars_files: [{defaults}]
  tasks:
    - ansible.builtin.debug:
        msg: "utilization={{{{ vllm_serve_gpu_memory_utilization | to_json }}}}"
"""


def mem_total_gib() -> float:
    """This machine's MemTotal in GiB: the nodes of these runs are it."""
    found = re.search(r"MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text())
    assert found
    return int(found.group(1)) * 1024 / GIB


def test_a_model_that_cannot_fit_is_refused_with_the_numbers_and_nothing_changes(tmp_path: Path) -> None:
    """inventories/sparks serves over two nodes with tensor parallel 2: 4000 GiB is 2000 per node."""
    rc, output = run_preflight(tmp_path, extra={"vllm_serve_model_weights_gib": 4000})
    assert rc != 0, "a 4000 GiB model passed"
    total = mem_total_gib()
    for host in HOSTS:
        assert (f"Host {host}: the weights need 2000.0 GiB per node (vllm_serve_model_weights_gib 4000.0 GiB / 2, "
                "vllm_serve_tensor_parallel_size x vllm_serve_pipeline_parallel_size / dgx_spark_gpus_per_node), "
                f"more than the {total - 8:.1f} GiB it can give (MemTotal {total:.1f} GiB - "
                "vllm_serve_memory_reserve_gib 8)") in output
        assert recap(output, host)["changed"] == 0
        assert recap(output, host)["failed"] + recap(output, host).get("skipped", 0) > 0
    assert "serve it over more nodes" in output and "quantized" in output


def test_on_a_gpu_node_the_estimate_is_shown(tmp_path: Path) -> None:
    """A node with a GPU (what the base role learns from /dev/nvidiactl, given here), at the
    example inventory's 0.85; no reserve, so that this machine's memory always suffices."""
    rc, output = run_preflight(tmp_path, extra={"dgx_spark_node_has_gpu": True, "vllm_serve_model_weights_gib": 2,
                                                "vllm_serve_memory_reserve_gib": 0})
    assert rc == 0, output
    total = mem_total_gib()
    engine = 0.85 * total
    for host in HOSTS:
        assert (f"{host}: weights 1.0 GiB per node (from vllm_serve_model_weights_gib); vLLM takes {engine:.1f} GiB "
                f"(vllm_serve_gpu_memory_utilization 0.85 x MemTotal {total:.1f} GiB), {engine - 1:.1f} GiB left "
                "for the KV cache and activations") in output


@pytest.mark.parametrize("gpu, shown", [(True, "0.8"), (False, "null")])
def test_the_default_utilization_is_0_8_on_a_gpu_node_and_vllms_own_elsewhere(
        tmp_path: Path, gpu: bool, shown: str) -> None:
    playbook = tmp_path / "default.yml"
    playbook.write_text(PLAY.format(defaults=REPO / "roles/vllm_serve/defaults/main.yml"))
    proc = run_ansible_playbook(playbook, ["localhost,"], extra_vars={"dgx_spark_node_has_gpu": gpu},
                                extra_args=["-c", "local"], config=write_ansible_cfg(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, flat_output(proc)
    assert f"utilization={shown}" in flat_output(proc)


def test_a_utilization_that_starves_the_os_is_refused_naming_the_highest_that_fits(tmp_path: Path) -> None:
    rc, output = run_preflight(tmp_path, extra={"dgx_spark_node_has_gpu": True,
                                                "vllm_serve_gpu_memory_utilization": 0.99})
    assert rc != 0, "0.99 of the memory passed"
    total = mem_total_gib()
    assert (f"Host spark1: vLLM would take {0.99 * total:.1f} GiB (vllm_serve_gpu_memory_utilization 0.99 x "
            f"MemTotal {total:.1f} GiB), more than the {total - 8:.1f} GiB the node can give") in output
    assert "set vllm_serve_gpu_memory_utilization to at most" in output


def test_a_recipes_declared_weights_reach_preflight_before_any_download(tmp_path: Path) -> None:
    """inventories/recipes/qwen3.5-122b-fp8-tp2 layered over inventories/sparks, as its README
    says: 116 GiB over tensor parallel 2 is 58.0 GiB per node, shown (this machine may be too small
    to hold it: then refused with the same figure)."""
    facts = {host: load_facts(host) for host in HOSTS}
    cache = write_fact_cache(tmp_path / "facts", facts)
    overlay = write_overlay_inventory(tmp_path / "overlay", local_host_vars(None, facts), None)
    recipe = REPO / "inventories/recipes/qwen3.5-122b-fp8-tp2"
    proc = run_ansible_playbook(REPO / "playbooks/preflight.yml", [REPO / "inventories/sparks", recipe, overlay],
                                extra_vars={"dgx_spark_gather_facts": False, **VAULT},
                                config=write_ansible_cfg(tmp_path, fact_cache=cache), cwd=tmp_path)
    output = flat_output(proc)
    for host in HOSTS:
        assert (f"{host}: weights 58.0 GiB per node (from vllm_serve_model_weights_gib)" in output
                or f"Host {host}: the weights need 58.0 GiB per node" in output), output[-3000:]
    assert "Unable to parse" not in output
