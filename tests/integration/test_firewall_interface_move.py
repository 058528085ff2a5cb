"""The firewall's table after a node's fabric moves to another interface with the same address (a
cable on the other CX7 port, a rename): rendered for the node's interface as the run finds it, and
reloaded over the old one in one transaction, as the firewall role does before the fabric check.

Loaded by the kernel's nftables in a network namespace of its own (``unshare --net``), so nothing of
this machine's own ruleset is read or changed. Nothing may still name the old interface (its
anti-spoof rule dropped everything arriving on the new one), and the table is never absent: the
internal ports stay closed to everything but the nodes throughout.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.ansible_run import REPO, run_ansible_playbook, write_ansible_cfg
from test_firewall_rules import EPHEMERAL, FABRIC, PLAY, TABLE, VARS_FILES, in_namespace, in_namespace_works

pytestmark = pytest.mark.skipif(not in_namespace_works(),
                                reason="needs nft and a network namespace of its own (unshare --net, root)")
OLD, NEW = "enp1s0f0np0", "enP2p1s0f0np0"


def render(directory: Path, interface: str) -> Path:
    """spark2's rules file for its fabric address on ``interface``."""
    directory.mkdir()
    inventory = directory / "hosts.yml"
    inventory.write_text(json.dumps({"sparks": {"hosts": {host: {"ansible_connection": "local"} for host in FABRIC},
                                                "children": {"spark_head": {"hosts": {"spark1": {}}}}}}))
    playbook = directory / "render.yml"
    playbook.write_text(PLAY.format(vars_files=json.dumps([str(REPO / f) for f in VARS_FILES]),
                                    interface=interface, ephemeral=json.dumps(EPHEMERAL),
                                    template=REPO / "roles/firewall/templates/firewall.nft.j2"))
    proc = run_ansible_playbook(playbook, [inventory],
                                extra_vars={"out": str(directory), "fabric": FABRIC,
                                            "dgx_spark_image": "example/vllm:1"},
                                config=write_ansible_cfg(directory), cwd=directory)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return directory / "spark2.nft"


def test_the_reloaded_table_names_only_the_new_interface_and_is_never_absent(tmp_path: Path) -> None:
    old, new = render(tmp_path / "old", OLD), render(tmp_path / "new", NEW)
    assert old.read_text() != new.read_text(), "the interface decides the rules: the role reloads on the change"
    # A listener on the table's events records every change while the new file replaces the old one.
    listed = in_namespace(
        "set -e\n"
        f"nft -f {old}\n"
        f"nft monitor tables > {tmp_path}/events & monitor=$!; sleep 0.5\n"
        f"nft -c -f {new}\n"
        f"nft -f {new}\n"
        "sleep 0.5; kill $monitor\n"
        "nft list tables\n"
        f"nft list table inet {TABLE}\n")
    print(listed)
    assert listed.split("\n")[0] == f"table inet {TABLE}" and listed.count("table inet ") == 2, listed
    address = FABRIC["spark2"]
    assert f'ip daddr {address} iifname != "{NEW}" counter' in listed
    assert f'iifname "{NEW}" ip saddr @fabric_nodes tcp dport @internal_tcp accept' in listed
    assert f'"{OLD}"' not in listed
    assert "tcp dport @internal_tcp counter" in listed  # everything else still dropped
    # Replaced whole: one delete and one add, which `nft -f` commits as one transaction (no moment
    # in between where a packet meets no table).
    events = (tmp_path / "events").read_text()
    print(events)
    assert events.count(f"delete table inet {TABLE}") == 1 and events.count(f"add table inet {TABLE}") == 1, events
