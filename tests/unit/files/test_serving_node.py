"""Tests of roles/vllm_serve/files/serving_node.py: the serving node's short commands."""

from __future__ import annotations

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
