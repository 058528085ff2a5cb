"""Bad input: the head's ansible_host_ib set to its management address.

Preflight must refuse it, naming the host, the variable and the working
network, and nothing may change on any node.
"""
from __future__ import annotations

from cluster_state import node_states
from nodes import FABRIC_NETWORK, HEAD_MANAGEMENT, NODES
from playbook_run import overlay_inventory, run_playbook


def test_head_management_address_as_ansible_host_ib_is_refused(tmp_path):
    bad = overlay_inventory(tmp_path / "bad-inventory", "spark1", f"ansible_host_ib: {HEAD_MANAGEMENT}\n")

    before = node_states(NODES)
    result = run_playbook("site.yml", inventories=(bad,))
    after = node_states(NODES)

    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    message = next(line for line in output.splitlines() if "reachable_subnet" in line)
    for needle in ("spark1", "ansible_host_ib", HEAD_MANAGEMENT, str(FABRIC_NETWORK)):
        assert needle in message, (needle, message)
    assert after == before
    recap = [line for line in output.splitlines() if line.startswith(tuple(f"{name} " for name in NODES))]
    assert recap and all("changed=0" in line for line in recap), recap
