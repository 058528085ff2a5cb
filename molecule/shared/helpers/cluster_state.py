"""What a deployment leaves on the container cluster, to prove a run changed nothing."""
from __future__ import annotations

from nodes import node_host

STATE_COMMAND = (
    "find /etc/systemd/system /etc/dgx-spark-vllm -maxdepth 1 -type f -exec sha256sum {} + 2>/dev/null | sort; "
    "docker ps -q --no-trunc | xargs -r docker inspect --format '{{.Id}} {{.Name}} {{.State.StartedAt}}' | sort; "
    "systemctl list-units --type=service --state=active --no-legend --plain | awk '{print $1}' | sort"
)


def node_states(nodes: list[str]) -> dict[str, str]:
    return {name: node_host(name).check_output(STATE_COMMAND) for name in nodes}
