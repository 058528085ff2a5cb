"""From tensor parallel 4 to tensor parallel 2 x pipeline parallel 2 on the same four nodes
(controller side): site.yml with the new layout restarts serving as one group, and the endpoint
answers from the head's management address with the same greedy tokens. Runs after
test_four_nodes.py and test_distribution.py (they read tensor parallel 4) and before
test_replicas.py, which moves the cluster on from the layout this one leaves (tests/conftest.py).

(The CPU build of vLLM needs a patch in the test image for pipeline parallel in eager mode:
tools/images/serving-cpu/pipeline-stage-buffer.py.)
"""
from __future__ import annotations

import time

from ansible_run import write_overlay_inventory
from endpoint import COMPLETION, call
from nodes import FABRIC, RANK, node_host, serve_args
from playbook_run import failure, run_playbook


def greedy_text() -> str:
    status, body = call("/v1/completions", body=COMPLETION)
    assert status == 200, body
    assert body["usage"]["completion_tokens"] == COMPLETION["max_tokens"]
    return body["choices"][0]["text"]


def test_site_moves_four_nodes_to_tensor_2_x_pipeline_2_and_serves_the_same_tokens(tmp_path):
    before = greedy_text()
    layout = write_overlay_inventory(tmp_path / "layout", {
        name: {"vllm_serve_tensor_parallel_size": 2, "vllm_serve_pipeline_parallel_size": 2} for name in FABRIC})
    started = time.monotonic()
    result = run_playbook("playbooks/site.yml", inventories=(str(layout),), timeout=1200)
    seconds = time.monotonic() - started
    output = result.stdout + result.stderr
    assert result.returncode == 0, failure(output)
    print(f"site.yml to tensor parallel 2 x pipeline parallel 2 on four nodes: {seconds:.0f} s")
    for name in FABRIC:
        args, value = serve_args(node_host(name))
        assert (value["--tensor-parallel-size"], value["--pipeline-parallel-size"]) == ("2", "2"), name
        assert (value["--nnodes"], value["--node-rank"]) == ("4", str(RANK[name])), name
    after = greedy_text()
    print(f"greedy completion, tensor parallel 4: {before!r}; 2 x pipeline parallel 2: {after!r}")
    assert after == before
