"""The firewall fails closed (issue 24), on the head: whatever removes its table - an operator's
`nft delete table`, nftables.service reloading or restarting a configuration that starts with
`flush ruleset` (the distributions' default) - the table is back within 60 s, and a stranger on
the LAN scanning every TCP port while it happens and afterwards finds only the API. A run puts a
missing table back too, and says so. Shared by the scenarios (each links this file into its tests/).

Every test leaves the node as it found it: nftables.conf, nftables.service's state, the
watchdog running, and Docker's own tables (a flush removes them; iptables-restore puts them back).
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

import outsider
from nodes import API_PORT, HEAD, HEAD_MANAGEMENT, node_host
from playbook_run import failure, run_playbook

testinfra_hosts = ["ansible://spark1"]

FIREWALL = "dgx-spark-vllm-firewall"  # dgx_spark_firewall_unit, roles/dgx_spark/vars/main.yml
WATCHDOG = f"{FIREWALL}-watchdog"
TABLE = "nft list table inet dgx_spark_vllm"
WITHIN = 60  # seconds: the promise
# A distribution's configuration as Debian and Ubuntu ship it: everything goes first.
FLUSHING_CONF = """#!/usr/sbin/nft -f
flush ruleset

table inet filter {
    chain input {
        type filter hook input priority filter;
    }
}
"""
SAVED = "/root/firewall-test"


@pytest.fixture(scope="module")
def stranger():
    outsider.start()
    yield
    outsider.stop()


@pytest.fixture
def head():
    """The head, with Docker's iptables rules saved and put back afterwards (a `flush ruleset`
    removes every table; Docker writes its own only when its engine starts)."""
    node = node_host(HEAD)
    node.check_output(f"mkdir -p {SAVED} && iptables-save > {SAVED}/iptables && ip6tables-save > {SAVED}/ip6tables")
    tables_before = tables(node)
    yield node
    node.check_output(f"iptables-restore < {SAVED}/iptables && ip6tables-restore < {SAVED}/ip6tables")
    node.run(f"rm -rf {SAVED}")
    node.check_output(f"systemctl start {WATCHDOG}")
    assert seconds_until_loaded(node) is not None, "the table stayed gone"
    assert tables(node) == tables_before


def tables(host) -> list[str]:
    return sorted(host.check_output("nft list tables").splitlines())


def seconds_until_loaded(host, deadline: float = WITHIN) -> float | None:
    """Seconds until the table is listed again, polled twice a second; None when it is not
    within the deadline."""
    started = time.monotonic()
    while time.monotonic() - started < deadline:
        if host.run(TABLE).rc == 0:
            return round(time.monotonic() - started, 1)
        time.sleep(0.5)
    return None


def fault_while_scanned(host, fault: Callable[[], None]) -> tuple[float | None, list[int]]:
    """The fault, then at once a scan of every port of the head's LAN address (a minute or so)
    while the table is watched: (seconds until it is back, the ports that answered)."""
    with ThreadPoolExecutor(1) as pool:
        fault()
        scan = pool.submit(outsider.open_ports, HEAD_MANAGEMENT)
        back = seconds_until_loaded(host)
        return back, scan.result()


def assert_only_the_api_answers(found: list[int], when: str) -> None:
    print(f"{when}: TCP ports of {HEAD_MANAGEMENT} that answer a stranger: {found}")
    assert found == [API_PORT], when


def test_a_deleted_table_is_back_within_60_s_and_the_lan_sees_only_the_api(head, stranger):
    rules = head.check_output(TABLE)
    back, found = fault_while_scanned(head, lambda: head.check_output("nft delete table inet dgx_spark_vllm"))
    print(f"table deleted: back after {back} s")
    assert back is not None and back <= WITHIN
    assert_only_the_api_answers(found, "while the table was deleted")
    assert_only_the_api_answers(outsider.open_ports(HEAD_MANAGEMENT), "after")
    assert re.sub(r"counter packets \d+ bytes \d+", "", head.check_output(TABLE)) == \
        re.sub(r"counter packets \d+ bytes \d+", "", rules)
    assert "is gone: loading" in head.check_output(f"journalctl -u {WATCHDOG} --since '5 min ago' --no-pager")


@pytest.fixture
def flushing_nftables(head):
    """nftables.service with a configuration that starts with `flush ruleset`, started (as at
    boot); afterwards the node's own configuration and the service's state are back."""
    had_conf = head.file("/etc/nftables.conf").exists
    was_active = head.service("nftables").is_running
    if had_conf:
        head.check_output(f"cp -a /etc/nftables.conf {SAVED}/nftables.conf")
    head.check_output(f"cat > /etc/nftables.conf <<'EOF'\n{FLUSHING_CONF}EOF")
    try:
        if not was_active:
            head.check_output("systemctl start nftables")
        yield head
    finally:
        if had_conf:
            head.check_output(f"cp -a {SAVED}/nftables.conf /etc/nftables.conf")
        else:
            head.check_output("rm -f /etc/nftables.conf")
        # A stop flushes the ruleset again: the head fixture puts back Docker's and the watchdog ours.
        head.check_output("systemctl reload nftables" if was_active else "systemctl stop nftables")


def test_a_reload_of_nftables_that_flushes_reloads_the_firewall_after_it(flushing_nftables):
    """ReloadPropagatedFrom=nftables.service and After=: the firewall's unit reloads right after
    nftables.service's. The watchdog is stopped here, so that only the unit can bring it back."""
    head = flushing_nftables
    assert seconds_until_loaded(head) is not None, "nftables.service's start left the table gone"
    head.check_output(f"systemctl stop {WATCHDOG}")
    head.check_output("systemctl reload nftables")
    back = seconds_until_loaded(head, deadline=10)
    print(f"systemctl reload nftables (flush ruleset): the table back after {back} s, without the watchdog")
    assert back is not None
    assert head.service(FIREWALL).is_running


def test_a_restart_of_nftables_that_flushes_is_repaired_within_60_s(flushing_nftables, stranger):
    """Restart is stop (flush ruleset) and start (the configuration, flush ruleset again): the
    firewall's unit is not restarted (that would restart Ray and serving); the watchdog puts the
    table back."""
    head = flushing_nftables
    ray_and_serving = head.check_output("docker ps --format '{{.Names}} {{.ID}}' | sort")
    back, found = fault_while_scanned(head, lambda: head.check_output("systemctl restart nftables"))
    print(f"systemctl restart nftables: the table back after {back} s")
    assert back is not None and back <= WITHIN
    assert_only_the_api_answers(found, "while nftables.service restarted")
    assert_only_the_api_answers(outsider.open_ports(HEAD_MANAGEMENT), "after")
    assert head.check_output("docker ps --format '{{.Names}} {{.ID}}' | sort") == ray_and_serving


def test_a_run_puts_a_missing_table_back_and_reports_it(head):
    """Between runs the watchdog does; here it is stopped, so the run's own check must."""
    head.check_output(f"systemctl stop {WATCHDOG}")
    head.check_output("nft delete table inet dgx_spark_vllm")
    result = run_playbook("site.yml", "--tags", "firewall", timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, failure(output)
    assert head.run(TABLE).rc == 0
    task = output[output.index(f"it changed: {FIREWALL}]"):]
    task = task[:task.index("TASK [")]
    assert "changed: [spark1]" in task and "ok: [spark2]" in task, task
    assert head.service(WATCHDOG).is_running
