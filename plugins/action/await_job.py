# Copyright: dgx_spark.vllm maintainers
# Apache License 2.0 (see LICENSE)
"""Wait for an async job on a node, showing the last line of its log every so often.

The module documentation is in plugins/modules/await_job.py.
"""

from __future__ import annotations

import base64
import time
from typing import Any

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()

ARGUMENT_SPEC: dict[str, dict[str, Any]] = {
    "jid": {"type": "str", "required": True},
    "log": {"type": "path", "required": True},
    "description": {"type": "str", "required": True},
    "timeout": {"type": "int", "required": True},
    "interval": {"type": "int", "default": 30},
    "poll": {"type": "int", "default": 5},
}


def last_line(text: str) -> str:
    """The log's last non-empty line (a progress line); carriage-return redraws count as lines."""
    lines = [line.strip() for line in text.replace("\r", "\n").splitlines() if line.strip()]
    return lines[-1] if lines else "(nothing logged yet)"


class ActionModule(ActionBase):
    """await_job: poll async_status; every `interval` seconds display the log's last line."""

    TRANSFERS_FILES = False
    _requires_connection = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        host = (task_vars or {}).get("inventory_hostname", "?")
        began = time.monotonic()
        next_report = began + args["interval"]
        shown: list[str] = []
        while True:
            status = self._job_status(args["jid"], task_vars)
            if status.get("finished") or status.get("failed"):
                result.update(status)
                result["progress"] = shown
                return result
            now = time.monotonic()
            if now >= next_report:
                line = last_line(self._read_log(args["log"], task_vars))
                display.display(f"{host}: {args['description']}: {line}")
                shown.append(line)
                next_report = now + args["interval"]
            if now - began > args["timeout"]:
                result.update(failed=True, progress=shown, ansible_job_id=args["jid"],
                              msg=f"{args['description']} still running after {args['timeout']} s "
                                  f"(job {args['jid']}; its log: {args['log']}). Last: {shown[-1] if shown else '-'}")
                return result
            time.sleep(min(args["poll"], args["interval"]))

    def _job_status(self, jid: str, task_vars: dict[str, Any] | None) -> dict[str, Any]:
        """What ansible.builtin.async_status says of the job."""
        async_dir = self._remote_expand_user(self.get_shell_option("async_dir", default="~/.ansible_async"))
        status: dict[str, Any] = self._execute_module(
            module_name="ansible.legacy.async_status", task_vars=task_vars,
            module_args={"jid": jid, "mode": "status", "_async_dir": async_dir})
        return status

    def _read_log(self, path: str, task_vars: dict[str, Any] | None) -> str:
        """The log's text, or empty while it does not exist."""
        slurped = self._execute_module(module_name="ansible.legacy.slurp", task_vars=task_vars,
                                       module_args={"src": path})
        if slurped.get("failed"):
            return ""
        return base64.b64decode(slurped.get("content", "")).decode("utf-8", "replace")
