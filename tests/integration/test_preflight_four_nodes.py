"""playbooks/preflight.yml for four Sparks: the example inventory with spark3 and spark4 added as
workers, as a user following the README would add them (host_vars with their fabric addresses,
hosts.yml listing them under spark_workers). Their facts are spark2's recorded facts with the
fabric address each would have (192.168.200.14 and .15 on the same CX7 port, through a switch).

Layouts that use every GPU pass (tensor parallel 4; tensor parallel 2 x pipeline parallel 2);
one that leaves nodes idle is refused naming the variables and the count.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from support.example_inventory import FABRIC, run_four_node_preflight


@pytest.mark.parametrize("tensor, pipeline", [(4, 1), (2, 2)], ids=["tp4", "tp2-pp2"])
def test_four_nodes_pass_with_a_layout_over_every_gpu(tmp_path: Path, tensor: int, pipeline: int) -> None:
    rc, output = run_four_node_preflight(tmp_path, {"vllm_serve_tensor_parallel_size": tensor,
                                                    "vllm_serve_pipeline_parallel_size": pipeline})
    assert rc == 0, output[-4000:]
    for host in FABRIC:
        assert f"{host} : ok=" in output, output[-2000:]
    assert "changed=0" in output and "failed=0" in output


def test_four_nodes_refuse_a_layout_that_leaves_nodes_idle(tmp_path: Path) -> None:
    rc, output = run_four_node_preflight(tmp_path, {"vllm_serve_tensor_parallel_size": 2,
                                                    "vllm_serve_pipeline_parallel_size": 1})
    assert rc != 0
    assert ("vllm_serve_tensor_parallel_size (2) x vllm_serve_pipeline_parallel_size (1) must equal the GPUs of the "
            "cluster: 4 nodes x dgx_spark_gpus_per_node 1 = 4") in output, output[-3000:]
