"""roles/fabric_transfer through ansible-playbook on this machine: two inventory hosts, both local,
with fabric addresses 127.0.0.1 (source) and 127.0.0.2 (target). A slow stream shows progress lines
while it is sent; what arrives is committed only when both digests agree."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from support.ansible_run import flat_output, run_ansible_playbook, write_ansible_cfg

PLAY = """\
- hosts: spark1,spark2
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: dgx_spark.vllm.fabric_transfer
      vars:
        fabric_transfer_description: the test stream
        fabric_transfer_targets: [spark2]
        fabric_transfer_send_command: >-
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


def run_transfer(tmp_path: Path, fail: bool = False) -> subprocess.CompletedProcess[str]:
    port = _free_port()
    common = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
              "dgx_spark_transfer_port": port}
    hosts = {}
    for name, address in (("spark1", "127.0.0.1"), ("spark2", "127.0.0.2")):
        (tmp_path / name).mkdir()
        hosts[name] = {**common, "ib_network_fabric_address": address}
    groups = {"sparks": {"children": {"spark_head": {"hosts": {"spark1": {}}},
                                      "spark_workers": {"hosts": {"spark2": {}}}}}}
    (tmp_path / "hosts.yml").write_text(json.dumps({"all": {"hosts": hosts, "children": groups}}))
    (tmp_path / "play.yml").write_text(PLAY.format(out=tmp_path / "spark2/received", fail="; false" if fail else ""))
    # dgx_spark_config_dir is a role variable: only extra vars move it (one folder: one machine)
    (tmp_path / "etc").mkdir()
    return run_ansible_playbook(tmp_path / "play.yml", [tmp_path / "hosts.yml"], config=write_ansible_cfg(tmp_path),
                                extra_vars={"dgx_spark_config_dir": str(tmp_path / "etc")}, cwd=tmp_path, timeout=180)


def test_the_stream_arrives_whole_with_progress_on_the_way(tmp_path: Path) -> None:
    proc = run_transfer(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "spark2/received").stat().st_size == 8_000_000
    progress = [line for line in proc.stdout.splitlines()
                if line.startswith("spark1: the test stream to spark2: fabric_pipe send: ")]
    assert progress, proc.stdout
    assert any(" of 7.63 MiB (" in line and "MB/s" in line for line in progress), progress
    assert not list(tmp_path.glob("etc/fabric-transfer-to-*.log"))


def test_a_failed_sender_leaves_nothing_and_names_the_cause(tmp_path: Path) -> None:
    proc = run_transfer(tmp_path, fail=True)
    assert proc.returncode != 0
    flat = flat_output(proc)
    assert "spark2 did not receive the test stream intact from spark1" in flat, proc.stdout
    assert not (tmp_path / "spark2/received").exists()
    assert not (tmp_path / "spark2/received.incoming").exists()
