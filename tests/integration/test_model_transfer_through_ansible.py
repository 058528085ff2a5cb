"""What a node runs when it receives the head's copy of the model (roles/model/vars/main.yml's
receive, commit and abort commands, through roles/fabric_transfer and ansible-playbook on this
machine: spark1 127.0.0.1 sends, spark2 127.0.0.2 receives).

A copy whose digests cannot be trusted (the sender failed after sending it all) is never
extracted: the old model stays, the spool goes. A trusted copy that could write outside the
folder is refused as a whole. A good copy replaces the old one without the archive's owners.
"""
from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

from support.ansible_run import REPO, flat_output, run_ansible_playbook, write_ansible_cfg

PLAY = """\
- hosts: sparks
  gather_facts: false
  vars_files:
    - {vars_file}
  vars:
    __model_unpack_script: "{{{{ lookup('ansible.builtin.file', '{script}') }}}}"
  tasks:
    - ansible.builtin.include_role:
        name: dgx_spark.vllm.fabric_transfer
      vars:
        fabric_transfer_description: the model {{{{ model_name }}}}
        fabric_transfer_targets: [spark2]
        fabric_transfer_send_command: cat {archive}{fail}
        fabric_transfer_receive_command: "{{{{ __model_receive_command }}}}"
        fabric_transfer_commit_command: "{{{{ __model_commit_command }}}}"
        fabric_transfer_abort_command: "{{{{ __model_abort_command }}}}"
        fabric_transfer_timeout: 120
"""


def model_archive(path: Path, *extra: str) -> Path:
    """A tar as the head sends it (tar -C DIR -cf - .), owned by uid 1234, plus ``extra`` members."""
    with tarfile.open(path, "w") as tar:
        for name, data in (("./config.json", b"new"), *((name, b"x") for name in extra)):
            info = tarfile.TarInfo(name)
            info.size, info.uid, info.gid, info.mode = len(data), 1234, 1234, 0o666
            tar.addfile(info, io.BytesIO(data))
    return path


def run_transfer(tmp_path: Path, archive: Path, fail: bool = False) -> subprocess.CompletedProcess[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        port = s.getsockname()[1]
    hosts = {}
    for number in (1, 2):
        data = tmp_path / f"spark{number}/data"
        (data / "models/test-org--m").mkdir(parents=True)
        (data / "models/test-org--m/config.json").write_text("old")
        hosts[f"spark{number}"] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                   "dgx_spark_transfer_port": port, "dgx_spark_fabric_address": f"127.0.0.{number}",
                                   "dgx_spark_data_dir": str(data), "model_name": "test-org/m"}
    groups = {"sparks": {"children": {"spark_head": {"hosts": {"spark1": {}}},
                                      "spark_workers": {"hosts": {"spark2": {}}}}}}
    (tmp_path / "hosts.yml").write_text(json.dumps({"all": {"hosts": hosts, "children": groups}}))
    (tmp_path / "play.yml").write_text(PLAY.format(vars_file=REPO / "roles/model/vars/main.yml",
                                                   script=REPO / "roles/model/files/unpack_model.py",
                                                   archive=archive, fail="; false" if fail else ""))
    (tmp_path / "etc").mkdir()
    return run_ansible_playbook(tmp_path / "play.yml", [tmp_path / "hosts.yml"], config=write_ansible_cfg(tmp_path),
                                extra_vars={"dgx_spark_config_dir": str(tmp_path / "etc"),
                                            "dgx_spark_preflight_passed": ["dgx_spark"]},
                                cwd=tmp_path, timeout=180)


def models(tmp_path: Path) -> list[str]:
    folder = tmp_path / "spark2/data"
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_copy_whose_digest_cannot_be_trusted_is_never_extracted(tmp_path: Path) -> None:
    proc = run_transfer(tmp_path, model_archive(tmp_path / "m.tar", "./sub/weights"), fail=True)
    assert proc.returncode != 0
    assert "spark2 did not receive the model test-org/m intact from spark1" in flat_output(proc), proc.stdout
    assert (tmp_path / "spark2/data/models/test-org--m/config.json").read_text() == "old"
    assert models(tmp_path) == ["models", "models/test-org--m", "models/test-org--m/config.json"]


def test_a_trusted_copy_that_could_leave_the_folder_is_refused_whole(tmp_path: Path) -> None:
    proc = run_transfer(tmp_path, model_archive(tmp_path / "m.tar", "./sub/weights", "../../escape"))
    assert proc.returncode != 0
    assert "member '../../escape' has a '..' component" in flat_output(proc), proc.stdout
    assert (tmp_path / "spark2/data/models/test-org--m/config.json").read_text() == "old"
    assert models(tmp_path) == ["models", "models/test-org--m", "models/test-org--m/config.json"]
    assert not (tmp_path / "spark2/escape").exists()


def test_a_good_copy_replaces_the_old_one_without_the_archives_owners(tmp_path: Path) -> None:
    proc = run_transfer(tmp_path, model_archive(tmp_path / "m.tar", "./sub/weights"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    config = tmp_path / "spark2/data/models/test-org--m/config.json"
    assert config.read_text() == "new"
    assert config.stat().st_uid == os.getuid() and config.stat().st_mode & 0o022 == 0
    assert models(tmp_path) == ["models", "models/test-org--m", "models/test-org--m/config.json",
                                "models/test-org--m/sub", "models/test-org--m/sub/weights"]
