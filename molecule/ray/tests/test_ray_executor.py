"""Serving through vLLM's Ray executor across both nodes: the deployment the example inventory describes.

One vllm-serve.service on the head attached to the Ray cluster; vLLM's Ray
executor places one tensor-parallel worker on each node's Ray (the seed's bug
lived here: workers advertising the head's or a management address).
"""
from __future__ import annotations

import re
import time

from endpoint import completes, seconds_to_first_completion
from nodes import (API_KEY, FABRIC, FILES, HEAD, HEAD_MANAGEMENT, NODES, UNITS, env_file, json_line, node_host,
                   run_on_head)
from playbook_run import failure, run_playbook

testinfra_hosts = ["ansible://spark1"]

WORKER_PROCESS = "ray::RayWorker"  # RayWorkerProc (vLLM's Ray executor v2) or RayWorkerWrapper (v1)


def ray_workers(host) -> list[dict]:
    """vLLM's live Ray workers as Ray's GCS lists them (molecule/shared/files/ray_workers.py)."""
    out = run_on_head(host, (FILES / "ray_workers.py").read_text())
    assert out.rc == 0, out.stderr[-2000:]
    return json_line(out.stdout)


def worker_sockets(name: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The TCP sockets of the node's vLLM Ray worker processes: listening addresses, (local, peer) pairs."""
    node = node_host(name)
    pids = node.check_output(f"pgrep -f '^{WORKER_PROCESS}' || true").split()
    assert len(pids) == 1, f"{name}: {len(pids)} vLLM Ray worker processes: {pids}"
    pattern = re.compile(rf"pid={pids[0]},")
    listening = [line.split()[3] for line in node.check_output("ss -Hltnp").splitlines() if pattern.search(line)]
    # with a state filter, ss leaves the State column out
    established = [(line.split()[2], line.split()[3]) for line in node.check_output("ss -Htnp state established")
                   .splitlines() if pattern.search(line)]
    return listening, established


def host_of(endpoint: str) -> str:
    return endpoint.rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:")


def test_serving_is_one_unit_on_the_head():
    assert node_host(HEAD).service("vllm-serve").is_running
    assert not node_host("spark2").file("/etc/systemd/system/vllm-serve.service").exists
    assert not node_host("spark2").run("docker inspect vllm-serve").rc == 0


def test_ray_places_one_tp_worker_on_each_node_at_its_fabric_address(host):
    workers = ray_workers(host)
    print(f"vLLM's Ray workers: {workers}")
    assert [w["node"] for w in workers] == sorted(FABRIC.values())
    assert all(w["address"] == w["node"] for w in workers), workers


def test_each_worker_process_talks_from_its_own_fabric_address_only():
    """On each node: one vLLM worker process; every TCP socket it holds (but loopback) is on the node's own
    fabric address, and it is connected to the other node's worker over the fabric."""
    for name in NODES:
        other = FABRIC["spark2" if name == "spark1" else "spark1"]
        listening, established = worker_sockets(name)
        print(f"{name}: worker listens on {listening}; {len(established)} connections")
        local = {host_of(l) for l, _peer in established} - {"127.0.0.1", "::1"}
        assert local == {FABRIC[name]}, (name, established)
        bound = {host_of(l) for l in listening} - {"127.0.0.1", "::1", "*", "0.0.0.0"}
        assert bound <= {FABRIC[name]}, (name, listening)
        assert HEAD_MANAGEMENT not in {host_of(p) for _local, p in established}
        assert other in {host_of(p) for _local, p in established}, f"{name}: no connection to the other worker"


# What the launcher exports for vLLM alone (roles/vllm_serve/vars/main.yml): no other process on a node
# has it, so a Ray worker that holds it received it through vLLM's copy of the driver's environment.
COPIED_CONTROL = "/tmp/vllm-config"


def memory_holds(name: str, pid: str, *needles: str) -> dict[str, bool]:
    """Which of these strings the process holds anywhere in its writable memory
    (molecule/shared/files/memory_holds.py)."""
    script = (FILES / "memory_holds.py").read_text()
    hexed = " ".join(needle.encode().hex() for needle in needles)
    out = node_host(name).run(f"python3 - {pid} {hexed} <<'PYEOF'\n{script}\nPYEOF")
    assert out.rc == 0, f"{name}: {out.stderr[-2000:]}"
    found = json_line(out.stdout)
    return {needle: found[needle.encode().hex()] for needle in needles}


def test_the_api_key_stays_in_the_api_server_and_out_of_every_ray_worker():
    """vLLM's Ray executor sets the driver's environment inside every Ray worker (not at exec, so not
    in /proc/PID/environ): the worker's memory is searched. Controls: the same search finds the key in
    the API server, and the launcher's VLLM_CONFIG_ROOT in every worker (the copy happened)."""
    # the serving container's main process: the launcher execs `vllm serve`
    api_server = node_host(HEAD).check_output("docker inspect --format '{{.State.Pid}}' vllm-serve")
    assert memory_holds(HEAD, api_server, API_KEY)[API_KEY], "the search does not find the key where it is"
    for name in NODES:
        assert COPIED_CONTROL not in "".join(env_file(node_host(name), UNITS[name]).values())
        pids = node_host(name).check_output(f"pgrep -f '^{WORKER_PROCESS}' || true").split()
        assert len(pids) == 1, f"{name}: {len(pids)} vLLM Ray worker processes: {pids}"
        found = memory_holds(name, pids[0], API_KEY, COPIED_CONTROL)
        print(f"{name}: Ray worker {pids[0]}: {found[COPIED_CONTROL]=}, key found: {found[API_KEY]}")
        assert found[COPIED_CONTROL], f"{name}: the driver's environment did not reach the Ray worker"
        assert not found[API_KEY], f"{name}: the Ray worker holds the API key"


def test_unit_start_to_first_completion(record_property):
    """The closing note's figure: `systemctl restart vllm-serve` on the head to the first completion."""
    head = node_host(HEAD)
    started = time.monotonic()
    head.check_output("systemctl restart vllm-serve")
    seconds = seconds_to_first_completion(started, deadline=300)
    record_property("ray_unit_start_to_first_completion_seconds", seconds)
    print(f"Ray executor: systemctl restart vllm-serve to the first completion: {seconds} s")
    assert seconds is not None


def ray_containers() -> dict[str, str]:
    return {n: node_host(n).check_output("docker inspect --format '{{.Id}} {{.State.StartedAt}}' %s",
                                         UNITS[n]) for n in NODES}


def test_restart_serving_leaves_ray_alone(host):
    head = node_host(HEAD)
    ray_before = ray_containers()
    serving_before = head.check_output("docker inspect --format '{{.Id}}' vllm-serve")
    started = time.monotonic()
    result = run_playbook("playbooks/serve.yml")
    print(f"restart serving (playbooks/serve.yml) with the Ray executor: {time.monotonic() - started:.0f} s")
    assert result.returncode == 0, failure(result.stdout + result.stderr)
    assert head.check_output("docker inspect --format '{{.Id}}' vllm-serve") != serving_before
    assert ray_containers() == ray_before, "a Ray container was restarted"
    assert completes(timeout=60)
    assert [w["node"] for w in ray_workers(host)] == sorted(FABRIC.values())
