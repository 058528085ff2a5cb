"""Run the collection's own playbooks against the molecule inventory from a testinfra test.

A thin adapter over tests/support/ansible_run.py (scenario_plugin.py puts that folder
on sys.path): it adds only what is molecule's, the scenario inventory from
MOLECULE_INVENTORY_FILE, so these runs get the same environment and command line as the tests
under tests/.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from ansible_run import REPO, run_ansible_playbook, write_overlay_inventory


def run_playbook(playbook: str, *extra: str, inventories: tuple[str, ...] = (),
                 timeout: int = 1800) -> subprocess.CompletedProcess[str]:
    """ansible-playbook REPO/playbook -i <molecule inventory> [-i more] extra..."""
    return run_ansible_playbook(REPO / playbook,
                                [os.environ["MOLECULE_INVENTORY_FILE"], *inventories],
                                extra_args=extra, timeout=timeout)


@contextmanager
def converged(*inventories: str) -> Iterator[None]:
    """The cluster converged by site.yml with these inventories over the scenario's, and back to the
    scenario's own (a completion answered) when the block ends, however it ends."""
    # Here, not at the top: endpoint reads the scenario's settings when imported, which a run of a
    # playbook does not need (tests/integration/test_molecule_playbook_run.py imports this file alone).
    from endpoint import assert_completes  # pylint: disable=import-outside-toplevel

    result = run_playbook("site.yml", inventories=inventories)
    assert result.returncode == 0, failure(result.stdout + result.stderr)
    try:
        yield
    finally:
        back = run_playbook("site.yml")
        assert back.returncode == 0, failure(back.stdout + back.stderr)
        assert_completes()


def overlay_inventory(directory: Path, host: str, host_vars_yaml: str) -> str:
    """An extra inventory that sets variables of one host over the molecule inventory
    (a later -i source wins), as a user's host_vars would. Returns its path."""
    return str(write_overlay_inventory(directory, {host: host_vars_yaml}))


def status_document(output: str) -> dict:
    """The msg of the task "Status as JSON" in the output of status.yml -e status_format=json run
    with the json callback (ANSIBLE_STDOUT_CALLBACK=json): exactly one. The json callback's
    document comes first; a notification callback (molecule enables `timer`) may print after it."""
    run, _end = json.JSONDecoder().raw_decode(output.lstrip())
    documents = [host["msg"] for play in run["plays"] for task in play["tasks"]
                 if task["task"]["name"] == "Status as JSON" for host in task["hosts"].values() if "msg" in host]
    assert len(documents) == 1, f"{len(documents)} documents"
    return documents[0]


def failure(output: str, tail: int = 3000) -> str:
    """What a failed run says first (its fatal task's message), then the end of its output."""
    start = output.find("fatal: ")
    head = output[start:start + 3000] if start >= 0 else ""
    return f"{head}\n...\n{output[-tail:]}"


def changed_per_node(output: str) -> dict[str, int]:
    """changed= of each node in a run's recap."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(spark\d)\s+:.*?changed=(\d+)", output, re.M)}


def changed_roles(output: str) -> set[str]:
    """The roles whose tasks or handlers report a change in a run's output (default callback);
    "(play)" for a change reported by a task of a play itself."""
    roles: set[str] = set()
    role = None
    for line in output.splitlines():
        if line.startswith(("TASK [", "RUNNING HANDLER [")):
            named = re.match(r"[A-Z ]+\[(?:dgx_spark\.vllm\.)?(\w+) : ", line)
            role = named.group(1) if named else "(play)"
        elif line.startswith("changed: [") and role:
            roles.add(role)
    return roles


# Roles with a preflight that a deployment (site.yml) does not run: their own playbook does.
NOT_DEPLOYED = {"bench"}  # playbooks/bench.yml


def task_names(tasks: list[dict]) -> list[str]:
    """The names a run shows for these tasks: a block's own name never shows, its tasks' do."""
    names: list[str] = []
    for task in tasks:
        if "block" in task:
            for section in ("block", "rescue", "always"):
                names += task_names(task.get(section, []))
        else:
            names.append(task["name"])
    return names


def preflight_task_names() -> dict[str, list[str]]:
    """Each deployed role's preflight task names (its tasks/preflight.yml; the cluster's checks for
    dgx_spark)."""
    names = {path.parts[-3]: task_names(yaml.safe_load(path.read_text()))
             for path in sorted((REPO / "roles").glob("*/tasks/preflight.yml"))
             if path.parts[-3] not in NOT_DEPLOYED}
    names["dgx_spark"] = task_names(yaml.safe_load((REPO / "roles/dgx_spark/tasks/inventory.yml").read_text()))
    return names


def preflight_tasks_not_shown_once(output: str) -> list[str]:
    """The preflight tasks a run's output does not show exactly once."""
    return [f"{role}: {name!r} x{output.count(f'TASK [dgx_spark.vllm.{role} : {name}]')}"
            for role, names in preflight_task_names().items() for name in names
            if output.count(f"TASK [dgx_spark.vllm.{role} : {name}]") != 1]
