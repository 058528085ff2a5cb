"""ib_network_manage: the role writes the fabric's netplan file and applies it like `netplan try`,
with the revert on the node.

Real netplan (netplan.io with systemd-networkd, in the node image) over the containers' veth links.
Docker mounts a container's /sys read-only, and `netplan apply` writes uevents there (udevadm
trigger); a Spark's /sys is writable, so the module remounts it read-write on the nodes for its
tests and read-only again at the end.

- Another netplan file (NVIDIA's 40-cx7.yaml) configuring a fabric port: refused before anything
  is written.
- A good file (each node's fabric address on the interface it is on now, MTU 1500, the links'):
  applied, confirmed (no revert left armed), pinged at the full MTU between every pair.
- A bad change on the worker, its fabric address written onto a link that is not cabled to the
  others (a veth pair inside the node: the other CX7 port, with link but to nothing): the peers lose
  it, the run does not confirm, the worker puts its previous file back on its own when its timer
  fires, and the run fails naming it. Afterwards the worker has its previous file and address, and
  the cluster serves.
"""
from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from endpoint import completes, seconds_to_first_completion
from nodes import FABRIC, NODES, interface_of, node_host
from ansible_run import write_overlay_inventory
from playbook_run import changed_per_node, failure, run_playbook

WORKER = NODES[1]
NETPLAN_FILE = "/etc/netplan/40-dgx-spark-fabric.yaml"
CONFLICTING_FILE = "/etc/netplan/40-cx7.yaml"
REVERT_UNIT = "dgx-spark-vllm-fabric-revert"
# Seconds a node waits for the run's confirmation before it puts its previous file back.
REVERT_AFTER = 45
# The fabric layer alone (the firewall, then ib_network), after the preflight.
FABRIC_RUN = ("--tags", "ib_network", "--skip-tags", "ib_network_bandwidth")
# The veth pair that stands for the worker's other, uncabled, CX7 port.
SPARE, SPARE_PEER = "fabspare0", "fabspare1"
SERVING_AFTER = 300


def fabric_run(directory: Path, device_of: dict[str, str]):
    """The fabric layer with netplan on (MTU 1500, the links'), each node's fabric address on the
    given device."""
    host_vars = {name: {"ib_network_manage": True, "ib_network_mtu": 1500,
                        "ib_network_netplan_revert_after": REVERT_AFTER,
                        "ib_network_interfaces": [{"device": device, "address": f"{FABRIC[name]}/24"}]}
                 for name, device in device_of.items()}
    return run_playbook("site.yml", *FABRIC_RUN, inventories=(str(write_overlay_inventory(directory, host_vars)),))


def write_file(host, path: str, content: str) -> None:
    """content to path on the node, readable by root only (as netplan wants its files)."""
    encoded = base64.b64encode(content.encode()).decode()
    host.run_expect([0], f"echo {encoded} | base64 -d > {path} && chmod 600 {path}")


@pytest.fixture(scope="module")
def devices() -> Iterator[dict[str, str]]:
    """Each node's fabric interface now; /sys writable on the nodes meanwhile."""
    for name in NODES:
        node_host(name).run_expect([0], "mount -o remount,rw /sys")
    try:
        yield {name: interface_of(node_host(name), FABRIC[name]) for name in NODES}
    finally:
        for name in NODES:
            node_host(name).run("mount -o remount,ro /sys")


def test_another_netplan_file_on_the_fabric_ports_is_refused(devices: dict[str, str], tmp_path: Path) -> None:
    worker = node_host(WORKER)
    planted = f"network:\n  version: 2\n  ethernets:\n    {devices[WORKER]}:\n      mtu: 9000\n"
    write_file(worker, CONFLICTING_FILE, planted)
    try:
        result = fabric_run(tmp_path, devices)
        output = result.stdout + result.stderr
        assert result.returncode != 0, failure(output)
        assert f"Host {WORKER}: {CONFLICTING_FILE} ({devices[WORKER]}) also configures" in output, failure(output)
        for name in NODES:
            assert not node_host(name).file(NETPLAN_FILE).exists, f"{NETPLAN_FILE} written on {name}"
    finally:
        worker.run(f"rm -f {CONFLICTING_FILE}")


def test_a_good_file_applies_and_is_confirmed(devices: dict[str, str], tmp_path: Path) -> None:
    result = fabric_run(tmp_path, devices)
    output = result.stdout + result.stderr
    assert result.returncode == 0, failure(output)
    assert "Ping every other node at the full MTU" in output
    for name in NODES:
        host = node_host(name)
        assert f"{FABRIC[name]}/24" in host.file(NETPLAN_FILE).content_string
        assert host.run(f"systemctl is-active {REVERT_UNIT}.timer").stdout.strip() != "active", \
            f"the revert is still armed on {name} after a confirmed change"
        assert interface_of(host, FABRIC[name]) == devices[name]
    assert completes(timeout=60), "the cluster stopped answering after a fabric change that kept every address"

    again = fabric_run(tmp_path / "again", devices)
    assert again.returncode == 0, failure(again.stdout + again.stderr)
    assert set(changed_per_node(again.stdout).values()) == {0}, failure(again.stdout)


def test_a_change_that_cuts_the_worker_off_reverts_there_on_its_own(devices: dict[str, str], tmp_path: Path) -> None:
    worker = node_host(WORKER)
    good = worker.file(NETPLAN_FILE).content_string
    assert good, f"no {NETPLAN_FILE} on {WORKER}: the good change above did not apply"
    worker.run_expect([0], f"ip link add {SPARE} type veth peer name {SPARE_PEER} && "
                      f"ip link set {SPARE} up && ip link set {SPARE_PEER} up")
    try:
        started = time.monotonic()
        result = fabric_run(tmp_path, {**devices, WORKER: SPARE})
        elapsed = time.monotonic() - started
        output = result.stdout + result.stderr
        assert result.returncode != 0, failure(output)
        assert f"The fabric change written to {NETPLAN_FILE} on {WORKER} failed" in output, failure(output)
        assert f"{WORKER} put back its previous netplan on its own" in output, failure(output)

        # Put back by the node's own timer, not by the run: the revert's journal says so.
        journal = worker.check_output(f"journalctl -u {REVERT_UNIT}.service -o cat --no-pager -n 20")
        assert "dgx-spark-vllm fabric: reverted" in journal, journal
        assert worker.file(NETPLAN_FILE).content_string == good
        assert interface_of(worker, FABRIC[WORKER]) == devices[WORKER]
        assert elapsed < REVERT_AFTER + 240, f"the failed run took {elapsed:.0f} s"
        assert seconds_to_first_completion(time.monotonic(), deadline=SERVING_AFTER) is not None, \
            f"the cluster answered no completion within {SERVING_AFTER} s of the revert"
    finally:
        if worker.file(NETPLAN_FILE).content_string != good:
            worker.run(f"systemctl stop {REVERT_UNIT}.timer")
            write_file(worker, NETPLAN_FILE, good)
            worker.run("netplan apply")
        worker.run(f"ip link del {SPARE}")
