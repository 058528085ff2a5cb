"""From tensor parallel 4 to tensor parallel 2 x pipeline parallel 2 on the same four nodes
(controller side): site.yml with the new layout restarts serving as one group, and the endpoint
answers from the head's management address. Runs last (after test_four_nodes.py and
test_distribution.py): it leaves the cluster on the new layout.
"""
from __future__ import annotations

import time

from ansible_run import write_overlay_inventory
from four_nodes import FABRIC, RANK, serve_args
from nodes import node_host
from playbook_run import failure, run_playbook
from test_endpoint import test_completion_returns_tokens as completion_works


def test_site_moves_four_nodes_to_tensor_2_x_pipeline_2_and_serves(tmp_path):
    layout = write_overlay_inventory(tmp_path / "layout", {
        name: {"vllm_serve_tensor_parallel_size": 2, "vllm_serve_pipeline_parallel_size": 2} for name in FABRIC})
    started = time.monotonic()
    result = run_playbook("playbooks/site.yml", inventories=(str(layout),), timeout=1200)
    seconds = time.monotonic() - started
    output = result.stdout + result.stderr
    assert result.returncode == 0, failure(output)
    print(f"site.yml to tensor parallel 2 x pipeline parallel 2 on four nodes: {seconds:.0f} s")
    completion_works()
    for name in FABRIC:
        args, value = serve_args(node_host(name))
        assert (value["--tensor-parallel-size"], value["--pipeline-parallel-size"]) == ("2", "2"), name
        assert (value["--nnodes"], value["--node-rank"]) == ("4", str(RANK[name])), name
