"""The serving guard's metrics (roles/serving_guard/files/serving_guard.py): the text it renders passes
promtool, and the file it writes every check says what the guard saw, in the series docs name."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support.role_files import load_role_file
from support.textfile import check_metrics, samples

node = load_role_file("roles/vllm_serve/files/serving_node.py")  # imported by the guard as serving_node
sg = load_role_file("roles/serving_guard/files/serving_guard.py")


def test_the_rendered_text_parses_back_to_its_samples_whatever_the_label_values() -> None:
    awkward = 'a "quoted" back\\slash and a\nnew line'
    text = sg.render_metrics([
        sg.Metric("x_seconds", "gauge", "A help text with a \\ and a\nnew line.",
                  [({"reason": awkward, "unit": "u"}, 1.5), ({"reason": "", "unit": "u"}, 1764786353.25)]),
        sg.Metric("x_total", "counter", "A counter.", [({}, 3)]),
    ])
    check_metrics(text)
    assert samples(text) == {
        ("x_seconds", (("reason", awkward), ("unit", "u"))): 1.5,
        ("x_seconds", (("reason", ""), ("unit", "u"))): 1764786353.25,
        ("x_total", ()): 3,
    }


def read(directory: Path, unit: str = "vllm-serve") -> dict[Any, float]:
    text = (directory / f"{unit}-guard.prom").read_text(encoding="utf-8")
    check_metrics(text)
    return samples(text)


def value(found: dict[Any, float], name: str, **extra: str) -> float:
    matching = [v for (n, labels), v in found.items() if n == name and set(extra.items()) <= set(labels)]
    assert len(matching) == 1, f"{name} {extra}: {matching} in {found}"
    return matching[0]


@pytest.fixture
def quiet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """systemctl replaced (restarts recorded, all succeed) and the guard's state kept in tmp_path."""
    commands: list[list[str]] = []

    def systemctl(command: list[str], **_options: Any) -> subprocess.CompletedProcess[str]:
        commands.append(command)
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(node, "STATE_DIR", str(tmp_path / "run"))
    monkeypatch.setattr(sg.subprocess, "run", systemctl)  # support.textfile runs promtool with its own
    monkeypatch.setattr(sg, "notify", lambda _message: None)
    return commands


def test_a_head_guard_writes_its_checks_restarts_and_last_failure(
        tmp_path: Path, quiet: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    guard = sg.Guard(sg.Config(unit="vllm-serve", role="head", interval=1, failures=2, api_url="http://x",
                               model="m", timeout=1, grace=0, metrics_dir=str(metrics)))
    monkeypatch.setattr(sg, "unit_life", lambda _unit: ("active", "a" * 32, 1000.0))
    answers = iter([(True, "ok"), (False, "/v1/completions: 500 EngineDeadError"),
                    (False, "/v1/completions: 500 EngineDeadError")])
    monkeypatch.setattr(node, "completion", lambda *_args: next(answers))
    state: dict[str, Any] = {}

    sg.head_step(guard, "key", state)
    guard.observe({"ActiveState": "active", "Result": "success", "InvocationID": "a" * 32})
    guard.write_metrics()
    found = read(metrics)
    assert value(found, "dgx_spark_guard_serving", unit="vllm-serve", role="head") == 1
    assert value(found, "dgx_spark_guard_engine_starts_total") == 1
    assert value(found, "dgx_spark_guard_restarts_total") == 0
    assert value(found, "dgx_spark_guard_epoch_info", epoch="a" * 32) == 1
    assert 0 <= value(found, "dgx_spark_guard_probe_duration_seconds") < 5
    assert not any(name == "dgx_spark_guard_last_failure_timestamp_seconds" for name, _labels in found)

    for _step in range(2):
        sg.head_step(guard, "key", state)
    guard.write_metrics()
    found = read(metrics)
    assert ["systemctl", "restart", "vllm-serve"] in quiet
    assert value(found, "dgx_spark_guard_serving") == 0
    assert value(found, "dgx_spark_guard_restarts_total") == 1
    failed_at = value(found, "dgx_spark_guard_last_failure_timestamp_seconds",
                      reason="2 completions in a row failed")
    assert abs(failed_at - value(found, "dgx_spark_guard_last_update_timestamp_seconds")) < 60
    assert stat.S_IMODE(os.stat(metrics / "vllm-serve-guard.prom").st_mode) == 0o644
    assert os.listdir(metrics) == ["vllm-serve-guard.prom"]  # no temporary file left behind


def test_engine_starts_count_new_invocations_and_a_start_limit_shows(tmp_path: Path) -> None:
    guard = sg.Guard(sg.Config(unit="vllm-serve", role="worker", interval=1, failures=1, metrics_dir=str(tmp_path)))
    for invocation, active, result in [("", "inactive", "success"), ("A", "active", "success"),
                                       ("A", "active", "success"), ("B", "active", "success"),
                                       ("B", "failed", "exit-code"), ("B", "failed", "start-limit-hit")]:
        guard.observe({"ActiveState": active, "Result": result, "InvocationID": invocation})
    guard.write_metrics()
    found = read(tmp_path)
    assert value(found, "dgx_spark_guard_engine_starts_total", role="worker") == 2
    assert value(found, "dgx_spark_guard_start_limit_hit") == 1
    assert value(found, "dgx_spark_guard_last_failure_timestamp_seconds", reason="unit failed: exit-code") > 0
    assert not any(name == "dgx_spark_guard_probe_duration_seconds" for name, _labels in found)

    guard.observe({"ActiveState": "active", "Result": "success", "InvocationID": "C"})
    guard.write_metrics()
    found = read(tmp_path)
    assert value(found, "dgx_spark_guard_engine_starts_total") == 3
    assert value(found, "dgx_spark_guard_start_limit_hit") == 0


def test_a_worker_serves_while_it_belongs_to_its_heads_epoch(
        tmp_path: Path, quiet: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    guard = sg.Guard(sg.Config(unit="vllm-serve", role="worker", interval=1, failures=3, epoch_url="http://h",
                               metrics_dir=str(tmp_path)))
    monkeypatch.setattr(sg, "unit_life", lambda _unit: ("active", "w" * 32, 1000.0))
    state: dict[str, Any] = {}
    seen = []
    for epoch in [None, "E1", "E1", None, "E2"]:
        monkeypatch.setattr(sg, "read_epoch", lambda _url, _secret, e=epoch: e)
        sg.worker_step(guard, state, b"secret")
        guard.write_metrics()
        found = read(tmp_path)
        seen.append(value(found, "dgx_spark_guard_serving", role="worker"))
    assert seen == [0, 1, 1, 0, 0]
    assert value(found, "dgx_spark_guard_restarts_total") == 1
    assert value(found, "dgx_spark_guard_last_failure_timestamp_seconds",
                 reason="the head's engine restarted") > 0


def test_a_metrics_folder_that_cannot_be_written_costs_the_metrics_not_the_guard(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    guard = sg.Guard(sg.Config(unit="vllm-serve", role="worker", interval=1, failures=1,
                               metrics_dir=str(tmp_path / "missing")))
    guard.write_metrics()
    guard.write_metrics()
    assert capsys.readouterr().out.count("metrics:") == 1  # said once, not at every check


def test_no_metrics_folder_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    sg.Guard(sg.Config(unit="vllm-serve", role="worker", interval=1, failures=1)).write_metrics()
    assert os.listdir(tmp_path) == []
