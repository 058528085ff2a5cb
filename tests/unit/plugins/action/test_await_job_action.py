"""await_job's controller side (plugins/action/await_job.py): the finished job's result."""
from __future__ import annotations

from ansible_collections.dgx_spark.vllm.plugins.action.await_job import job_result


def test_a_finished_job_comes_back_as_async_status_gives_it() -> None:
    result = job_result({"rc": 0, "stdout": "a\nb", "stderr": "", "changed": True}, "j1")
    assert result == {"rc": 0, "stdout": "a\nb", "stderr": "", "changed": True, "finished": True,
                      "ansible_job_id": "j1", "stdout_lines": ["a", "b"], "stderr_lines": []}


def test_a_failed_job_stays_failed_and_keeps_its_own_lines() -> None:
    result = job_result({"failed": True, "msg": "non-zero return code", "stdout_lines": ["x"], "stdout": "y"}, "j2")
    assert result["failed"] and result["msg"] == "non-zero return code"
    assert result["stdout_lines"] == ["x"] and "stderr_lines" not in result
