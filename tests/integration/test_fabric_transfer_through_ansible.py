"""roles/fabric_transfer through ansible-playbook on this machine: inventory hosts that are all local,
with fabric addresses 127.0.0.1 (the source, spark1), 127.0.0.2 (spark2) and on. A slow stream shows
progress lines while it is sent; what arrives is committed only when both digests agree; with three
targets the source still sends once, and the chain brings the stream to all of them."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from support.ansible_run import flat_output, run_ansible_playbook, write_ansible_cfg

PLAY = """\
- hosts: sparks
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: dgx_spark.vllm.fabric_transfer
      vars:
        fabric_transfer_description: the test stream
        fabric_transfer_targets: {targets}
        fabric_transfer_send_command: >-
          echo sent >> {sends};
          for i in $(seq 8); do head -c 1000000 /dev/zero; sleep 0.5; done{fail}
        fabric_transfer_receive_command: cat > {out}.incoming
        fabric_transfer_commit_command: mv {out}.incoming {out}
        fabric_transfer_abort_command: rm -f {out}.incoming
        fabric_transfer_total_bytes: 8000000
        fabric_transfer_progress_interval: 1
        fabric_transfer_timeout: 60
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        return int(s.getsockname()[1])


def run_transfer(tmp_path: Path, fail: bool = False, nodes: int = 2) -> subprocess.CompletedProcess[str]:
    port = _free_port()
    common = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
              "dgx_spark_transfer_port": port}
    hosts = {}
    for number in range(1, nodes + 1):
        (tmp_path / f"spark{number}").mkdir()
        hosts[f"spark{number}"] = {**common, "dgx_spark_fabric_address": f"127.0.0.{number}"}
    targets = [f"spark{number}" for number in range(2, nodes + 1)]
    groups = {"sparks": {"children": {"spark_head": {"hosts": {"spark1": {}}},
                                      "spark_workers": {"hosts": {name: {} for name in targets}}}}}
    (tmp_path / "hosts.yml").write_text(json.dumps({"all": {"hosts": hosts, "children": groups}}))
    # Each target writes into its own folder: the command's path names the node.
    out = str(tmp_path) + "/{{ inventory_hostname }}/received"
    (tmp_path / "play.yml").write_text(PLAY.format(out=out, sends=tmp_path / "sends", targets=json.dumps(targets), fail="; false" if fail else ""))
    # dgx_spark_config_dir is a role variable: only extra vars move it (one folder: one machine)
    (tmp_path / "etc").mkdir()
    return run_ansible_playbook(tmp_path / "play.yml", [tmp_path / "hosts.yml"], config=write_ansible_cfg(tmp_path),
                                # The base role's preflight (facts, inventory) is not this test's subject:
                                # the fabric addresses are set above, so it is marked passed.
                                extra_vars={"dgx_spark_config_dir": str(tmp_path / "etc"),
                                            "dgx_spark_preflight_passed": ["dgx_spark"]},
                                cwd=tmp_path, timeout=180)


def test_the_stream_arrives_whole_with_progress_on_the_way(tmp_path: Path) -> None:
    proc = run_transfer(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "spark2/received").stat().st_size == 8_000_000
    progress = [line for line in proc.stdout.splitlines()
                if line.startswith("spark1: the test stream to spark2: fabric_pipe send: ")]
    assert progress, proc.stdout
    assert any(" of 7.63 MiB (" in line and "MB/s" in line for line in progress), progress
    assert not list(tmp_path.glob("etc/fabric-transfer*.log"))


def test_along_a_chain_of_four_nodes_the_source_sends_once_and_every_node_receives(tmp_path: Path) -> None:
    proc = run_transfer(tmp_path, nodes=4)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("spark2", "spark3", "spark4"):
        assert (tmp_path / name / "received").stat().st_size == 8_000_000, name
    # The source ran its command, and so read the data, once; not once per target.
    assert (tmp_path / "sends").read_text() == "sent\n"


def test_a_failed_sender_leaves_nothing_and_names_the_cause(tmp_path: Path) -> None:
    proc = run_transfer(tmp_path, fail=True, nodes=3)
    assert proc.returncode != 0
    flat = flat_output(proc)
    for name in ("spark2", "spark3"):
        assert f"{name} did not receive the test stream intact from spark1" in flat, proc.stdout
        assert not (tmp_path / name / "received").exists()
        assert not (tmp_path / name / "received.incoming").exists()
