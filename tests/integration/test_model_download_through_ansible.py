"""roles/model/tasks/download.yml through ansible-playbook, against the Hub stand-in.

The head here is localhost (its Docker engine runs the serving image's download
container on the host network); the Hub stand-in (tools/hub-standin.py) is a
local process serving plain HTTP, slowly enough for progress lines to show. A
public model downloads without a token; a token is never sent over plain HTTP
(tests/integration/test_hub_download_resume.py downloads with one over HTTPS).
Needs root, Docker and the serving image; fails without them.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.ansible_run import flat_output, run_ansible_playbook, write_ansible_cfg
from support.images import TEST_IMAGES

REPO = Path(__file__).resolve().parents[2]
IMAGE = TEST_IMAGES["SERVING_IMAGE"]
TOKEN = "hf_token_that_must_not_leak_0123"
REPO_ID = "test-org/tiny"


pytestmark = pytest.mark.images(IMAGE, root=True)


PLAY = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: dgx_spark.vllm.model
        tasks_from: download.yml
"""


def await_first_line(hub: subprocess.Popen[bytes], log: Path, seconds: float = 30) -> None:
    """Until the Hub stand-in has written to its log (its first line says it serves); a stand-in
    that exits first, or stays silent for `seconds`, fails the test with its log."""
    deadline = time.monotonic() + seconds
    while not log.read_text():
        if hub.poll() is not None:
            pytest.fail(f"the Hub stand-in exited ({hub.returncode}) before it served; its log: {log.read_text()!r}")
        if time.monotonic() > deadline:
            pytest.fail(f"the Hub stand-in wrote nothing within {seconds:.0f} s; its log: {log.read_text()!r}")
        time.sleep(0.1)


@pytest.fixture
def hub_url(tmp_path: Path) -> Iterator[str]:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "config.json").write_text('{"model_type": "llama"}\n')
    (root / "model.safetensors").write_bytes(os.urandom(6 * 1024 * 1024))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "hub.log"
    with log.open("w") as out:
        hub = subprocess.Popen([sys.executable, str(REPO / "tools/hub-standin.py"), "--root", str(root), "--repo",
                                REPO_ID, "--bind", "127.0.0.1",
                                "--port", str(port), "--rate", str(1024 * 1024)], stdout=out, stderr=subprocess.STDOUT)
    try:
        await_first_line(hub, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        hub.terminate()
        hub.wait(10)


def run_download(tmp_path: Path, hub_url: str, token: str) -> subprocess.CompletedProcess[str]:
    data = tmp_path / "data"
    variables = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "dgx_spark_image": IMAGE, "dgx_spark_data_dir": str(data), "model_name": REPO_ID,
                 "model_download": True, "model_hf_endpoint": hub_url,
                 "model_hf_token": token, "model_download_progress_interval": 1}
    inventory = {"all": {"hosts": {"localhost": variables}}}
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    (tmp_path / "play.yml").write_text(PLAY)
    if not (tmp_path / "etc").exists():
        (tmp_path / "etc").mkdir()
        (tmp_path / "etc/hf-token.env").write_text(f"HF_TOKEN={token}\n")  # where earlier versions left it
    # dgx_spark_config_dir is a role variable: only extra vars move it
    return run_ansible_playbook(tmp_path / "play.yml", [tmp_path / "hosts.yml"], config=write_ansible_cfg(tmp_path),
                                # The base role's preflight (facts, inventory) is not this test's subject.
                                extra_vars={"dgx_spark_config_dir": str(tmp_path / "etc"),
                                            "dgx_spark_preflight_passed": ["dgx_spark"]},
                                cwd=tmp_path, timeout=300)


def hub_requests(tmp_path: Path) -> list[str]:
    """The requests the stand-in answered (its log's lines after the first)."""
    return (tmp_path / "hub.log").read_text().splitlines()[1:]


def file_gets(tmp_path: Path) -> list[str]:
    """The files' bytes the stand-in sent (GETs of /resolve/, not the HEADs that only read metadata)."""
    return [line for line in hub_requests(tmp_path)
            if json.loads(line)["method"] == "GET" and "/resolve/" in json.loads(line)["path"]]


def test_the_head_downloads_reports_progress_and_a_second_run_changes_nothing(tmp_path: Path, hub_url: str) -> None:
    proc = run_download(tmp_path, hub_url, "")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    model = tmp_path / "data/models/test-org--tiny"
    assert (model / ".dgx-spark-vllm-complete").read_text() == "main\n"  # complete for model_revision
    assert (model / "model.safetensors").stat().st_size == 6 * 1024 * 1024
    assert not (model / ".partial").exists()
    progress = [line for line in proc.stdout.splitlines()
                if line.startswith(f"localhost: download of {REPO_ID}: downloaded ")]
    assert progress, proc.stdout
    (tmp_path / "etc/hf-token.env").write_text(f"HF_TOKEN={TOKEN}\n")  # left by an earlier version
    again = run_download(tmp_path, hub_url, "")
    assert again.returncode == 0, again.stdout
    assert not (tmp_path / "etc/hf-token.env").exists()
    assert "changed=1 " in flat_output(again), again.stdout  # that removal only: no second download
    third = run_download(tmp_path, hub_url, "")
    assert third.returncode == 0 and "changed=0" in flat_output(third), third.stdout
    (model / ".dgx-spark-vllm-complete").write_text("")  # an earlier version's marker: no revision in it
    fetched_before = file_gets(tmp_path)
    checked = run_download(tmp_path, hub_url, "")
    assert checked.returncode == 0, checked.stdout
    # Checked against the listing, none fetched again (the progress line may come after the last poll).
    assert file_gets(tmp_path) == fetched_before
    assert "changed=0" in flat_output(checked), checked.stdout  # so the weights did not change
    assert (model / ".dgx-spark-vllm-complete").read_text() == "main\n"


def test_a_token_never_goes_over_plain_http_and_none_is_left(tmp_path: Path, hub_url: str) -> None:
    proc = run_download(tmp_path, hub_url, TOKEN)
    assert proc.returncode != 0
    flat = flat_output(proc)
    assert "The download of test-org/tiny on localhost stopped" in flat, proc.stdout
    assert "plain HTTP" in flat and "model_hf_endpoint" in flat, proc.stdout
    assert TOKEN not in proc.stdout + proc.stderr
    assert hub_requests(tmp_path) == []  # refused before the first request
    assert not (tmp_path / "data/models/test-org--tiny/.dgx-spark-vllm-complete").exists()
    assert not list(Path("/tmp").glob("dgx-spark-vllm-hf.*"))
