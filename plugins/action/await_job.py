# Copyright: dgx_spark.vllm maintainers
# Apache License 2.0 (see LICENSE)
"""Wait for an async job on a node, showing the last line of its log every so often.

The module documentation is in plugins/modules/await_job.py; the module is the node's side of
the wait: one round, up to a progress line's interval, that ends as soon as the job finished.
"""

from __future__ import annotations

import time
from typing import Any

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.dgx_spark.vllm.plugins.modules.await_job import ARGUMENT_SPEC

display = Display()


def job_result(job: dict[str, Any], jid: str) -> dict[str, Any]:
    """The finished job's result as ansible.builtin.async_status gives it: the job's own result,
    finished, its id, and the lines of its output."""
    result = dict(job, finished=True, ansible_job_id=jid)
    for stream in ("stdout", "stderr"):
        if isinstance(result.get(stream), str) and f"{stream}_lines" not in result:
            result[f"{stream}_lines"] = result[stream].splitlines()
    return result


class ActionModule(ActionBase):
    """await_job: rounds of the module on the node, a progress line after each, the last with the job's result."""

    TRANSFERS_FILES = False
    _requires_connection = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        host = (task_vars or {}).get("inventory_hostname", "?")
        # Where the job's status is: the shell's async_dir, as the async task that started it used.
        async_dir = self._remote_expand_user(self.get_shell_option("async_dir", default="~/.ansible_async"))
        began = time.monotonic()
        shown: list[str] = []
        while True:
            left = args["timeout"] - (time.monotonic() - began)
            if left <= 0:
                result.update(failed=True, progress=shown, ansible_job_id=args["jid"],
                              msg=f"{args['description']} still running after {args['timeout']} s "
                                  f"(job {args['jid']}; its log: {args['log']}). Last: {shown[-1] if shown else '-'}")
                return result
            round_args = dict(args, interval=max(1, min(args["interval"], int(left + 0.999))), async_dir=async_dir)
            waited = self._execute_module(module_name="dgx_spark.vllm.await_job", module_args=round_args,
                                          task_vars=task_vars)
            if waited.get("failed"):
                result.update(waited, progress=shown)
                return result
            if waited.get("finished"):
                result.update(job_result(waited["job"], args["jid"]))
                result["progress"] = shown
                return result
            display.display(f"{host}: {args['description']}: {waited.get('line', '')}")
            shown.append(str(waited.get("line", "")))
