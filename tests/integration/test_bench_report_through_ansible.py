"""roles/bench/tasks/report.yml through ansible-playbook, as playbooks/bench.yml's controller play
runs it: the head (here only a host in the inventory) published bench_report; localhost saves the
results, the table and the chart with the module dgx_spark.vllm.bench_report and prints the table."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.ansible_run import flat_output, run_ansible_playbook, write_ansible_cfg

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bench"

PLAY = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: dgx_spark.vllm.bench
        tasks_from: report.yml
"""


def run_report(tmp_path: Path, names: dict[int, str]) -> tuple[subprocess.CompletedProcess[str], Path]:
    dest = tmp_path / "out" / "tiny-llama" / "tp2-pp1-2nodes-mp" / "20261130T104500Z"
    report = {"dest": str(dest), "chart_title": "tiny-llama, tp2-pp1-2nodes-mp, 20261130T104500Z",
              "results": [{"concurrency": c, "json": (FIXTURES / name).read_text()} for c, name in names.items()]}
    inventory = {"all": {
        "hosts": {"localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}},
        "children": {"sparks": {"children": {"spark_head": {"hosts": {"spark1": {"bench_report": report}}}}}}}}
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    (tmp_path / "play.yml").write_text(PLAY)
    proc = run_ansible_playbook(tmp_path / "play.yml", [tmp_path / "hosts.yml"], config=write_ansible_cfg(tmp_path),
                                # The base role's preflight (facts, inventory) is not this test's subject.
                                extra_vars={"dgx_spark_preflight_passed": ["dgx_spark"]},
                                cwd=tmp_path, timeout=120)
    return proc, dest


def test_report_saves_and_prints_the_table(tmp_path: Path) -> None:
    proc, dest = run_report(tmp_path, {1: "concurrency-1.json", 4: "concurrency-4.json"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in dest.iterdir()) == ["bench.png", "concurrency-1.json", "concurrency-4.json",
                                                      "summary.txt"]
    flat = flat_output(proc)
    assert "concurrency requests/s output tok/s TTFT p50 ms TTFT p99 ms ITL p50 ms ITL p99 ms completed" in flat
    assert "changed=1" in flat


def test_report_refuses_a_run_where_nothing_succeeded(tmp_path: Path) -> None:
    proc, dest = run_report(tmp_path, {1: "no-request-succeeded.json"})
    assert proc.returncode != 0
    assert "concurrency 1: none of the 4 requests succeeded" in flat_output(proc)
    assert not dest.exists()
