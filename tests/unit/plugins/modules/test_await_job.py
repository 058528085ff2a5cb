"""await_job's node side (plugins/modules/await_job.py): one round of waiting for an async job."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from ansible_collections.dgx_spark.vllm.plugins.modules.await_job import finished_job, last_line, wait_for_job

STARTED = json.dumps({"started": 1, "finished": 0, "ansible_job_id": "j1"})
DONE = json.dumps({"rc": 0, "stdout": "ok", "changed": True})


def test_the_wrappers_first_write_is_not_finished_the_jobs_result_is() -> None:
    assert finished_job(STARTED) is None
    assert finished_job(DONE) == json.loads(DONE)
    assert finished_job(json.dumps({"failed": 1, "msg": "could not run"})) == {"failed": 1, "msg": "could not run"}


def test_a_status_file_missing_or_caught_mid_write_is_not_finished() -> None:
    assert finished_job("") is None
    assert finished_job(DONE[:10]) is None
    assert finished_job("[1, 2]") is None


def test_a_round_ends_within_a_poll_of_the_job(tmp_path: Path) -> None:
    status = tmp_path / "j1"
    status.write_text(STARTED)
    finish = threading.Timer(0.3, status.write_text, args=(DONE,))
    finish.start()
    began = time.monotonic()
    assert wait_for_job(str(status), 10, 0.1) == json.loads(DONE)
    assert time.monotonic() - began < 1.0
    finish.join()


def test_a_round_ends_at_its_deadline_while_the_job_runs(tmp_path: Path) -> None:
    status = tmp_path / "j1"
    status.write_text(STARTED)
    began = time.monotonic()
    assert wait_for_job(str(status), 0.4, 0.1) is None
    assert 0.4 <= time.monotonic() - began < 1.0
    assert wait_for_job(str(tmp_path / "no-such-job"), 0.1, 0.05) is None


def test_the_progress_line_is_the_logs_last_non_empty_line() -> None:
    assert last_line("step 1\nstep 2\n\n") == "step 2"
    assert last_line("10%\r20%\r30%") == "30%"
    assert last_line("") == "(nothing logged yet)"
