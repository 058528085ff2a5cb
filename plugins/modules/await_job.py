#!/usr/bin/python
# Copyright: dgx_spark.vllm maintainers
# Apache License 2.0 (see LICENSE)
"""await_job on the node: one round of waiting for an async job, and its log's last line.

The action (plugins/action/await_job.py) runs a round per progress line until the job finished."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: await_job
short_description: Wait for an async job, showing its progress every so often
version_added: "0.1.0"
description:
  - Waits for a job started with C(async) and C(poll=0) to finish, like M(ansible.builtin.async_status) with
    C(until), and every O(interval) seconds prints, on the controller, the last line of the log file the job
    writes on the node, such as the model download's "downloaded 3.0 GiB of 120.0 GiB (2%), 110.5 MiB/s,
    elapsed 0:00:30".
  - A long download or transfer then shows how far it got instead of nothing for an hour.
  - Returns the job's own result (rc, stdout, stderr, ...) once it finished; fails when it ran past O(timeout).
  - The wait runs on the node, one module run per progress line; it looks at the job every O(poll) seconds
    there, so the task ends within O(poll) of the job (the controller's own async_status polling would cost a
    module run per look), and the round that sees the job finished brings its result back (no
    M(ansible.builtin.async_status) run after it).
options:
  jid:
    description: The job id, from the registered result of the C(async) task (C(ansible_job_id)).
    type: str
    required: true
  log:
    description: File on the node the job writes its progress lines to; its last non-empty line is shown.
    type: path
    required: true
  description:
    description: What the job does, shown before each progress line.
    type: str
    required: true
  timeout:
    description: Seconds to wait in all before failing (the job keeps running).
    type: int
    required: true
  interval:
    description: Seconds between two progress lines.
    type: int
    default: 30
  poll:
    description: Seconds between two looks at the job on the node (at most O(interval)).
    type: float
    default: 0.1
  async_dir:
    description:
      - The folder on the node where async jobs keep their status; the action sets it from the shell's
        C(async_dir), where the task that started the job put it.
    type: path
    default: ~/.ansible_async
author:
  - dgx_spark.vllm maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Download (in the background)
  ansible.builtin.shell:
    cmd: set -o pipefail; long-download 2>&1 | tee /var/log/download.log
    executable: /bin/bash
  async: 7200
  poll: 0
  register: download
  changed_when: true

- name: Wait for the download, saying how far it got every 30 s
  dgx_spark.vllm.await_job:
    jid: "{{ download.ansible_job_id }}"
    log: /var/log/download.log
    description: the model download
    timeout: 7200
  register: download_done
  failed_when: download_done.failed or download_done.rc != 0
"""

RETURN = r"""
rc:
  description: The job's exit status (its module's result is returned whole).
  returned: when the job finished
  type: int
  sample: 0
finished:
  description: Whether the job finished.
  returned: always
  type: bool
  sample: true
progress:
  description: The progress lines shown while waiting.
  returned: always
  type: list
  elements: str
  sample: ["downloaded 3.0 GiB of 120.0 GiB (2%), 110.5 MiB/s, elapsed 0:00:30"]
"""

import json
import os
import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule

ARGUMENT_SPEC: dict[str, dict[str, Any]] = {
    "jid": {"type": "str", "required": True},
    "log": {"type": "path", "required": True},
    "description": {"type": "str", "required": True},
    "timeout": {"type": "int", "required": True},
    "interval": {"type": "int", "default": 30},
    "poll": {"type": "float", "default": 0.1},
    "async_dir": {"type": "path", "default": "~/.ansible_async"},
}


def finished_job(text: str) -> dict[str, Any] | None:
    """The job's result when its status file says it finished: the wrapper's first write holds
    "started", the job's result replaces it (a file caught mid-write is not finished yet)."""
    try:
        status = json.loads(text)
    except ValueError:
        return None
    return status if isinstance(status, dict) and "started" not in status else None


def read_text(path: str) -> str:
    """The file's text, or empty while it does not exist."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def wait_for_job(status_file: str, seconds: float, poll: float) -> dict[str, Any] | None:
    """Look at the job every ``poll`` seconds for at most ``seconds``: its result once it finished."""
    until = time.monotonic() + seconds
    while True:
        job = finished_job(read_text(status_file))
        if job is not None:
            return job
        left = until - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(poll, left))


def last_line(text: str) -> str:
    """The log's last non-empty line (a progress line); carriage-return redraws count as lines."""
    lines = [line.strip() for line in text.replace("\r", "\n").splitlines() if line.strip()]
    return lines[-1] if lines else "(nothing logged yet)"


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    status_file = os.path.join(params["async_dir"], params["jid"])
    job = wait_for_job(status_file, params["interval"], max(params["poll"], 0.05))
    finished = {"finished": True, "job": job} if job is not None else {"finished": False}
    module.exit_json(changed=False, line=last_line(read_text(params["log"])), **finished)


if __name__ == "__main__":
    main()
