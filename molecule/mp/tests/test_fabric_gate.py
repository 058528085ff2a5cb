"""The fabric gate (role ib_network, tasks/bandwidth.yml) on the container cluster: gloo over the
fabric network between the two nodes, in the serving image. At the default CPU threshold it
passes and reports the ring's figure; at an impossible one it fails, naming the ring (hosts and
fabric addresses), the measured and expected figures and the likely causes, before Ray or
serving are touched; with ib_network_bandwidth_action=warn it only warns. Nothing changes on a
node either way."""
from __future__ import annotations

import re

from ansible_run import flat_output
from nodes import FABRIC, HEAD, NODES, node_host
from playbook_run import changed_per_node, failure, run_playbook

RING = f"ring {HEAD} ({FABRIC[HEAD]}) <-> spark2 ({FABRIC['spark2']})"
GATE_ONLY = ("--tags", "ib_network_bandwidth")
SERVING = "docker inspect --format '{{.Id}} {{.State.StartedAt}}' vllm-serve"
FIGURE = re.compile(r"bus bandwidth over ring [^:]*: ([0-9.]+) GB/s \(gloo\)")


def measured(text: str) -> float:
    match = FIGURE.search(text)
    assert match, text[-3000:]
    return float(match.group(1))


def test_gate_passes_at_the_default_cpu_threshold():
    result = run_playbook("site.yml", *GATE_ONLY)
    output = result.stdout + result.stderr
    text = flat_output(result)
    assert result.returncode == 0, failure(output)
    assert changed_per_node(output) == {name: 0 for name in NODES}, failure(output)
    assert f"all_gather bus bandwidth over {RING}" in text
    assert "at least 0.02 GB/s expected: pass" in text
    figure = measured(text)
    assert figure >= 0.02
    print(f"fabric gate (gloo, 2 nodes, CPU stand-in): {figure} GB/s all_gather bus bandwidth")


def test_gate_fails_below_an_impossible_threshold_naming_the_ring():
    serving_before = node_host(HEAD).check_output(SERVING)
    result = run_playbook("site.yml", *GATE_ONLY, "-e", "ib_network_bandwidth_min_busbw_cpu=1000000")
    output = result.stdout + result.stderr
    text = flat_output(result)
    assert result.returncode != 0, output[-3000:]
    fatal = text[text.find("fatal: "):]
    assert f"all_gather bus bandwidth over {RING}" in fatal
    assert "below the 1e+06 GB/s expected" in fatal
    for cause in ("MTU", "wrong interface", "lower speed", "NCCL falling back to sockets"):
        assert cause in fatal, cause
    measured(fatal)
    assert changed_per_node(output) == {name: 0 for name in NODES}
    assert node_host(HEAD).check_output(SERVING) == serving_before
    print(fatal[:1200])


def test_gate_only_warns_when_told_to():
    result = run_playbook("site.yml", *GATE_ONLY, "-e", "ib_network_bandwidth_min_busbw_cpu=1000000",
                          "-e", "ib_network_bandwidth_action=warn")
    text = flat_output(result)
    assert result.returncode == 0, failure(result.stdout + result.stderr)
    assert "WARNING: Fabric gate: all_gather bus bandwidth over " + RING in text
    assert "below the 1e+06 GB/s expected" in text
