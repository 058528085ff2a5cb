"""playbooks/stop.yml stops serving on every node cleanly (runs last: it leaves serving stopped)."""
from __future__ import annotations

from nodes import NODES, node_host
from playbook_run import changed_per_node, failure, run_playbook


def test_stop_playbook_stops_serving_everywhere_and_leaves_nothing_behind():
    hosts = {name: node_host(name) for name in NODES}
    containers = {n: h.check_output("docker inspect --format '{{.Id}}' vllm-serve") for n, h in hosts.items()}

    result = run_playbook("playbooks/stop.yml")
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    for name, host in hosts.items():
        assert not host.service("vllm-serve").is_running, name
        assert not host.service("vllm-serve").is_enabled, f"{name}: a reboot would bring serving back"
        assert host.run("docker inspect vllm-serve").rc != 0, f"{name}: the container is still there"
        assert host.run("grep -l %s /proc/[0-9]*/cgroup", containers[name]).stdout.strip() == "", name
        assert host.service("docker").is_running, name

    again = run_playbook("playbooks/stop.yml")
    assert again.returncode == 0, failure(again.stdout + again.stderr)
    # Every node in the recap, each unchanged (an empty recap must not pass).
    assert changed_per_node(again.stdout) == {name: 0 for name in NODES}, failure(again.stdout + again.stderr)
