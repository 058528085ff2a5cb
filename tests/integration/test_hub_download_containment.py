"""Nothing a Hub says makes the role's download (roles/model/files/hub_download.py) write outside the
model folder, a token never goes over plain HTTP, and the revision asked for is the one fetched.

A forged Hub runs in this process (a real HTTP server on 127.0.0.1) and lists what it likes; the
download runs as the role runs it, with the serving image's own huggingface_hub, in a container on
the host network whose only writable mount is /out (the model folder is /out/model). Needs Docker
and the serving image (tools/build-test-images serving); fails without them.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from support.images import TEST_IMAGES

REPO = Path(__file__).resolve().parents[2]
IMAGE = TEST_IMAGES["SERVING_IMAGE"]
DOWNLOADER = REPO / "roles/model/files/hub_download.py"
REPO_ID = "test-org/forged"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
BODY = b'{"model_type": "llama"}\n'

pytestmark = pytest.mark.images(IMAGE)


def blob_sha1(data: bytes) -> str:
    return hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()


@dataclass
class ForgedHub:
    """What the forged Hub lists (every path serves BODY), and the paths it was asked for."""

    listing: list[str]
    requests: list[str] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def hub() -> Iterator[ForgedHub]:
    forged = ForgedHub(listing=["config.json"])

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            """Quiet: the test reads forged.requests."""

        def send(self, body: bytes, kind: str = "application/json") -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("ETag", f'"{blob_sha1(BODY)}"')
            self.end_headers()
            if self.command == "GET":
                self.wfile.write(body)

        def do_HEAD(self) -> None:  # noqa: N802
            self.do_GET()

        def do_GET(self) -> None:  # noqa: N802
            forged.requests.append(self.path)
            path = self.path.split("?", 1)[0]
            if re.fullmatch(rf"/api/models/{REPO_ID}(/revision/[^/]+)?", path):
                self.send(json.dumps({"id": REPO_ID, "modelId": REPO_ID, "sha": COMMIT, "private": False,
                                      "siblings": [{"rfilename": p} for p in forged.listing]}).encode())
            elif path.startswith(f"/api/models/{REPO_ID}/tree/"):
                self.send(json.dumps([{"type": "file", "oid": blob_sha1(BODY), "size": len(BODY), "path": p}
                                      for p in forged.listing]).encode())
            elif path.startswith(f"/{REPO_ID}/resolve/"):
                self.send(BODY, "application/octet-stream")
            else:
                self.send_error(404)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    forged.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield forged
    finally:
        server.shutdown()
        server.server_close()


def download(hub: ForgedHub, out: Path, *extra: str, token: bool = False) -> subprocess.CompletedProcess[str]:
    """The role's download container: its only writable mount is /out; the model folder /out/model."""
    argv = ["docker", "run", "--rm", "--network", "host", "--user", f"{os.getuid()}:{os.getgid()}",
            "--env", f"HF_ENDPOINT={hub.url}", "--env", "HF_HOME=/out/model/.cache/hf-home",
            "--volume", f"{out}:/out", "--volume", f"{DOWNLOADER}:/hub_download.py:ro"]
    if token:
        (out.parent / "token").write_text("hf_secret_token_never_over_http")
        argv += ["--volume", f"{out.parent / 'token'}:/run/secrets/hf-token:ro",
                 "--env", "HF_TOKEN_PATH=/run/secrets/hf-token"]
    argv += ["--entrypoint", "python3", IMAGE, "/hub_download.py", REPO_ID, "/out/model", "/out/model/.done",
             "--interval", "1", *extra]
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)


def outside_the_model_folder(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*")
                  if p != out / "model" and out / "model" not in p.parents)


@pytest.fixture
def out(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    (folder / "model").mkdir(parents=True)
    return folder


@pytest.mark.parametrize("forged_path", ["../escape", "/etc/x", "sub/../../escape", ".dgx-spark-vllm-complete"])
def test_a_listed_path_that_leaves_the_folder_is_refused_before_anything_is_fetched(
        hub: ForgedHub, out: Path, forged_path: str) -> None:
    hub.listing = ["config.json", forged_path]
    run = download(hub, out)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "refused" in run.stderr and repr(forged_path) in run.stderr, run.stderr
    assert outside_the_model_folder(out) == []
    assert not (out / "model/.done").exists()
    assert not any("/resolve/" in r for r in hub.requests), hub.requests  # refused from the listing alone


def test_a_path_through_a_link_out_of_the_folder_is_refused(hub: ForgedHub, out: Path) -> None:
    (out / "elsewhere").mkdir()
    (out / "model/weights").symlink_to("../elsewhere")  # left in the folder, pointing out of it
    hub.listing = ["config.json", "weights/model.safetensors"]
    run = download(hub, out)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "'weights/model.safetensors'" in run.stderr and "outside" in run.stderr, run.stderr
    assert list((out / "elsewhere").iterdir()) == []
    assert not any("/resolve/" in r for r in hub.requests), hub.requests


def test_a_clean_listing_downloads_at_the_commit_of_the_revision_asked_for(hub: ForgedHub, out: Path) -> None:
    hub.listing = ["config.json", "sub/tokenizer.json"]
    run = download(hub, out, "--revision", "v1.0")
    assert run.returncode == 0, run.stdout + run.stderr
    assert (out / "model/sub/tokenizer.json").read_bytes() == BODY
    assert (out / "model/.done").read_text() == "v1.0\n"
    assert f"/api/models/{REPO_ID}/revision/v1.0" in hub.requests, hub.requests
    fetched = [r for r in hub.requests if "/resolve/" in r]
    assert fetched and all(f"/resolve/{COMMIT}/" in r for r in fetched), fetched
    assert outside_the_model_folder(out) == []


@pytest.mark.parametrize("revision", ["../../etc", "main branch", "-rf", "a//b"])
def test_a_revision_that_is_not_a_name_or_commit_is_refused(hub: ForgedHub, out: Path, revision: str) -> None:
    run = download(hub, out, f"--revision={revision}")
    assert run.returncode == 1
    assert "is not a branch, tag or commit" in run.stderr, run.stderr
    assert hub.requests == []


def test_a_token_is_never_sent_over_plain_http(hub: ForgedHub, out: Path) -> None:
    run = download(hub, out, token=True)
    assert run.returncode == 1
    assert "plain HTTP" in run.stderr and "model_hf_endpoint" in run.stderr, run.stderr
    assert "hf_secret_token_never_over_http" not in run.stdout + run.stderr
    assert hub.requests == []
