#!/usr/bin/python
# Copyright: dgx_spark.vllm maintainers
# Apache License 2.0 (see LICENSE)
"""Documentation of the await_job action (plugins/action/await_job.py does the work)."""

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
  - An action plugin; the controller polls the node every O(poll) seconds.
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
    description: Seconds between two looks at the job (at most O(interval)).
    type: int
    default: 5
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
