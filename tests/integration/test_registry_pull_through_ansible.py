"""roles/docker_image/tasks/pull.yml through ansible-playbook, against the test registry image.

The registry (tools/images/registry: Debian's docker-registry, basic auth over TLS) runs with its
port published on 127.0.0.1, which Docker trusts without a CA; this machine's Docker engine plays
the head. The login must work, must be needed, and must leave nothing behind. Needs root, Docker
and the registry image (tools/build-test-images registry); fails without them.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.ansible_run import flat_output, run_ansible_playbook, write_ansible_cfg
from support.images import TEST_IMAGES

REPO = Path(__file__).resolve().parents[2]
REGISTRY_IMAGE = TEST_IMAGES["REGISTRY_IMAGE"]
SMALL_IMAGE = TEST_IMAGES["REGISTRY_IMAGE_BASE"]  # any small local image will do
USER, PASSWORD = "tester", "registry-password-must-not-leak-42"


pytestmark = pytest.mark.images(REGISTRY_IMAGE, SMALL_IMAGE, root=True)


def _docker(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True, **kwargs)  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def pushed_image() -> Iterator[str]:
    """Start the registry, push a small image with a login; yield its name; remove all."""
    name = f"dgx-spark-vllm-test-pull-{os.getpid()}"
    work = Path(tempfile.mkdtemp(prefix="dgx-spark-vllm-test-pull."))
    (work / "password").write_text(PASSWORD)
    (work / "certs").mkdir()
    try:
        _docker("run", "-d", "--name", name, "-p", "127.0.0.1::5000", "-e", "REGISTRY_ADDRESS=127.0.0.1",
                "-e", f"REGISTRY_USER={USER}", "-v", f"{work / 'certs'}:/certs",
                "-v", f"{work / 'password'}:/run/secrets/registry-password:ro", REGISTRY_IMAGE)
        port = _docker("port", name, "5000/tcp").stdout.split(":")[-1].strip()
        image = f"127.0.0.1:{port}/test/small:1"
        env = {**os.environ, "DOCKER_CONFIG": str(work / "client")}
        for _attempt in range(50):
            if subprocess.run(["docker", "login", "-u", USER, "--password-stdin", f"127.0.0.1:{port}"],
                              input=PASSWORD, env=env, capture_output=True, text=True, check=False).returncode == 0:
                break
            time.sleep(0.2)
        _docker("tag", SMALL_IMAGE, image)
        _docker("push", "--quiet", image, env=env)
        _docker("image", "rm", image)
        yield image
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
        shutil.rmtree(work, ignore_errors=True)


def run_pull(tmp_path: Path, image: str, tasks: tuple[str, ...] = ("pull.yml",), fresh: bool = True,
             **variables: str) -> subprocess.CompletedProcess[str]:
    """Include the role's task files on this machine (a fresh one: the image removed first)."""
    if fresh:
        subprocess.run(["docker", "image", "rm", image], capture_output=True, check=False)
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "dgx_spark_image": image, **variables}
    (tmp_path / "hosts.yml").write_text(json.dumps({"all": {"hosts": {"localhost": host}}}))
    (tmp_path / "play.yml").write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n" + "".join(
            f"    - ansible.builtin.include_role:\n        name: dgx_spark.vllm.docker_image\n"
            f"        tasks_from: {file}\n" for file in tasks))
    return run_ansible_playbook(tmp_path / "play.yml", [tmp_path / "hosts.yml"], config=write_ansible_cfg(tmp_path),
                                # The base role's preflight (facts, inventory) is not this test's subject.
                                extra_vars={"dgx_spark_preflight_passed": ["dgx_spark"]},
                                cwd=tmp_path, timeout=300)


def _leftovers() -> list[Path]:
    return list(Path(tempfile.gettempdir()).glob("dgx-spark-vllm-docker.*"))


def test_the_login_pulls_and_leaves_nothing_behind(tmp_path: Path, pushed_image: str) -> None:
    docker_config = Path.home() / ".docker/config.json"
    before = docker_config.read_text() if docker_config.exists() else None
    proc = run_pull(tmp_path, pushed_image, docker_image_registry_username=USER,
                    docker_image_registry_password=PASSWORD)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert subprocess.run(["docker", "image", "inspect", pushed_image], capture_output=True, check=False).returncode == 0
    assert PASSWORD not in proc.stdout + proc.stderr
    assert _leftovers() == []
    assert (docker_config.read_text() if docker_config.exists() else None) == before
    subprocess.run(["docker", "image", "rm", pushed_image], capture_output=True, check=False)


def test_without_the_login_the_registry_refuses(tmp_path: Path, pushed_image: str) -> None:
    proc = run_pull(tmp_path, pushed_image)
    assert proc.returncode != 0
    # (through 127.0.0.1, Docker reports its plain-HTTP retry's error rather than the 401)
    assert "Error pulling image" in flat_output(proc), proc.stdout
    assert subprocess.run(["docker", "image", "inspect", pushed_image], capture_output=True, check=False).returncode != 0


def test_a_wrong_password_fails_saying_so_without_showing_it(tmp_path: Path, pushed_image: str) -> None:
    wrong = "a-wrong-password-9f8e"
    proc = run_pull(tmp_path, pushed_image, docker_image_registry_username=USER, docker_image_registry_password=wrong)
    assert proc.returncode != 0
    flat = flat_output(proc)
    assert f"logging in to {pushed_image.split('/')[0]} as {USER} failed" in flat, proc.stdout
    assert "401 Unauthorized" in flat
    assert wrong not in proc.stdout + proc.stderr
    assert _leftovers() == []


def image_id(name: str) -> str:
    found = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", name], capture_output=True,
                           text=True, check=False)
    return found.stdout.strip() if found.returncode == 0 else ""


def test_an_image_pinned_by_digest_is_pulled_and_named_for_the_units(tmp_path: Path, pushed_image: str) -> None:
    """The registry checks the digest at the pull; Docker cannot tag a digest name, so the node names the
    image repo:sha256-HEX (dgx_spark_image_ref), which the units run; naming it again changes nothing."""
    login = {"docker_image_registry_username": USER, "docker_image_registry_password": PASSWORD}
    for run in ("tagged", "first", "again"):
        (tmp_path / run).mkdir()
    assert run_pull(tmp_path / "tagged", pushed_image, **login).returncode == 0
    digest = subprocess.run(["docker", "image", "inspect", "--format", "{{index .RepoDigests 0}}", pushed_image],
                            capture_output=True, text=True, check=True).stdout.strip()
    repository, hex_digest = digest.split("@sha256:")
    local_name = f"{repository}:sha256-{hex_digest}"
    subprocess.run(["docker", "image", "rm", pushed_image, local_name], capture_output=True, check=False)
    try:
        first = run_pull(tmp_path / "first", digest, ("pull.yml", "name_pinned.yml"), **login)
        assert first.returncode == 0, first.stdout + first.stderr
        assert image_id(local_name) == image_id(digest) != ""
        again = run_pull(tmp_path / "again", digest, ("name_pinned.yml",), fresh=False)
        assert again.returncode == 0 and "changed=0" in flat_output(again), again.stdout
        assert PASSWORD not in first.stdout + first.stderr + again.stdout + again.stderr
    finally:
        subprocess.run(["docker", "image", "rm", digest, local_name], capture_output=True, check=False)
