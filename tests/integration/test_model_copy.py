"""The copy of model_src to the head (roles/model/tasks/stage.yml), through Ansible.

The task is taken from the role file as it is and run on this machine over the local
connection (rsync then runs locally, as it would over SSH or `docker exec` to a node), into a
temporary head folder: --check sends nothing and says it would, a first run sends the folder,
a second changes nothing, and files gone from the source go from the head while the folder's
own markers stay.
"""
from __future__ import annotations

import json
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.ansible_run import REPO, flat_output, run_ansible_playbook, write_ansible_cfg

TASK_NAME = "Copy the model from the controller to the head (rsync, only what differs)"
MARKER = ".dgx-spark-vllm-complete"


@pytest.fixture(autouse=True)
def rsync() -> None:
    # Not a skip: a suite that passes without running this would hide a broken copy.
    assert shutil.which("rsync"), "rsync is missing on this machine: tools/ensure-rsync installs it"


def copy_task() -> dict[str, Any]:
    """The role's task, as written in stage.yml."""
    tasks = yaml.safe_load((REPO / "roles/model/tasks/stage.yml").read_text())
    return next(task for task in tasks if task.get("name") == TASK_NAME)


def run_copy(tmp_path: Path, src: Path, dest: Path, check: bool = False) -> tuple[int, str]:
    play = [{"hosts": "localhost", "gather_facts": False,
             "vars": {"model_src": str(src), "__model_dir": str(dest),
                      "dgx_spark_is_head": True},
             "tasks": [copy_task()]}]
    playbook = tmp_path / "copy.yml"
    playbook.write_text(json.dumps(play))
    proc = run_ansible_playbook(playbook, ["localhost,"],
                                extra_vars={"ansible_python_interpreter": sys.executable},
                                extra_args=["-c", "local", *(["--check", "--diff"] if check else [])],
                                config=write_ansible_cfg(tmp_path), cwd=tmp_path)
    return proc.returncode, flat_output(proc)


@pytest.fixture
def model(tmp_path: Path) -> Path:
    # Private modes on the controller: the head's copy must be readable all the same.
    src = tmp_path / "controller" / "tiny-llama"
    (src / "sub").mkdir(parents=True)
    (src / "config.json").write_text('{"model_type": "llama"}')
    (src / "model.safetensors").write_bytes(b"\0" * 65536)
    (src / "sub" / "tokenizer.json").write_text("{}")
    for path in [src, src / "sub"]:
        path.chmod(0o700)
    (src / "model.safetensors").chmod(0o600)
    return src


def test_check_mode_sends_nothing_and_says_it_would(tmp_path: Path, model: Path) -> None:
    dest = tmp_path / "head" / "models" / "tiny-llama"
    dest.mkdir(parents=True)
    rc, output = run_copy(tmp_path, model, dest, check=True)
    assert rc == 0, output
    assert "changed=1" in output, output
    assert list(dest.iterdir()) == []


def test_it_sends_the_folder_once_then_changes_nothing(tmp_path: Path, model: Path) -> None:
    dest = tmp_path / "head" / "models" / "tiny-llama"
    dest.mkdir(parents=True)
    rc, output = run_copy(tmp_path, model, dest)
    assert rc == 0 and "changed=1" in output, output
    assert (dest / "model.safetensors").read_bytes() == (model / "model.safetensors").read_bytes()
    assert (dest / "sub" / "tokenizer.json").is_file()
    # The modes the role's folder task sets (0755), whatever the controller's: else each run
    # would change the folder back and forth.
    assert stat.S_IMODE(dest.stat().st_mode) == 0o755
    assert stat.S_IMODE((dest / "sub").stat().st_mode) == 0o755
    assert stat.S_IMODE((dest / "model.safetensors").stat().st_mode) == 0o644
    rc, output = run_copy(tmp_path, model, dest)
    assert rc == 0 and "changed=0" in output, output
    rc, output = run_copy(tmp_path, model, dest, check=True)
    assert rc == 0 and "changed=0" in output, output


def test_files_gone_from_the_source_go_from_the_head_but_its_markers_stay(tmp_path: Path, model: Path) -> None:
    dest = tmp_path / "head" / "models" / "tiny-llama"
    dest.mkdir(parents=True)
    assert run_copy(tmp_path, model, dest)[0] == 0
    (dest / MARKER).touch()
    (model / "sub" / "tokenizer.json").unlink()
    rc, output = run_copy(tmp_path, model, dest)
    assert rc == 0 and "changed=1" in output, output
    assert not (dest / "sub" / "tokenizer.json").exists()
    assert (dest / MARKER).exists() and (dest / "config.json").exists()
