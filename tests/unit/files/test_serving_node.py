"""Tests of roles/vllm_serve/files/serving_node.py: the serving node's short commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.role_files import load_role_file

node = load_role_file("roles/vllm_serve/files/serving_node.py")


@pytest.mark.parametrize("restarts, seconds", [(0, 0), (1, 15), (2, 30), (3, 60), (4, 120), (5, 240), (9, 240)])
def test_backoff_doubles_from_the_first_automatic_restart_up_to_the_cap(restarts: int, seconds: float) -> None:
    assert node.backoff_seconds(restarts, 15, 240) == seconds


def test_the_wait_shows_elapsed_time_stage_why_not_ready_and_the_latest_log_line() -> None:
    assert node.progress_line(61.4, "models", "/v1/models: 404", "INFO loading weights") == \
        "61 s: models (/v1/models: 404) | INFO loading weights"
    assert node.progress_line(90, "ready", "ok", "INFO started") == "90 s: ready | INFO started"


def test_dockers_start_time_reads_as_epoch_seconds() -> None:
    assert node.started_epoch("2026-12-03T22:10:05.250000000Z") == pytest.approx(1796335805.25)
    assert node.started_epoch("2026-12-03T22:10:05Z") == pytest.approx(1796335805.0)
    assert node.started_epoch("0001-01-01T00:00:00Z") == 0.0
    assert node.started_epoch("") == 0.0


def test_the_unit_names_the_configuration_its_container_starts_with() -> None:
    unit = "ExecStart=/usr/bin/docker run --rm --name vllm-serve \\\n    --label dgx-spark-vllm.config=0f3a9c12ab45cd67 \\\n"
    assert node.unit_config_id(unit, "dgx-spark-vllm.config") == "0f3a9c12ab45cd67"
    assert node.unit_config_id("ExecStart=/usr/bin/docker run --rm", "dgx-spark-vllm.config") == ""


@pytest.mark.parametrize(("last_stage", "expected_reads"),
                         [("ready", [0.0, 10.0, 20.0]), ("down", [0.0, 10.0, 20.0, 24.0])])
def test_the_readiness_probe_reads_the_journal_every_ten_seconds_and_at_a_failed_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, last_stage: str, expected_reads: list[float]) -> None:
    clock = iter(range(0, 1000))
    now = {"t": 0.0}
    reads: list[float] = []
    stages = iter(["loading"] * int(24 / node.PROBE_EVERY) + [last_stage])

    def tick() -> float:
        return now["t"]

    def sleep(seconds: float) -> None:
        now["t"] += seconds

    monkeypatch.setattr(node.time, "monotonic", tick)
    monkeypatch.setattr(node.time, "sleep", sleep)
    monkeypatch.setattr(node, "unit_show", lambda *_: {"ActiveState": "active", "NRestarts": "0"})
    monkeypatch.setattr(node, "probe_once", lambda *_: (next(stages), "detail"))
    monkeypatch.setattr(node, "latest_log", lambda _unit: reads.append(now["t"]) or f"line {next(clock)}")
    monkeypatch.setattr(node, "api_key", lambda _path: "")
    progress = tmp_path / "progress"
    assert node.probe(["http://x", "m", "secrets", "vllm-serve", "600", "0", "hi", str(progress)]) == 0
    assert reads == expected_reads
    assert progress.read_text().startswith(f"24 s: {last_stage}")
    assert progress.read_text().endswith(f"| line {len(expected_reads) - 1}\n")


METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
vllm:num_requests_running{engine="0",model_name="tiny"} %s
vllm:num_requests_waiting{engine="0",model_name="tiny"} %s
vllm:num_requests_swapped{engine="0",model_name="tiny"} 7.0
"""


def test_the_engine_is_busy_with_what_runs_and_what_waits_not_with_anything_else() -> None:
    assert node.requests_in_engine(METRICS % ("2.0", "1.0")) == 3
    assert node.requests_in_engine(METRICS % ("0.0", "0.0")) == 0
    assert node.requests_in_engine("") == 0


@pytest.fixture
def fake_clock(monkeypatch: pytest.MonkeyPatch) -> dict[str, float]:
    now = {"t": 0.0}
    monkeypatch.setattr(node.time, "monotonic", lambda: now["t"])
    monkeypatch.setattr(node.time, "sleep", lambda seconds: now.__setitem__("t", now["t"] + seconds))
    return now


def test_the_drain_waits_until_the_engine_answers_nothing(
        fake_clock: dict[str, float], monkeypatch: pytest.MonkeyPatch) -> None:
    busy = iter([(2, 1), (1, 0), (0, 0)])
    monkeypatch.setattr(node, "request", lambda *_a, **_k: (200, METRICS % next(busy)))
    drained, waited = node.drain("http://e/metrics", 60)
    assert drained and waited == pytest.approx(2 * node.DRAIN_POLL)


def test_the_drain_gives_up_at_its_deadline(fake_clock: dict[str, float], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node, "request", lambda *_a, **_k: (200, METRICS % (1, 0)))
    drained, waited = node.drain("http://e/metrics", 3)
    assert not drained and 3 <= waited < 3 + node.DRAIN_POLL + 1e-9


def test_an_engine_that_does_not_answer_has_nothing_to_drain(
        fake_clock: dict[str, float], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node, "request", lambda *_a, **_k: (0, "connection refused"))
    assert node.drain("http://e/metrics", 60) == (True, 0.0)
