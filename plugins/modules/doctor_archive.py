#!/usr/bin/python
# Copyright: dgx_spark.vllm maintainers
# Apache License 2.0 (see LICENSE)
"""Write what playbooks/doctor.yml collected into one archive on the controller, with a summary, and
prove the archive holds no secret the controller knows."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: doctor_archive
short_description: Archive what playbooks/doctor.yml collected per node, with a summary, free of secrets
version_added: "0.1.0"
description:
  - Writes one C(.tar.gz) under O(dest) holding, per node, C(report.json) (kernel, driver, firmware,
    interfaces, RDMA devices and GIDs, fabric env, units, containers, memory and PSI, image, vLLM version),
    C(findings.txt) and the texts collected there (journals, env files, /proc files), and at its root
    C(summary.txt), per node what looks wrong, or that it was unreachable.
  - Then reads every member of the written archive back and looks for each value of O(secrets) in it.
    When one is found the archive is deleted and the module fails naming the setting (never its value).
  - Runs on the controller (a play on C(localhost)). In check mode nothing is written; the summary is
    still returned.
options:
  nodes:
    description: Every node of the run, in the inventory's order.
    type: list
    elements: str
    required: true
  collected:
    description:
      - Node name to the registered result of C(roles/doctor/files/collect.py) there (its stdout is JSON with
        report, texts and findings), or null where the collection did not run (C(--limit)).
      - An unreachable node's result, or one whose exit status is not 0, is reported as such.
    type: dict
    default: {}
  secrets:
    description:
      - Setting name to its value, or to a list of values (one per node), for every secret setting the
        controller knows; empty values are ignored.
    type: dict
    default: {}
  dest:
    description: Folder for the archive (created); an absolute path after C(~) expansion.
    type: path
    required: true
  name:
    description: The archive's name without C(.tar.gz), also its top folder.
    type: str
    required: true
author:
  - dgx_spark.vllm maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Write the archive and the summary
  dgx_spark.vllm.doctor_archive:
    nodes: "{{ groups['sparks'] }}"
    collected: {spark1: "{{ hostvars['spark1'].collected }}", spark2: "{{ hostvars['spark2'].collected }}"}
    secrets: {vllm_serve_api_key: "{{ vllm_serve_api_key }}"}
    dest: /home/me/dgx-spark-vllm-doctor
    name: doctor-20261203T150000Z
  register: doctor
"""

RETURN = r"""
archive:
  description: The archive's path (not written in check mode).
  returned: success
  type: str
  sample: /home/me/dgx-spark-vllm-doctor/doctor-20261203T150000Z.tar.gz
summary:
  description: The summary's lines, as in summary.txt.
  returned: success
  type: list
  elements: str
  sample: ["spark1: nothing looks wrong", "spark2: unit vllm-serve is inactive"]
"""

import io
import json
import os
import tarfile
import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule


def node_line(node: str, collected: dict[str, Any]) -> str:
    """A node's facts in one line: architecture, kernel release, GPU and driver, image, vLLM."""
    facts = collected.get("report") or {}
    kernel = (facts.get("kernel") or "? ?").split(" ")
    gpu = ((facts.get("nvidia") or {}).get("nvidia_smi") or "no nvidia-smi").splitlines()[0]
    image = facts.get("image") or {}
    return (f"{node}: {facts.get('machine', '?')}, kernel {kernel[1] if len(kernel) > 1 else '?'}, GPU {gpu}, "
            f"image {(image.get('id') or 'absent')[:19]}, vLLM {facts.get('vllm_version', '?')}")


def sort_out(nodes: list[str], collected: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(node -> what collect.py printed, node -> why nothing came from it) from the registered results."""
    reports, errors = {}, {}
    for node in nodes:
        result = collected.get(node)
        if not result:
            errors[node] = "not in this run (--limit?)"
        elif result.get("unreachable"):
            errors[node] = f"unreachable: {result.get('msg', '')}".strip()
        elif result.get("rc") != 0:
            errors[node] = f"the collection failed (exit {result.get('rc')}): {(result.get('stderr') or result.get('msg') or '')[-500:]}"
        else:
            try:
                reports[node] = json.loads(result.get("stdout") or "")
            except ValueError as error:
                errors[node] = f"the collection printed no JSON ({error})"
    return reports, errors


def secret_values(secrets: dict[str, Any]) -> dict[str, list[str]]:
    """Setting -> its non-empty values."""
    values = {}
    for setting, value in secrets.items():
        found = sorted({str(v) for v in (value if isinstance(value, list) else [value]) if v not in (None, "")})
        if found:
            values[setting] = found
    return values


def summary(nodes: list[str], reports: dict[str, Any], errors: dict[str, str]) -> list[str]:
    """Per node, what looks wrong (or that nothing does, or why nothing came from it)."""
    lines = []
    for node in nodes:
        if node not in reports:
            lines.append(f"{node}: NO REPORT: {errors.get(node) or 'unreachable'}")
            continue
        found = reports[node].get("findings") or []
        lines.append(node_line(node, reports[node]))
        lines.extend(f"  {node}: {finding}" for finding in found)
        if not found:
            lines.append(f"  {node}: nothing looks wrong")
    return lines


def members(name: str, nodes: list[str], reports: dict[str, Any], errors: dict[str, str],
            lines: list[str]) -> dict[str, str]:
    """Archive path -> text."""
    files = {f"{name}/summary.txt": "\n".join(lines) + "\n"}
    for node in nodes:
        if node not in reports:
            files[f"{name}/{node}/unreachable.txt"] = (errors.get(node) or "unreachable") + "\n"
            continue
        collected = reports[node]
        files[f"{name}/{node}/report.json"] = json.dumps(collected.get("report", {}), indent=2, sort_keys=True) + "\n"
        files[f"{name}/{node}/findings.txt"] = "".join(f"{line}\n" for line in collected.get("findings") or [])
        for text_name, text in sorted((collected.get("texts") or {}).items()):
            files[f"{name}/{node}/{text_name.lstrip('/').replace('..', '_')}"] = text
    return files


def write_archive(path: str, files: dict[str, str]) -> None:
    """A .tar.gz of these texts, readable by its owner only (journals can name hosts, users, paths)."""
    now = time.time()
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as raw, \
            tarfile.open(fileobj=raw, mode="w:gz") as archive:
        for member, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(member)
            info.size, info.mtime, info.mode = len(data), now, 0o600
            archive.addfile(info, io.BytesIO(data))


def leaks(path: str, secrets: dict[str, list[str]]) -> list[tuple[str, str]]:
    """(setting, member) for each secret value found in a member of the archive, read back."""
    found = []
    with tarfile.open(path, "r:gz") as archive:
        for info in archive.getmembers():
            extracted = archive.extractfile(info)
            if extracted is None:
                continue
            data = extracted.read()
            found.extend((setting, info.name) for setting, values in sorted(secrets.items())
                         if any(value.encode() in data for value in values))
    return found


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "nodes": {"type": "list", "elements": "str", "required": True},
            "collected": {"type": "dict", "default": {}},
            "secrets": {"type": "dict", "default": {}, "no_log": True},
            "dest": {"type": "path", "required": True},
            "name": {"type": "str", "required": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    if not os.path.isabs(params["dest"]):
        module.fail_json(msg=f"dest must be an absolute path (or start with ~), got {params['dest']!r}")
    reports, errors = sort_out(params["nodes"], params["collected"])
    lines = summary(params["nodes"], reports, errors)
    path = os.path.join(params["dest"], f"{params['name']}.tar.gz")
    if module.check_mode:
        module.exit_json(changed=True, archive=path, summary=lines)
    os.makedirs(params["dest"], mode=0o700, exist_ok=True)
    write_archive(path, members(params["name"], params["nodes"], reports, errors, lines))
    leaked = leaks(path, secret_values(params["secrets"]))
    if leaked:
        os.remove(path)
        module.fail_json(msg="the archive held a secret, so it was deleted: "
                             + "; ".join(f"{setting} in {member}" for setting, member in leaked)
                             + ". Report this as a bug of the doctor's redaction (roles/doctor/files/collect.py).")
    module.exit_json(changed=True, archive=path, summary=lines)


if __name__ == "__main__":
    main()
