"""The firewall's table as the template module renders it, loaded by the kernel's nftables, and
its watchdog putting it back: each in a network namespace of its own (``unshare --net``), so
nothing of this machine's own ruleset is read or changed.

Two nodes of the example inventory's fabric (192.168.200.12 and .13 on enp1s0f0np0). The table
must trust those two addresses on that interface, not the subnet; load in one transaction that
replaces it whole (never two tables, never none); and the watchdog must load it again within
seconds after ``nft delete table`` and after ``flush ruleset``.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

from support.ansible_run import REPO, run_ansible_playbook, write_ansible_cfg
from support.textfile import check_metrics, samples

TABLE = "dgx_spark_vllm"
FABRIC = {"spark1": "192.168.200.12", "spark2": "192.168.200.13"}
INTERFACE = "enp1s0f0np0"
EPHEMERAL = [32768, 60999]
WATCHDOG = REPO / "roles/firewall/files/firewall_watchdog.sh"
VARS_FILES = ["roles/dgx_spark/defaults/main.yml", "roles/dgx_spark/vars/main.yml",
              "roles/firewall/defaults/main.yml", "roles/firewall/vars/main.yml"]
PLAY = """\
- hosts: sparks
  gather_facts: false
  vars_files: {vars_files}
  tasks:
    - ansible.builtin.set_fact:
        dgx_spark_fabric_address: "{{{{ fabric[inventory_hostname] }}}}"
        dgx_spark_fabric_interface: {interface}
        __firewall_ephemeral_ports: {ephemeral}
    - ansible.builtin.template:
        src: {template}
        dest: "{{{{ out }}}}/{{{{ inventory_hostname }}}}.nft"
        mode: "0600"
"""


def in_namespace_works() -> bool:
    if shutil.which("nft") is None or shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "--net", "nft", "list", "ruleset"], capture_output=True,
                          check=False).returncode == 0


pytestmark = pytest.mark.skipif(not in_namespace_works(),
                                reason="needs nft and a network namespace of its own (unshare --net, root)")


@pytest.fixture(scope="module")
def rules(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each node's rendered rules file."""
    tmp = tmp_path_factory.mktemp("firewall")
    inventory = tmp / "hosts.yml"
    inventory.write_text(json.dumps({"sparks": {"hosts": {host: {"ansible_connection": "local"} for host in FABRIC},
                                                "children": {"spark_head": {"hosts": {"spark1": {}}}}}}))
    playbook = tmp / "render.yml"
    playbook.write_text(PLAY.format(vars_files=json.dumps([str(REPO / f) for f in VARS_FILES]),
                                    interface=INTERFACE, ephemeral=json.dumps(EPHEMERAL),
                                    template=REPO / "roles/firewall/templates/firewall.nft.j2"))
    proc = run_ansible_playbook(playbook, [inventory],
                                extra_vars={"out": str(tmp), "fabric": FABRIC, "dgx_spark_image": "example/vllm:1"},
                                config=write_ansible_cfg(tmp), cwd=tmp)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {host: tmp / f"{host}.nft" for host in FABRIC}


def in_namespace(script: str, timeout: int = 60) -> str:
    """Run a bash script in a new network namespace (an empty ruleset); its output."""
    proc = subprocess.run(["unshare", "--net", "bash", "-c", script], capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_only_the_nodes_fabric_addresses_on_the_fabric_interface_reach_the_internal_ports(rules) -> None:
    listed = in_namespace(f"nft -f {rules['spark1']} && nft list table inet {TABLE}")
    print(listed)
    assert "elements = { 192.168.200.12, 192.168.200.13 }" in listed
    assert f'iifname "{INTERFACE}" ip saddr @fabric_nodes tcp dport @internal_tcp accept' in listed
    assert f'iifname "{INTERFACE}" ip saddr @fabric_nodes tcp dport {EPHEMERAL[0]}-{EPHEMERAL[1]} accept' in listed
    assert f"tcp dport {EPHEMERAL[0]}-{EPHEMERAL[1]} ct state new counter" in listed
    assert f'ip daddr 192.168.200.12 iifname != "{INTERFACE}" counter' in listed
    assert "192.168.200.0/24" not in listed
    # Every internal port is closed to the rest, SSH and the API are not.
    assert "6379" in listed and "29501" in listed and "10002-10199" in listed
    assert " 22," not in listed and "8000" not in listed


def test_the_table_replaces_itself_in_one_transaction(rules) -> None:
    """Loaded over itself (a reload), over nothing (after a delete), and checked with nft -c: one
    table each time, the same rules, the other tables untouched."""
    listed = in_namespace(
        "set -e\n"
        "nft add table inet other\n"
        f"nft -c -f {rules['spark2']}\n"
        f"nft -f {rules['spark2']}; first=$(nft list table inet {TABLE})\n"
        f"nft -f {rules['spark2']}; second=$(nft list table inet {TABLE})\n"
        f'[ "$first" = "$second" ]\n'
        "nft list tables\n")
    assert listed.split("\n")[:2] == ["table inet other", f"table inet {TABLE}"], listed


def test_the_watchdog_loads_the_table_again_when_it_is_gone(rules, tmp_path: Path) -> None:
    """After `nft delete table` and after `flush ruleset` (nftables.service's configuration):
    back within 5 s, each time in the watchdog's log as a warning. Its periodic check is 60 s
    here, so what brings the table back is nft's event."""
    log = tmp_path / "watchdog.log"
    script = f"""
set -u
nft -f {rules['spark1']}
{WATCHDOG} inet {TABLE} {rules['spark1']} 60 > {log} 2>&1 &
watchdog=$!
back_within() {{  # $1 tenths of a second
    for _ in $(seq "$1"); do nft list table inet {TABLE} >/dev/null 2>&1 && return 0; sleep 0.1; done
    return 1
}}
sleep 1
for fault in "nft delete table inet {TABLE}" "nft flush ruleset"; do
    $fault
    if back_within 50; then echo "back after: $fault"; else echo "GONE after: $fault"; fi
done
kill $watchdog; wait $watchdog
"""
    output = in_namespace(script)
    print(output, log.read_text())
    assert output.splitlines() == [f"back after: nft delete table inet {TABLE}", "back after: nft flush ruleset"]
    assert log.read_text().count(f"<4>table inet {TABLE} is gone: loading {rules['spark1']} again") == 2


def test_the_watchdog_checks_on_its_own_when_it_starts(rules, tmp_path: Path) -> None:
    """Started (or started again by systemd) with the table gone: it loads it at once."""
    script = f"""
{WATCHDOG} inet {TABLE} {rules['spark1']} 60 > /dev/null 2>&1 &
watchdog=$!
for _ in $(seq 50); do nft list table inet {TABLE} >/dev/null 2>&1 && break; sleep 0.1; done
nft list tables
kill $watchdog; wait $watchdog
"""
    assert in_namespace(script).splitlines() == [f"table inet {TABLE}"]


def test_the_watchdog_writes_what_it_checked_for_prometheus(rules, tmp_path: Path) -> None:
    """firewall.prom after each check: loaded, the restores since it started, the check's time; a
    table it cannot load reads 0. Only the file itself is left in the folder, readable by all."""
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    prom = metrics / "firewall.prom"
    script = f"""
set -u
nft -f {rules['spark1']}
{WATCHDOG} inet {TABLE} {rules['spark1']} 60 {metrics} > /dev/null 2>&1 &
watchdog=$!
sleep 1
cp {prom} {tmp_path}/started.prom
nft delete table inet {TABLE}
sleep 2
cp {prom} {tmp_path}/restored.prom
kill $watchdog; wait $watchdog
nft delete table inet {TABLE}
{WATCHDOG} inet {TABLE} {tmp_path}/missing.nft 60 {metrics} > /dev/null 2>&1 &
watchdog=$!
sleep 1
cp {prom} {tmp_path}/unloadable.prom
kill $watchdog; wait $watchdog
"""
    began = time.time()
    in_namespace(script)
    read = {}
    for name in ["started", "restored", "unloadable"]:
        text = (tmp_path / f"{name}.prom").read_text()
        check_metrics(text)
        read[name] = {series_name: value for (series_name, _labels), value in samples(text).items()}
    loaded, restores = "dgx_spark_firewall_table_loaded", "dgx_spark_firewall_table_restores_total"
    assert (read["started"][loaded], read["started"][restores]) == (1, 0)
    assert (read["restored"][loaded], read["restored"][restores]) == (1, 1)
    assert (read["unloadable"][loaded], read["unloadable"][restores]) == (0, 0)
    assert began - 1 <= read["unloadable"]["dgx_spark_firewall_last_check_timestamp_seconds"] <= time.time() + 1
    assert os.listdir(metrics) == ["firewall.prom"]
    assert stat.S_IMODE(prom.stat().st_mode) == 0o644


@pytest.mark.parametrize("monitoring", [True, False])
def test_the_watchdog_unit_passes_the_metrics_folder_only_with_monitoring(tmp_path: Path, monitoring: bool) -> None:
    playbook = tmp_path / "unit.yml"
    playbook.write_text(f"""\
- hosts: localhost
  gather_facts: false
  vars_files: {json.dumps([str(REPO / f) for f in VARS_FILES])}
  tasks:
    - ansible.builtin.template:
        src: {REPO / "roles/firewall/templates/firewall-watchdog.service.j2"}
        dest: "{{{{ out }}}}"
        mode: "0644"
""")
    out = tmp_path / "watchdog.service"
    proc = run_ansible_playbook(playbook, ["localhost,"],
                                extra_vars={"out": str(out), "monitoring_enabled": monitoring,
                                            "dgx_spark_image": "example/vllm:1"},
                                extra_args=["-c", "local"], config=write_ansible_cfg(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    exec_start = [line for line in out.read_text().splitlines() if line.startswith("ExecStart=")]
    assert len(exec_start) == 1, exec_start
    assert exec_start[0].split()[1:] == ["inet", TABLE, "/etc/dgx-spark-vllm/firewall.nft", "10"] + (
        ["/var/lib/dgx-spark-vllm/metrics"] if monitoring else [])
