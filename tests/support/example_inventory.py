"""The collection's playbooks run locally on the example inventory (inventories/sparks), with the
two Sparks' recorded facts from a fact cache and an overlay that makes every host this machine:
playbooks/preflight.yml (two nodes, or four with spark3 and spark4 added as workers) and a
first deploy's ``site.yml --check --diff`` against fresh-node stand-ins (fresh_node.py).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from support.ansible_run import (
    REPO,
    flat_output,
    run_ansible_playbook,
    write_ansible_cfg,
    write_fact_cache,
    write_overlay_inventory,
)
from support.facts import load_facts
from support.fresh_node import DockerEngine, systemctl_verbs, write_systemctl

HOSTS = ("spark1", "spark2")
# What the user's vault.yml holds (inventories/sparks/group_vars/sparks/main.yml reads it).
VAULT = {"vault_vllm_serve_api_key": "test-key-not-a-secret"}


def local_host_vars(host_vars: dict[str, dict[str, Any]] | None,
                    hosts: Iterable[str] = HOSTS) -> dict[str, dict[str, Any]]:
    """Each host run locally by this Python, then the case's own variables over that."""
    return {host: {"ansible_connection": "local", "ansible_become": False,
                   "ansible_python_interpreter": sys.executable, **(host_vars or {}).get(host, {})}
            for host in hosts}


def run_locally(tmp: Path, playbook: Path, facts: dict[str, dict[str, Any]], *,
                inventory: str = "inventories/sparks",
                host_vars: dict[str, dict[str, Any]] | None = None,
                hosts: dict[str, Any] | None = None,
                extra: dict[str, Any] | None = None, extra_args: Sequence[str] = (),
                timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """``playbook`` on REPO/``inventory`` plus an overlay that runs every host of ``facts`` here
    (``host_vars`` over that, ``hosts`` for more hosts), facts from a cache of ``facts``, the
    user's vault and ``extra`` as extra vars; its files under ``tmp``."""
    cache = write_fact_cache(tmp / "facts", facts)
    overlay = write_overlay_inventory(tmp / "overlay", local_host_vars(host_vars, facts), hosts)
    return run_ansible_playbook(playbook, [REPO / inventory, overlay],
                                extra_vars={"dgx_spark_gather_facts": False, **VAULT, **(extra or {})},
                                extra_args=extra_args, config=write_ansible_cfg(tmp, fact_cache=cache),
                                cwd=tmp, timeout=timeout)


def run_preflight(tmp_path: Path, host_vars: dict[str, dict[str, Any]] | None = None,
                  extra: dict[str, Any] | None = None,
                  hosts: dict[str, Any] | None = None,
                  facts: dict[str, dict[str, Any]] | None = None) -> tuple[int, str]:
    """playbooks/preflight.yml on inventories/sparks plus an overlay (``host_vars``, ``hosts``)
    and ``extra`` vars, facts from the cache: ``facts`` by host, by default the two Sparks'
    recorded ones. Returns (rc, output with whitespace flattened)."""
    facts = facts if facts is not None else {host: load_facts(host) for host in HOSTS}
    proc = run_locally(tmp_path, REPO / "playbooks/preflight.yml", facts, host_vars=host_vars, hosts=hosts,
                       extra=extra)
    return proc.returncode, flat_output(proc)


# The example inventory grown to four Sparks (tests/integration/test_preflight_four_nodes.py says how).
FABRIC = {"spark1": "192.168.200.12", "spark2": "192.168.200.13",
          "spark3": "192.168.200.14", "spark4": "192.168.200.15"}
NEW_WORKERS = ("spark3", "spark4")


def facts_of(host: str) -> dict[str, Any]:
    """Recorded facts: spark1's and spark2's as recorded; a new worker's are spark2's, moved to
    its own fabric address."""
    if host not in NEW_WORKERS:
        return load_facts(host)
    text = json.dumps(load_facts("spark2")).replace(f'"{FABRIC["spark2"]}"', f'"{FABRIC[host]}"')
    assert FABRIC[host] in text
    return json.loads(text)


def run_four_node_preflight(tmp_path: Path, extra: dict[str, Any]) -> tuple[int, str]:
    """run_preflight on the example inventory, with spark3 and spark4 added as workers."""
    hosts = {"all": {"children": {"sparks": {"children": {
        "spark_workers": {"hosts": {host: {} for host in NEW_WORKERS}}}}}}}
    return run_preflight(tmp_path, host_vars={host: {"ansible_host_ib": FABRIC[host]} for host in NEW_WORKERS},
                         extra=extra, hosts=hosts, facts={host: facts_of(host) for host in FABRIC})


class FirstDeploy:
    """The finished check-mode run: its output and what the stand-ins saw."""

    def __init__(self, rc: int, output: str, docker_requests: list[str], systemctl: list[str],
                 data_dirs: list[Path]) -> None:
        self.rc, self.output = rc, output
        self.docker_requests, self.systemctl = docker_requests, systemctl
        self.data_dirs = data_dirs


def check_mode_first_deploy(tmp: Path, extra_vars: dict[str, object], extra_args: tuple[str, ...] = ()) -> FirstDeploy:
    """site.yml --check --diff (and ``extra_args``) on the example inventory with ``extra_vars``,
    against fresh-node stand-ins under ``tmp`` (support/fresh_node.py)."""
    fake_bin = tmp / "bin"
    log = tmp / "systemctl.log"
    write_systemctl(fake_bin, log)
    data_dirs = {host: tmp / host / "data" for host in HOSTS}
    # A short path: unix socket paths are limited to about 100 characters.
    socket = Path(f"/tmp/dgx-spark-vllm-test-docker-{os.getpid()}-{tmp.name[-8:]}.sock")
    with DockerEngine(socket) as engine, pytest.MonkeyPatch.context() as env:
        env.setenv("DOCKER_HOST", engine.url)
        env.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ['PATH']}")
        proc = run_locally(tmp, REPO / "site.yml", {host: load_facts(host) for host in HOSTS},
                           host_vars={host: {"dgx_spark_data_dir": str(path)} for host, path in data_dirs.items()},
                           extra={"ib_network_verify": False, **extra_vars},
                           extra_args=["--check", "--diff", *extra_args],
                           timeout=600)
        requests = engine.requests
    # The whole run, for whoever reads a failure (assertions show its tail).
    (tmp / "output.txt").write_text(proc.stdout + proc.stderr)
    return FirstDeploy(proc.returncode, flat_output(proc), requests, systemctl_verbs(log),
                       list(data_dirs.values()))


def recap(output: str, host: str) -> dict[str, int]:
    """A host's counts in a run's PLAY RECAP (ok, changed, failed, ...)."""
    found = re.search(rf"{host} : ((?:\w+=\d+ ?)+)", output)
    assert found, f"no recap for {host}"
    return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", found.group(1))}
