"""What a node runs when it receives the image from the head (roles/docker_image/vars/main.yml's
receive, commit and abort commands, through roles/fabric_transfer and ansible-playbook on this
machine: spark1 127.0.0.1 sends, spark2 127.0.0.2 receives, one local Docker engine).

An archive whose manifest tags another image as the serving name is what a forged stream carries:
`docker load` would retag the serving name as it reads. Here it arrives in full, but the sender
fails, so the digests cannot be trusted: nothing may be loaded, the serving name keeps its image ID,
and the spooled stream is deleted. A genuine stream (`docker save` of the image ID, no name in it)
is loaded and named. Needs Docker and the serving image; fails without them.
"""
from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.ansible_run import REPO, flat_output, run_ansible_playbook, write_ansible_cfg
from support.images import TEST_IMAGES

IMAGE = TEST_IMAGES["SERVING_IMAGE"]
SERVING = "dgx-spark-vllm-test/transfer-serving-name:under-test"  # the name the units run
TINY = "dgx-spark-vllm-test/transfer-tiny:under-test"

pytestmark = pytest.mark.images(IMAGE)

PLAY = """\
- hosts: sparks
  gather_facts: false
  vars_files:
    - {vars_file}
  tasks:
    - ansible.builtin.include_role:
        name: dgx_spark.vllm.fabric_transfer
      vars:
        fabric_transfer_description: the image {{{{ dgx_spark_image }}}}
        fabric_transfer_targets: [spark2]
        __docker_image_head_id: {head_id}
        fabric_transfer_send_command: cat {archive}{fail}
        fabric_transfer_receive_command: "{{{{ __docker_image_receive_command }}}}"
        fabric_transfer_commit_command: "{{{{ __docker_image_commit_command }}}}"
        fabric_transfer_abort_command: "{{{{ __docker_image_abort_command }}}}"
        fabric_transfer_timeout: 120
"""


def docker(*args: str, data: bytes | None = None) -> str:
    return subprocess.run(["docker", *args], input=data, capture_output=True, check=True).stdout.decode().strip()


def image_id(name: str) -> str:
    found = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", name], capture_output=True, text=True,
                           check=False)
    return found.stdout.strip() if found.returncode == 0 else ""


def retagged(archive: Path, target: Path, name: str) -> None:
    """A copy of a `docker save` archive whose manifest tags its image as ``name``."""
    with tarfile.open(archive) as source, tarfile.open(target, "w") as out:
        for member in source.getmembers():
            data = source.extractfile(member).read() if member.isfile() else None  # type: ignore[union-attr]
            if member.name == "manifest.json" and data is not None:
                manifest = json.loads(data)
                manifest[0]["RepoTags"] = [name]
                data = json.dumps(manifest).encode()
            if data is None:
                out.addfile(member)
            else:
                member.size = len(data)
                out.addfile(member, io.BytesIO(data))


@pytest.fixture
def tiny(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A tiny image's ID and its `docker save` by ID (no name inside); the image itself removed."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        info = tarfile.TarInfo("forged")
        info.size = 7
        tar.addfile(info, io.BytesIO(b"forged\n"))
    docker("import", "-", TINY, data=layer.getvalue())
    tiny_id = image_id(TINY)
    docker("save", "-o", str(tmp_path / "tiny.tar"), tiny_id)
    docker("image", "rm", TINY)
    try:
        yield tiny_id, tmp_path / "tiny.tar"
    finally:
        subprocess.run(["docker", "image", "rm", "--force", tiny_id], capture_output=True, check=False)


@pytest.fixture
def serving_name() -> Iterator[str]:
    """The serving name, pointing at the serving image (what the node ran before)."""
    docker("tag", IMAGE, SERVING)
    try:
        yield image_id(SERVING)
    finally:
        subprocess.run(["docker", "image", "rm", SERVING], capture_output=True, check=False)


def run_transfer(tmp_path: Path, head_id: str, archive: Path, fail: bool) -> subprocess.CompletedProcess[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        port = s.getsockname()[1]
    common = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
              "dgx_spark_transfer_port": port, "dgx_spark_image": SERVING}
    hosts = {}
    for number in (1, 2):
        staging = tmp_path / f"spark{number}/staging"
        staging.mkdir(parents=True)
        hosts[f"spark{number}"] = {**common, "dgx_spark_fabric_address": f"127.0.0.{number}",
                                   "docker_image_staging_dir": str(staging)}
    groups = {"sparks": {"children": {"spark_head": {"hosts": {"spark1": {}}},
                                      "spark_workers": {"hosts": {"spark2": {}}}}}}
    (tmp_path / "hosts.yml").write_text(json.dumps({"all": {"hosts": hosts, "children": groups}}))
    (tmp_path / "play.yml").write_text(PLAY.format(vars_file=REPO / "roles/docker_image/vars/main.yml",
                                                   head_id=head_id, archive=archive, fail="; false" if fail else ""))
    (tmp_path / "etc").mkdir(exist_ok=True)
    return run_ansible_playbook(tmp_path / "play.yml", [tmp_path / "hosts.yml"], config=write_ansible_cfg(tmp_path),
                                extra_vars={"dgx_spark_config_dir": str(tmp_path / "etc"),
                                            "dgx_spark_preflight_passed": ["dgx_spark"]},
                                cwd=tmp_path, timeout=180)


def test_a_forged_stream_is_never_loaded_and_the_serving_name_keeps_its_image(
        tmp_path: Path, tiny: tuple[str, Path], serving_name: str) -> None:
    tiny_id, archive = tiny
    forged = tmp_path / "forged.tar"
    retagged(archive, forged, SERVING)  # `docker load` of this would point the serving name at tiny_id
    proc = run_transfer(tmp_path, tiny_id, forged, fail=True)
    assert proc.returncode != 0
    assert "spark2 did not receive the image " + SERVING + " intact from spark1" in flat_output(proc), proc.stdout
    assert image_id(SERVING) == serving_name, "the serving name was retagged"
    assert image_id(tiny_id) == "", "the forged image was loaded"
    assert list((tmp_path / "spark2/staging").iterdir()) == [], "the spooled stream was left"


def test_a_genuine_stream_is_loaded_and_named(tmp_path: Path, tiny: tuple[str, Path], serving_name: str) -> None:
    tiny_id, archive = tiny
    proc = run_transfer(tmp_path, tiny_id, archive, fail=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert image_id(SERVING) == tiny_id != serving_name
    staged = list((tmp_path / "spark2/staging").iterdir())
    assert staged == [], staged
