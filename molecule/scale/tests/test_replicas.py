"""Two replicas of tensor parallel 2 behind one endpoint on the same four nodes (controller
side): site.yml with dgx_spark_replicas (a: spark1+spark2, b: spark3+spark4) serves through
nginx on the head's management address; completions reach both replicas; with one replica's
head engine killed the endpoint keeps answering; the killed replica comes back by itself.

Runs last (after test_layouts.py): it leaves the cluster on two replicas. Per-replica counts
come from each replica head's vLLM /metrics (vllm:request_success_total, on its fabric address
and the internal port, read from inside the node: the LAN never reaches that port); they include
each head guard's own liveness completions, so the assertions ask for a share, not an exact split.
"""
from __future__ import annotations

import socket
import time

from ansible_run import write_overlay_inventory
from endpoint import completes
from nodes import FABRIC, HEAD, HEAD_MANAGEMENT, node_host, serve_args
from playbook_run import failure, run_playbook
from settings import setting

REPLICAS = [{"name": "a", "head": "spark1", "nodes": ["spark1", "spark2"]},
            {"name": "b", "head": "spark3", "nodes": ["spark3", "spark4"]}]
HEADS = {"a": "spark1", "b": "spark3"}
INTERNAL_PORT = setting("dgx_spark_engine_api_port")
REQUESTS = 20


def served(replica: str) -> float:
    """Requests the replica's vLLM has answered so far (/metrics of its head, from inside it)."""
    head = HEADS[replica]
    text = node_host(head).check_output(f"curl -sf --max-time 10 http://{FABRIC[head]}:{INTERNAL_PORT}/metrics")
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:request_success_total"))


def balanced_to(replica: str, since: float) -> int:
    """Endpoint requests the balancer had answered by the replica since ``since`` (epoch
    seconds): its access lines in the head's journal name the replica that answered last."""
    head = HEADS[replica]
    lines = node_host(HEAD).check_output(
        f"journalctl -t vllm_serve_endpoint --since @{int(since)} -o cat --no-pager")
    return sum(line.endswith(f"{FABRIC[head]}:{INTERNAL_PORT} upstream_status=200") for line in lines.splitlines())


def counts() -> dict[str, float]:
    return {replica: served(replica) for replica in HEADS}


def wait_until(condition, seconds: float, interval: float = 3) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return False


def replica_up(replica: str) -> bool:
    head = HEADS[replica]
    return node_host(head).run(
        f"curl -sf --max-time 5 http://{FABRIC[head]}:{INTERNAL_PORT}/health").rc == 0


def test_site_serves_two_replicas_behind_one_endpoint(tmp_path):
    overlay = write_overlay_inventory(tmp_path / "replicas", {name: {
        "vllm_serve_tensor_parallel_size": 2, "vllm_serve_pipeline_parallel_size": 1,
        "dgx_spark_replicas": REPLICAS} for name in FABRIC})
    started = time.monotonic()
    result = run_playbook("playbooks/site.yml", inventories=(str(overlay),), timeout=1500)
    output = result.stdout + result.stderr
    assert result.returncode == 0, failure(output)
    print(f"site.yml to two replicas of tensor parallel 2: {time.monotonic() - started:.0f} s")
    for name in FABRIC:
        _args, value = serve_args(node_host(name))
        head = HEADS["a"] if name in REPLICAS[0]["nodes"] else HEADS["b"]
        assert value["--nnodes"] == "2" and value["--master-addr"] == FABRIC[head], (name, value)
    assert node_host(HEAD).service("vllm-serve-endpoint").is_running


def test_completions_reach_both_replicas():
    since = time.time() - 1
    before = counts()
    answered = sum(completes(timeout=60) for _request in range(REQUESTS))
    after = counts()
    per_replica = {replica: after[replica] - before[replica] for replica in HEADS}
    print(f"{answered}/{REQUESTS} completions through the endpoint; served per replica "
          f"(with the guards' own checks): {per_replica}")
    balanced = {replica: balanced_to(replica, since) for replica in HEADS}
    print(f"answered per replica, from the balancer's access log: {balanced}")
    assert answered == REQUESTS
    assert sum(balanced.values()) == REQUESTS and all(balanced.values()), balanced
    for replica, count in per_replica.items():
        assert count >= REQUESTS // 4, f"replica {replica} served {count} of {REQUESTS}: {per_replica}"


def test_the_replicas_internal_api_is_closed_to_the_lan():
    with socket.socket() as probe:
        probe.settimeout(5)
        assert probe.connect_ex((HEAD_MANAGEMENT, INTERNAL_PORT)) != 0


def test_the_endpoint_answers_while_one_replica_is_down_and_the_replica_comes_back():
    assert replica_up("b")
    node_host("spark3").check_output("docker kill vllm-serve")
    killed = time.monotonic()
    answered = [completes(timeout=60) for _request in range(10)]
    print(f"with replica b's head engine killed: {sum(answered)}/10 completions answered "
          f"within {time.monotonic() - killed:.0f} s")
    assert all(answered), answered
    assert wait_until(lambda: replica_up("b"), 600), "replica b did not come back within 600 s"
    print(f"replica b back after {time.monotonic() - killed:.0f} s")
    # The balancer tries it again after fail_timeout: it serves endpoint requests once more.
    back = time.time() - 1
    assert wait_until(lambda: completes(timeout=60) and balanced_to("b", back) > 0, 120), \
        "replica b is up but gets no requests through the endpoint"
