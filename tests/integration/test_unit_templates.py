"""The Ray unit as the template module renders it, for the systemd a node runs.

Back-off between restarts (RestartSteps=, RestartMaxDelaySec=) exists from systemd 254 on: it is
rendered where the gathered facts say the node has it, and left out where it does not (a unit
with settings systemd does not know logs warnings and ignores them). The test nodes run
systemd 252, so this is where the other branch is checked.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.ansible_run import REPO, run_ansible_playbook, write_ansible_cfg, write_fact_cache

# An argument systemd would split and expand if it reached the unit unquoted.
ODD_ARGUMENT = '--labels=a b "q" 100% $HOME'
ROLE_FILES = ["roles/dgx_spark/defaults/main.yml", "roles/dgx_spark/vars/main.yml",
              "roles/ray_node/defaults/main.yml", "roles/ray_node/vars/main.yml"]
PLAY = """\
- hosts: localhost
  gather_facts: false
  vars_files: {vars_files}
  vars:
    dgx_spark_image: example/vllm:latest
    dgx_spark_fabric_address: 192.168.200.12
    dgx_spark_fabric_env: {{}}
    dgx_spark_fabric_docker_args: []
    ray_node_unit_name: ray-head
  tasks:
    - ansible.builtin.template:
        src: {template}
        dest: "{{{{ out }}}}"
        mode: "0644"
"""


def render(tmp_path: Path, systemd_version: int, **extra: object) -> str:
    out = tmp_path / "ray-head.service"
    cache = write_fact_cache(tmp_path / "facts", {"localhost": {"systemd": {"version": systemd_version}}})
    playbook = tmp_path / "render.yml"
    playbook.write_text(PLAY.format(vars_files=json.dumps([str(REPO / f) for f in ROLE_FILES]),
                                    template=REPO / "roles/ray_node/templates/ray-node.service.j2"))
    proc = run_ansible_playbook(playbook, ["localhost,"],
                                extra_vars={"out": str(out), "ray_node_start_args": ["--head", ODD_ARGUMENT], **extra},
                                extra_args=["-c", "local"], config=write_ansible_cfg(tmp_path, cache),
                                cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out.read_text()


@pytest.mark.parametrize("version, backoff", [(255, True), (254, True), (252, False)])
def test_restart_backoff_renders_where_systemd_has_it(tmp_path: Path, version: int, backoff: bool) -> None:
    unit = render(tmp_path, version)
    assert ("RestartSteps=5" in unit) == backoff
    assert ("RestartMaxDelaySec=120" in unit) == backoff
    assert "Restart=always" in unit


def test_an_argument_with_quotes_and_spaces_stays_one_argument(tmp_path: Path) -> None:
    unit = render(tmp_path, 255)
    assert '    "--labels=a b \\"q\\" 100%% $$HOME" \\\n' in unit


@pytest.mark.parametrize("enabled", [True, False])
def test_ray_runs_only_with_the_firewall_when_the_collection_runs_one(tmp_path: Path, enabled: bool) -> None:
    """Requires= and After= its unit: Ray never starts before the table is loaded, and stops with it."""
    unit = render(tmp_path, 255, firewall_enabled=enabled)
    lines = unit.splitlines()
    assert ("Requires=dgx-spark-vllm-firewall.service" in lines) == enabled
    assert ("After=dgx-spark-vllm-firewall.service" in lines) == enabled


HEX = "3f1c" * 16


@pytest.mark.parametrize("image, runs", [
    ("example/vllm:latest", "example/vllm:latest"),
    (f"docker.io/org/vllm@sha256:{HEX}", f"docker.io/org/vllm:sha256-{HEX}"),
    (f"org/vllm:26.05@sha256:{HEX}", f"org/vllm:sha256-{HEX}"),
    (f"registry.lan:5000/org/vllm@sha256:{HEX}", f"registry.lan:5000/org/vllm:sha256-{HEX}"),
])
def test_a_unit_runs_an_image_pinned_by_digest_by_its_local_name(tmp_path: Path, image: str, runs: str) -> None:
    """Docker cannot tag a digest name, and a worker's copy streamed from the head has no registry
    digest: every unit runs the name roles/docker_image gives the verified image on every node."""
    unit = render(tmp_path, 255, dgx_spark_image=image)
    assert f"    {runs} \\\n" in unit
