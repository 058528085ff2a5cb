"""dgx_spark.vllm.await_job through ansible-playbook: a background job's progress shows while it runs."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.ansible_run import flat_output, run_ansible_playbook, write_ansible_cfg

PLAY = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: A job that logs one progress line a second
      ansible.builtin.shell:
        cmd: for i in $(seq 12); do echo "step $i of 12"; sleep 1; done > {log}; echo all steps; exit {rc}
      async: 60
      poll: 0
      register: job
      changed_when: true

    - name: Wait for it
      dgx_spark.vllm.await_job:
        jid: "{{{{ job.ansible_job_id }}}}"
        log: {log}
        description: the test job
        timeout: {timeout}
        interval: 2
        poll: 1
      register: done

    - name: What it returned
      ansible.builtin.debug:
        msg: "rc={{{{ done.rc }}}} shown={{{{ done.progress | length }}}} out={{{{ done.stdout_lines | join(',') }}}}"
"""


def run_play(tmp_path: Path, rc: int = 0, timeout: int = 60) -> subprocess.CompletedProcess[str]:
    inventory = {"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                                 "ansible_python_interpreter": sys.executable}}}}
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    (tmp_path / "play.yml").write_text(PLAY.format(log=tmp_path / "job.log", rc=rc, timeout=timeout))
    return run_ansible_playbook(tmp_path / "play.yml", [tmp_path / "hosts.yml"], config=write_ansible_cfg(tmp_path),
                                cwd=tmp_path, timeout=120)


def test_progress_lines_show_while_the_job_runs_and_its_result_comes_back(tmp_path: Path) -> None:
    proc = run_play(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    flat = flat_output(proc)
    shown = [line for line in proc.stdout.splitlines() if line.startswith("localhost: the test job: step ")]
    assert len(shown) >= 2, proc.stdout
    assert "rc=0" in flat and "out=all steps" in flat


def test_a_failed_job_fails_the_task(tmp_path: Path) -> None:
    proc = run_play(tmp_path, rc=3)
    assert proc.returncode != 0
    assert "Wait for it" in proc.stdout and "non-zero return code" in flat_output(proc), proc.stdout


def test_a_job_past_its_timeout_fails_naming_its_log(tmp_path: Path) -> None:
    proc = run_play(tmp_path, timeout=2)
    assert proc.returncode != 0
    assert "the test job still running after 2 s" in flat_output(proc), proc.stdout
