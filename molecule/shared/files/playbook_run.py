"""Run the collection's own playbooks against the molecule inventory from a test."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def run_playbook(playbook: str, *extra: str, inventories: tuple[str, ...] = (),
                 timeout: int = 1800) -> subprocess.CompletedProcess[str]:
    """ansible-playbook REPO/playbook -i <molecule inventory> [-i more] extra..."""
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join(
        [str(REPO / ".collections"), env.get("ANSIBLE_COLLECTIONS_PATH", "")]).strip(os.pathsep)
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env["ANSIBLE_NOCOLOR"] = "1"
    command = ["ansible-playbook", str(REPO / playbook), "-i", os.environ["MOLECULE_INVENTORY_FILE"]]
    for inventory in inventories:
        command += ["-i", inventory]
    return subprocess.run([*command, *extra], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def overlay_inventory(directory: Path, host: str, host_vars_yaml: str) -> str:
    """An extra inventory that sets variables of one host over the molecule inventory
    (a later -i source wins), as a user's host_vars would. Returns its path."""
    (directory / "host_vars").mkdir(parents=True)
    (directory / "hosts.yml").write_text(f"all:\n  hosts:\n    {host}:\n")
    (directory / "host_vars" / f"{host}.yml").write_text(host_vars_yaml)
    return str(directory)
