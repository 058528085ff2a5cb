"""The Ray and serving units of the example inventory, rendered after its preflight.

The preflight runs on inventories/sparks with the recorded facts of the two Sparks (as in
test_preflight.py); then both unit templates are rendered per node with the facts it published.
spark1 is given RDMA devices and a fake device folder, spark2 none, so one run shows both sides:

- RDMA: a node with RDMA devices gives every container that runs NCCL the device nodes,
  IPC_LOCK and an unlimited memlock (NCCL's IB transport needs all three inside the container,
  else it falls back to sockets, silently); a node without gets none of them.
- Entrypoint: each unit names what it runs (``--entrypoint``), so the image's own ENTRYPOINT
  (``vllm serve`` in vllm/vllm-openai, a wrapper script elsewhere) never receives the command.
"""
from __future__ import annotations

import json
import shlex

import pytest

from support.ansible_run import REPO, flat_output
from support.example_inventory import HOSTS, run_locally
from support.facts import load_facts

# inventories/sparks/group_vars/sparks/main.yml's image, pinned by digest, as the units run it: by
# the local name roles/docker_image gives it (dgx_spark_image_ref).
IMAGE = ("docker.io/hellohal2064/vllm-qwen3.5-gb10:"
         "sha256-6b1f0c4e9a27d3b58e0f1a2c4d6e8b0a1c3e5f7092b4d6f8a0c2e4b6d8f0a1c3")
RDMA_ARGS = ["--device", "{dev}", "--cap-add", "IPC_LOCK", "--ulimit", "memlock=-1:-1"]
# What the templates read besides the preflight's facts: the roles' defaults and vars.
ROLE_FILES = ["roles/dgx_spark/defaults/main.yml", "roles/dgx_spark/vars/main.yml",
              "roles/docker_image/defaults/main.yml", "roles/ray_node/defaults/main.yml",
              "roles/ray_node/vars/main.yml", "roles/vllm_serve/defaults/main.yml",
              "roles/vllm_serve/vars/main.yml", "roles/model/defaults/main.yml", "roles/model/vars/main.yml",
              "roles/endpoint/defaults/main.yml", "roles/endpoint/vars/main.yml"]
RENDER = """\
- name: Preflight
  ansible.builtin.import_playbook: {preflight}

- name: Render the units with what the preflight published
  hosts: sparks
  gather_facts: false
  vars_files: {vars_files}
  vars:
    ray_node_unit_name: ray-node
    ray_node_description: Ray node
    ray_node_start_args: []
  tasks:
    - name: Learn where the model is (role model)
      ansible.builtin.include_tasks: {model_path}
    - name: Render
      ansible.builtin.template:
        src: "{{{{ item.src }}}}"
        dest: "{{{{ out }}}}/{{{{ inventory_hostname }}}}-{{{{ item.name }}}}"
        mode: "0644"
      loop:
        - {{name: ray.service, src: {ray}}}
        - {{name: serve.service, src: {serve}}}
"""


def exec_start(unit: str) -> list[str]:
    """The ExecStart= command line of a rendered unit as systemd passes it on: continuations
    joined, split at unquoted spaces, then $$ and %% made the literal $ and % they stand for."""
    joined = unit.replace("\\\n", " ")
    line = next(line for line in joined.splitlines() if line.startswith("ExecStart="))
    return [arg.replace("$$", "$").replace("%%", "%") for arg in shlex.split(line.removeprefix("ExecStart="))]


def container_command(argv: list[str]) -> list[str]:
    """What `docker run ARGS IMAGE ARGS...` runs in the container when --entrypoint is given:
    the entrypoint, then every argument after the image (the image's ENTRYPOINT and CMD are
    both ignored). Fails when the unit leaves the entrypoint to the image."""
    image_at = argv.index(IMAGE)
    options = argv[:image_at]
    assert "--entrypoint" in options, f"no --entrypoint: the image's ENTRYPOINT would run {argv[image_at + 1:]}"
    return [options[options.index("--entrypoint") + 1], *argv[image_at + 1:]]


def docker_options(argv: list[str]) -> list[str]:
    """The `docker run` options of a unit's command line (between `run` and the image)."""
    return argv[argv.index("run") + 1:argv.index(IMAGE)]


def has_sequence(items: list[str], wanted: list[str]) -> bool:
    return any(items[i:i + len(wanted)] == wanted for i in range(len(items) - len(wanted) + 1))


@pytest.fixture(scope="module")
def units(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """host-unit -> rendered text, and 'dev' -> the fake RDMA device folder of spark1."""
    tmp = tmp_path_factory.mktemp("units")
    dev = tmp / "dev-infiniband"
    dev.mkdir()
    (dev / "uverbs0").touch()
    out = tmp / "out"
    out.mkdir()
    host_vars = {
        "spark1": {"dgx_spark_rdma_devices": ["rocep1s0f0", "roceP2p1s0f0"],
                   "dgx_spark_rdma_device_path": str(dev)},
        # A device folder but no RDMA device behind the fabric interface: still none.
        "spark2": {"dgx_spark_rdma_device_path": str(dev)}}
    playbook = tmp / "render.yml"
    playbook.write_text(RENDER.format(
        preflight=REPO / "playbooks/preflight.yml", model_path=REPO / "roles/model/tasks/path.yml",
        vars_files=json.dumps([str(REPO / f) for f in ROLE_FILES]),
        ray=REPO / "roles/ray_node/templates/ray-node.service.j2",
        serve=REPO / "roles/vllm_serve/templates/vllm-serve.service.j2"))
    proc = run_locally(tmp, playbook, {host: load_facts(host) for host in HOSTS}, host_vars=host_vars,
                       extra={"out": str(out)})
    assert proc.returncode == 0, flat_output(proc)[-3000:]
    rendered = {path.name.removesuffix(".service"): path.read_text() for path in out.iterdir()}
    return {**rendered, "dev": str(dev)}


@pytest.mark.parametrize("unit", ["spark1-ray", "spark1-serve"])
def test_a_node_with_rdma_gives_its_nccl_containers_the_devices_and_memlock(units: dict[str, str], unit: str) -> None:
    options = docker_options(exec_start(units[unit]))
    assert has_sequence(options, [arg.format(dev=units["dev"]) for arg in RDMA_ARGS]), options


@pytest.mark.parametrize("unit", ["spark2-ray", "spark2-serve"])
def test_a_node_without_rdma_gets_none_of_it(units: dict[str, str], unit: str) -> None:
    options = docker_options(exec_start(units[unit]))
    assert not {"--device", "--cap-add", "--ulimit"} & set(options), options
    assert not any(units["dev"] in option for option in options), options


@pytest.mark.parametrize("host", HOSTS)
def test_the_ray_unit_runs_ray_start_whatever_the_images_entrypoint(units: dict[str, str], host: str) -> None:
    command = container_command(exec_start(units[f"{host}-ray"]))
    assert command[:3] == ["ray", "start", "--block"], command
    assert "--disable-usage-stats" == command[-1]


def test_the_serving_unit_runs_its_launcher_then_vllm_serve(units: dict[str, str]) -> None:
    command = container_command(exec_start(units["spark1-serve"]))
    assert command[:2] == ["/bin/sh", "-c"], command
    # The launcher execs the arguments after its name ($0): `vllm serve MODEL ...`.
    assert command[3] == "vllm-serve" and command[4:6] == ["vllm", "serve"], command
    assert command[2].endswith('exec "$@"'), command[2]


@pytest.mark.parametrize("unit", ["spark1-ray", "spark2-ray", "spark1-serve", "spark2-serve"])
def test_ray_and_serving_require_the_firewall(units: dict[str, str], unit: str) -> None:
    """firewall_enabled is on by default: each unit starts after the firewall's and stops with it."""
    lines = units[unit].splitlines()
    assert "Requires=dgx-spark-vllm-firewall.service" in lines
    assert "After=dgx-spark-vllm-firewall.service" in lines


@pytest.mark.parametrize("host", HOSTS)
def test_the_serving_container_leaves_the_reserve_to_the_os(units: dict[str, str], host: str) -> None:
    """docker --memory: the node's MemTotal (this machine's: the nodes of this run are it) less
    vllm_serve_memory_reserve_gib (8 GiB), so that a leaking engine cannot starve sshd."""
    kib = int(next(line for line in open("/proc/meminfo") if line.startswith("MemTotal:")).split()[1])
    options = docker_options(exec_start(units[f"{host}-serve"]))
    assert has_sequence(options, ["--memory", f"{kib // 1024 - 8 * 1024}m"]), options
