"""Run ansible-playbook from a test: the one runner every kind of test uses.

The integration tests under tests/ and the molecule testinfra tests (through the adapter
molecule/shared/helpers/playbook_run.py) all run the collection's playbooks the same way: the
checkout is the collection (.collections links back to it), colour is off so assertions match
plain text, and the result is the finished process, for the caller to assert on.

Only the standard library is imported at module level: molecule's verifier imports this file
as the top-level module ``ansible_run`` (molecule/shared/helpers/scenario_plugin.py puts
tests/support on sys.path), the tests under tests/ as ``support.ansible_run``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
COLLECTIONS = REPO / ".collections"

# One host's variables: a mapping (written as JSON, which YAML reads) or YAML text kept
# verbatim (what a user's host_vars file would hold, tags and comments included).
HostVars = Mapping[str, Any] | str

# The return code of a run killed at its deadline (timeout(1)'s).
TIMED_OUT = 124


def ensure_collection_loader() -> None:
    """Install Ansible's collection loader on .collections once per process.

    In-process users of Ansible (the filter imported as ``ansible_collections.dgx_spark.vllm``,
    Templar, the fact-cache writer below) need it, and installing it twice is an error.
    """
    from ansible.plugins.loader import init_plugin_loader
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    if AnsibleCollectionConfig.collection_finder is None:
        init_plugin_loader([str(COLLECTIONS)])


def ansible_env(config: Path | None = None) -> dict[str, str]:
    """The environment of one ansible-playbook run.

    The checkout's .collections goes first on ANSIBLE_COLLECTIONS_PATH, so
    ``dgx_spark.vllm.*`` resolves to the working tree whatever else is installed. ``config``
    becomes ANSIBLE_CONFIG, so a test's own ansible.cfg replaces the checkout's.
    """
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join(
        [str(COLLECTIONS), env.get("ANSIBLE_COLLECTIONS_PATH", "")]).strip(os.pathsep)
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env["ANSIBLE_NOCOLOR"] = "1"
    if config is not None:
        env["ANSIBLE_CONFIG"] = str(config)
    return env


def write_overlay_inventory(directory: Path, host_vars: Mapping[str, HostVars],
                            hosts: Mapping[str, Any] | None = None) -> Path:
    """Write an extra inventory that sets variables of some hosts, as a user's host_vars would.

    Passed after the real inventory (a later -i source wins), it overrides only what it sets.
    ``hosts`` is the hosts.yml content; by default it just lists the hosts of ``host_vars``.
    Returns ``directory``, the value for -i.
    """
    (directory / "host_vars").mkdir(parents=True)
    listing = hosts if hosts is not None else {"all": {"hosts": {host: {} for host in host_vars}}}
    (directory / "hosts.yml").write_text(json.dumps(listing))
    for host, variables in host_vars.items():
        text = variables if isinstance(variables, str) else json.dumps(dict(variables))
        (directory / "host_vars" / f"{host}.yml").write_text(text)
    return directory


def write_half_down_inventory(directory: Path, group_vars: Mapping[str, Any]) -> Path:
    """Write a two-node inventory whose head, spark1, is this machine (a local connection) and whose
    worker, spark2, does not answer (SSH to 127.0.0.1:1, given up after 3 s): the playbooks that
    must work with nodes down (status, doctor). Returns the hosts.yml, the value for -i."""
    inventory = {"sparks": {
        "vars": dict(group_vars),
        "children": {
            "spark_head": {"hosts": {"spark1": {"ansible_connection": "local",
                                                "ansible_python_interpreter": sys.executable}}},
            "spark_workers": {"hosts": {"spark2": {"ansible_host": "127.0.0.1", "ansible_port": 1,
                                                   "ansible_ssh_common_args": "-o ConnectTimeout=3"}}}}}}
    hosts = directory / "hosts.yml"
    hosts.write_text(json.dumps(inventory))
    return hosts


def write_fact_cache(directory: Path, facts_by_host: Mapping[str, Mapping[str, Any]]) -> Path:
    """Write a jsonfile fact cache holding each host's ``ansible_facts``.

    Facts are stored as the setup module returns them (with the ``ansible_`` prefix), through
    Ansible's own cache plugin, so a play with gather_facts off sees them exactly as after
    setup and hostvars is Ansible's real lazy HostVars. Returns the cache directory.
    """
    ensure_collection_loader()
    from ansible.plugins.loader import cache_loader

    directory.mkdir(parents=True, exist_ok=True)
    writer = cache_loader.get("ansible.builtin.jsonfile", _uri=str(directory))
    for host, facts in facts_by_host.items():
        writer.set(host, {k if k.startswith("_") else f"ansible_{k}": v for k, v in facts.items()})
    return directory


def write_ansible_cfg(directory: Path, fact_cache: Path | None = None) -> Path:
    """Write an ansible.cfg for a test run (pass it as ``config`` to ansible_env).

    It keeps the checkout's ansible.cfg (inventory, callbacks, forks) out of the run and, with
    ``fact_cache``, reads facts from a cache written by write_fact_cache. Returns its path.
    """
    lines = ["[defaults]", f"collections_path = {COLLECTIONS}"]
    if fact_cache is not None:
        lines += ["fact_caching = ansible.builtin.jsonfile", f"fact_caching_connection = {fact_cache}"]
    path = directory / "ansible.cfg"
    path.write_text("\n".join(lines) + "\n")
    return path


def ansible_playbook_executable() -> str:
    """The ansible-playbook of the running Python's environment, else the first on PATH.

    A test then runs the same ansible-core it imported, whatever PATH says.
    """
    beside = Path(sys.executable).parent / "ansible-playbook"
    if beside.is_file():
        return str(beside)
    return shutil.which("ansible-playbook") or "ansible-playbook"


def playbook_command(playbook: Path | str, inventories: Sequence[Path | str],
                     extra_vars: Mapping[str, Any] | None = None,
                     extra_args: Sequence[str] = ()) -> list[str]:
    """ansible-playbook PLAYBOOK -i INVENTORY... [-e JSON] EXTRA_ARGS...

    At least one inventory: ansible.cfg names none, and a run must say which machines it is for.
    """
    if not inventories:
        raise ValueError(f"ansible-playbook {playbook} names no inventory: pass the inventory it is for")
    command = [ansible_playbook_executable(), str(playbook)]
    for inventory in inventories:
        command += ["-i", str(inventory)]
    if extra_vars:
        command += ["-e", json.dumps(dict(extra_vars))]
    return [*command, *extra_args]


def run_ansible_playbook(playbook: Path | str, inventories: Sequence[Path | str], *,
                         extra_vars: Mapping[str, Any] | None = None,
                         extra_args: Sequence[str] = (), config: Path | None = None,
                         cwd: Path | None = None,
                         timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """Run ansible-playbook and return the finished process; a failed run does not raise.

    Tests assert on the return code and on the output, which is the point of most of them.
    A run past ``timeout`` is killed and returns as failed (rc 124, as timeout(1) gives) with
    the output it had printed and every Python process's stacks at that moment, so that the
    test's report shows where it was.
    """
    command = playbook_command(playbook, inventories, extra_vars, extra_args)
    # faulthandler in every Python process of the run (the controller and its forked workers):
    # at the deadline each prints its threads' stacks before it ends, so a run that hung on the
    # controller says where (the ray scenario's healing site.yml stopped twice with no task running).
    env = {**ansible_env(config), "PYTHONFAULTHANDLER": "1"}
    with subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stdout, stderr = _stacks_then_end(process)
            return subprocess.CompletedProcess(
                command, TIMED_OUT, stdout=stdout,
                stderr=stderr + f"\n(the playbook run was killed: still running after {timeout} s)\n")
    return subprocess.CompletedProcess(command, process.returncode, stdout=stdout, stderr=stderr)


def _stacks_then_end(process: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGABRT to the run's whole process group (its own session: faulthandler prints each Python
    process's stacks), then SIGKILL to whatever is left; what it printed, stdout and stderr."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGABRT)
    try:
        return process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        return process.communicate()


def flat_output(proc: subprocess.CompletedProcess[str]) -> str:
    """stdout and stderr with every run of whitespace made one space.

    Ansible wraps and indents long messages; a test looks for a sentence whatever the wrapping.
    """
    return re.sub(r"\s+", " ", proc.stdout + proc.stderr)
