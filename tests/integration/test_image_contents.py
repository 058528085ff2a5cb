"""The image check of role docker_image (tasks/contents.yml), through Ansible, with a stand-in docker.

The stand-in answers `docker image inspect` with a recorded image configuration and runs
`docker run ... --entrypoint /bin/sh IMAGE -c SCRIPT ARGS...` the way the container would: the
task's own script, in this machine's /bin/sh, with a PATH holding only the programs the image
has. So what is checked is the real script and the real verdict, only the image is made up.
"""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import pytest
import yaml

from support.ansible_run import REPO, flat_output, run_ansible_playbook, write_ansible_cfg

IMAGE = "example/vllm-openai:test"
# What `docker image inspect` reports of the official image: the serving command as ENTRYPOINT.
VLLM_OPENAI_CONFIG: Mapping[str, object] = MappingProxyType({"Entrypoint": ["vllm", "serve"], "Cmd": None})
# The role's default minimum, and what the test serving image's vLLM reports.
MIN_VLLM = yaml.safe_load((REPO / "roles/docker_image/defaults/main.yml").read_text())["docker_image_vllm_min_version"]
GOOD_VLLM = "0.32.0+cpu"
FAKE_DOCKER = """\
#!/bin/sh
# docker image inspect IMAGE | docker run ... --entrypoint /bin/sh IMAGE -c SCRIPT NAME ARGS...
here=$(dirname "$0")
case "$1" in
  image)
    [ -f "$here/inspect.json" ] || { echo "Error: No such image: $4" >&2; exit 1; }
    cat "$here/inspect.json" ;;
  run)
    [ -f "$here/no-shell" ] && { echo 'exec: "/bin/sh": stat /bin/sh: no such file or directory' >&2; exit 127; }
    while [ "$1" != "-c" ]; do shift; done
    shift
    exec env -i PATH="$here/image-bin" /bin/sh -c "$@" ;;
  *) exit 2 ;;
esac
"""
PLAY = """\
- hosts: localhost
  gather_facts: false
  vars:
    dgx_spark_image: {image}
    dgx_spark_image_ref: {image}
  environment:
    PATH: "{{{{ fake_path }}}}"
  tasks:
    - name: The image check
      ansible.builtin.include_tasks: {tasks}
"""


def python3_stand_in(modules: Mapping[str, str]) -> str:
    """The image's python3: ``python3 -c PROGRAM`` prints what importing a module of ``modules`` gives, or fails.

    vLLM's version goes to file descriptor 3 (as the task's program writes it), after a log line on stdout.
    """
    cases = "".join(f"  *'import {module}'*) echo '{answer}' ;;\n" if module != "vllm"
                    else f"  *'import os, vllm'*) echo 'INFO platform=cpu'; printf '{answer}' >&3 ;;\n"
                    for module, answer in modules.items())
    return f'#!/bin/sh\ncase "$2" in\n{cases}  *) echo "ModuleNotFoundError" >&2; exit 1 ;;\nesac\n'


def make_image(directory: Path, programs: list[str], config: Mapping[str, object] | None,
               shell: bool = True, architecture: str = "amd64", vllm_version: str | None = None) -> None:
    """A stand-in docker in ``directory`` whose image holds ``programs``; no image when config is None.

    huggingface_hub and vllm_version (importing vllm prints it) are what the image's python3 finds.
    """
    directory.mkdir()
    docker = directory / "docker"
    docker.write_text(FAKE_DOCKER)
    docker.chmod(0o755)
    (directory / "image-bin").mkdir()
    modules = {"huggingface_hub as m": "/opt/venv/site-packages/huggingface_hub/__init__.py"} \
        if "huggingface_hub" in programs else {}
    if vllm_version is not None:
        modules["vllm"] = vllm_version
    for program in {("python3" if program == "huggingface_hub" else program) for program in programs}:
        path = directory / "image-bin" / program
        path.write_text(python3_stand_in(modules) if program == "python3" else "#!/bin/sh\n")
        path.chmod(0o755)
    if config is not None:
        (directory / "inspect.json").write_text(
            json.dumps([{"Id": "sha256:0", "Architecture": architecture, "Config": dict(config)}]))
    if not shell:
        (directory / "no-shell").touch()


def check(tmp_path: Path, programs: list[str], executor: str,
          config: Mapping[str, object] | None = VLLM_OPENAI_CONFIG,
          shell: bool = True, check_mode: bool = False, download: bool = False,
          architecture: str = "amd64", node_architecture: str = "x86_64",
          vllm_version: str | None = GOOD_VLLM, min_version: str = MIN_VLLM) -> tuple[int, str]:
    """Run tasks/contents.yml against the made-up image (none when config is None); (rc, flat output)."""
    make_image(tmp_path / "fake", programs, config, shell, architecture, vllm_version)
    playbook = tmp_path / "check.yml"
    playbook.write_text(PLAY.format(image=IMAGE, tasks=REPO / "roles/docker_image/tasks/contents.yml"))
    proc = run_ansible_playbook(
        playbook, ["localhost,"],
        extra_vars={"fake_path": f"{tmp_path / 'fake'}{os.pathsep}{os.environ['PATH']}",
                    "dgx_spark_executor": executor, "docker_image_hub_download": download,
                    "docker_image_vllm_min_version": min_version,
                    "ansible_python_interpreter": sys.executable, "ansible_architecture": node_architecture},
        extra_args=["-c", "local", *(["--check"] if check_mode else [])],
        config=write_ansible_cfg(tmp_path), cwd=tmp_path)
    return proc.returncode, flat_output(proc)


def test_an_image_with_vllm_and_ray_passes_whatever_its_entrypoint(tmp_path: Path) -> None:
    rc, output = check(tmp_path, ["vllm", "ray", "python3"], "ray")
    assert rc == 0, output
    assert "failed=0" in output


def test_an_image_without_ray_is_refused_for_the_ray_executor(tmp_path: Path) -> None:
    rc, output = check(tmp_path, ["vllm", "python3"], "ray")
    assert rc != 0, output
    assert (f'The image {IMAGE} on localhost (ENTRYPOINT ["vllm", "serve"], CMD null) has no ray on its PATH '
            "(dgx_spark_executor=ray runs `ray start`") in output, output
    assert "Found: vllm at " in output
    assert ("Fix: set dgx_spark_executor: mp in group_vars/sparks (vLLM's own multiprocessing executor needs no Ray), "
            "or use an image with vLLM and Ray") in output, output


def test_the_mp_executor_does_not_need_ray(tmp_path: Path) -> None:
    rc, output = check(tmp_path, ["vllm", "python3"], "mp")
    assert rc == 0, output


def test_an_image_without_vllm_names_every_missing_program(tmp_path: Path) -> None:
    config = {"Entrypoint": ["/opt/nvidia/entrypoint.sh"], "Cmd": ["bash"]}
    rc, output = check(tmp_path, ["python3"], "ray", config=config)
    assert rc != 0, output
    assert 'ENTRYPOINT ["/opt/nvidia/entrypoint.sh"], CMD ["bash"]) has no vllm, ray on its PATH' in output
    assert "every serving container runs `vllm serve`" in output
    assert "dgx_spark_executor: mp" not in output  # mp would not help: vllm is missing too


def test_a_download_on_the_head_needs_python3_with_huggingface_hub(tmp_path: Path) -> None:
    rc, output = check(tmp_path, ["vllm", "ray"], "ray", download=True)
    assert rc != 0, output
    assert ("has no python3, huggingface_hub on its PATH (the fabric gate and the Ray cluster check run python3; "
            "model_download downloads on the head with the image's python3 and huggingface_hub)") in output
    assert "and huggingface_hub for its python3 installed on its PATH" in output
    (tmp_path / "with").mkdir()
    rc, output = check(tmp_path / "with", ["vllm", "ray", "huggingface_hub"], "ray", download=True)
    assert rc == 0, output


def test_an_image_without_a_shell_is_refused_naming_why(tmp_path: Path) -> None:
    rc, output = check(tmp_path, ["vllm", "ray", "python3"], "ray", shell=False)
    assert rc != 0, output
    assert f"The image {IMAGE} on localhost could not run /bin/sh (exit 127" in output
    assert "run their command through /bin/sh -c" in output


@pytest.mark.parametrize("check_mode", [False, True])
def test_no_image_yet_checks_nothing(tmp_path: Path, check_mode: bool) -> None:
    # --check on a first deploy: the pull did not happen, so there is no image to inspect
    # (without --check, verify.yml then names the node that lacks it).
    rc, output = check(tmp_path, [], "ray", config=None, check_mode=check_mode)
    assert rc == 0, output
    assert "skipping: [localhost]" in output and "failed=0" in output


@pytest.mark.parametrize("image_architecture, node_architecture, refused", [
    ("arm64", "aarch64", False), ("amd64", "x86_64", False), ("amd64", "aarch64", True), ("arm64", "x86_64", True)])
def test_an_image_built_for_another_architecture_is_refused(
        tmp_path: Path, image_architecture: str, node_architecture: str, refused: bool) -> None:
    rc, output = check(tmp_path, ["vllm", "ray", "python3"], "ray", architecture=image_architecture,
                       node_architecture=node_architecture)
    assert (rc != 0) == refused, output
    if refused:
        assert (f"The image {IMAGE} is built for {image_architecture}, but localhost ({node_architecture}) "
                "cannot run it natively") in output, output
        assert "set dgx_spark_image in group_vars/sparks" in output


@pytest.mark.parametrize("found, refused", [
    ("0.17.1", True),  # before --distributed-timeout-seconds
    ("0.11.0", True),  # before the mp executor's --nnodes/--node-rank/--master-addr
    (MIN_VLLM, False),
    ("0.32.0+cpu", False),  # the CPU build's local part says how it was built, not which release
    ("0.19.1+582e4e37.nv26.05", False),  # NVIDIA's images' local part
    ("0.18.1rc2.dev5+g0123abc", False),  # a development build after the minimum's release
    ("0.18.0rc2.dev5+g0123abc", True),  # a pre-release of the minimum may predate what it needs
])
def test_an_image_with_a_vllm_older_than_the_units_need_is_refused(tmp_path: Path, found: str, refused: bool) -> None:
    rc, output = check(tmp_path, ["vllm", "python3"], "mp", vllm_version=found)
    assert (rc != 0) == refused, output
    if refused:
        assert (f"The image {IMAGE} on localhost has vLLM {found}, but the units' command needs vLLM {MIN_VLLM} "
                "or later (docker_image_vllm_min_version)") in output, output
        assert f"Fix: use an image with vLLM {MIN_VLLM} or later" in output
        assert ("a pre-release counts as older than its release" in output) == ("rc" in found)


def test_an_unreadable_vllm_version_is_refused_saying_so(tmp_path: Path) -> None:
    rc, output = check(tmp_path, ["vllm", "python3"], "mp", vllm_version=None)
    assert rc != 0, output
    assert "has vLLM (its version could not be read: python3 -c \"import vllm; print(vllm.__version__)\" failed)" \
        in output, output
    (tmp_path / "dev").mkdir()
    rc, output = check(tmp_path / "dev", ["vllm", "python3"], "mp", vllm_version="dev")  # vLLM's own fallback
    assert rc != 0 and "has vLLM dev, but the units' command needs" in output, output


def test_an_empty_minimum_skips_the_version_check(tmp_path: Path) -> None:
    rc, output = check(tmp_path, ["vllm", "python3"], "mp", vllm_version="0.9.0", min_version="")
    assert rc == 0, output
