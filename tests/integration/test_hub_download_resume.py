"""The role's Hub download (roles/model/files/hub_download.py), run for real.

The real huggingface_hub of the test serving image, inside that image, downloads
from the Hub stand-in (tools/hub-standin.py, a local process): it needs the
token, it reports progress, and a download cut half way resumes on the next run
(the stand-in's log counts the bytes it sent), and a file that arrives corrupted
is refused. The stand-in serves HTTPS with a certificate made for the test, which the
container trusts (SSL_CERT_FILE): the download sends a token over HTTPS only. Needs Docker and the serving
image (tools/build-test-images serving); fails without them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.images import TEST_IMAGES

REPO = Path(__file__).resolve().parents[2]
IMAGE = TEST_IMAGES["SERVING_IMAGE"]
HUB = REPO / "tools/hub-standin.py"
DOWNLOADER = REPO / "roles/model/files/hub_download.py"
REPO_ID = "test-org/resume-model"
TOKEN = "hf_test_token_for_the_stand_in"
BIG = 24 * 1024 * 1024  # served at RATE: about 6 s, cut half way
RATE = 4 * 1024 * 1024


pytestmark = pytest.mark.images(IMAGE)


@dataclass
class Hub:
    """A running stand-in: its URL and the log of what it sent."""

    url: str
    log: Path
    root: Path
    certificate: Path

    def requests(self) -> list[dict[str, object]]:
        lines = self.log.read_text().splitlines()[1:]  # the first line says what it serves
        return [json.loads(line) for line in lines if line.startswith("{")]

    def body_bytes(self, file: str) -> list[int]:
        """Bytes of body sent per GET of one file, in order."""
        return [int(r["body_bytes"]) for r in self.requests()
                if r["method"] == "GET" and str(r["path"]).endswith(f"/resolve/{self.sha()}/{file}")]

    def sha(self) -> str:
        return str(json.loads(self.log.read_text().splitlines()[0])["sha"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Hub]:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "config.json").write_text('{"model_type": "llama"}\n')
    (root / "model.safetensors").write_bytes(os.urandom(BIG))
    (tmp_path / "token").write_text(TOKEN)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(tmp_path / "hub.key"),
                    "-out", str(tmp_path / "hub.crt")], check=True, capture_output=True)
    port = _free_port()
    log = tmp_path / "hub.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, str(HUB), "--root", str(root), "--repo", REPO_ID, "--token-file",
             str(tmp_path / "token"), "--tls-cert", str(tmp_path / "hub.crt"), "--tls-key", str(tmp_path / "hub.key"),
             "--bind", "127.0.0.1", "--port", str(port), "--rate", str(RATE)],
            stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while not log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        yield Hub(f"https://127.0.0.1:{port}", log, root, tmp_path / "hub.crt")
    finally:
        process.terminate()
        process.wait(10)


def _download_argv(hub: Hub, out: Path, name: str, token: bool) -> list[str]:
    """The role's download container, on the host network to reach the stand-in on 127.0.0.1."""
    argv = ["docker", "run", "--rm", "--name", name, "--network", "host", "--user", f"{os.getuid()}:{os.getgid()}",
            "--env", f"HF_ENDPOINT={hub.url}", "--env", "HF_HOME=/out/hf-home",
            "--volume", f"{out}:/out", "--volume", f"{hub.certificate}:/hub-ca.crt:ro",
            "--env", "SSL_CERT_FILE=/hub-ca.crt", "--env", "REQUESTS_CA_BUNDLE=/hub-ca.crt"]
    if token:
        (out / "token").write_text(TOKEN)
        argv += ["--volume", f"{out / 'token'}:/run/secrets/hf-token:ro", "--env", "HF_TOKEN_PATH=/run/secrets/hf-token"]
    return argv + ["--volume", f"{DOWNLOADER}:/hub_download.py:ro", "--entrypoint", "python3", IMAGE,
                   "/hub_download.py", REPO_ID, "/out/model", "/out/model/.complete", "--interval", "1"]


def _partial_bytes(out: Path) -> int:
    partial = out / "model/.partial"
    return sum(p.stat().st_size for p in partial.rglob("*") if p.is_file()) if partial.exists() else 0


def test_without_the_token_the_hub_refuses_and_nothing_is_marked_complete(hub: Hub, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    name = f"dgx-spark-vllm-test-hubdl-{os.getpid()}-a"
    run = subprocess.run(_download_argv(hub, out, name, token=False), capture_output=True, text=True, check=False,
                         timeout=300)
    assert run.returncode != 0, run.stdout
    assert not (out / "model/.complete").exists()
    statuses = {r["status"] for r in hub.requests()}
    assert statuses == {401}, hub.requests()


def test_a_cut_download_resumes_and_reports_progress(hub: Hub, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    name = f"dgx-spark-vllm-test-hubdl-{os.getpid()}-b"
    first = subprocess.Popen(_download_argv(hub, out, name, token=True), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while _partial_bytes(out) < BIG // 2 and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.2)
        cut_at = _partial_bytes(out)
        assert BIG // 4 < cut_at < BIG, f"could not cut the download half way ({cut_at} bytes)"
    finally:
        subprocess.run(["docker", "kill", name], capture_output=True, check=False)
        first_output = first.communicate(timeout=60)[0]
    assert not (out / "model/.complete").exists()
    assert "downloaded" in first_output and "/s, elapsed 0:00:0" in first_output, first_output
    sent_first = sum(hub.body_bytes("model.safetensors"))

    second = subprocess.run(_download_argv(hub, out, name, token=True), capture_output=True, text=True,
                            check=False, timeout=300)
    assert second.returncode == 0, second.stdout + second.stderr
    assert (out / "model/.complete").exists()
    assert (out / "model/model.safetensors").read_bytes() == (hub.root / "model.safetensors").read_bytes()
    sent = hub.body_bytes("model.safetensors")
    sent_second = sum(sent) - sent_first
    resumed = [r for r in hub.requests() if r["method"] == "GET" and r.get("range")]
    print(f"resume: cut at {cut_at} of {BIG} bytes; the hub sent {sent_first} before the cut and "
          f"{sent_second} after (GETs: {sent}; ranges {[r['range'] for r in resumed]})")
    assert resumed, "the second run asked for no byte range: it started again"
    assert sent_second <= BIG - cut_at + 1024 * 1024, "the second run fetched what the first already had"
    assert f"of {24.0:.1f} MiB (100%)" in second.stdout, second.stdout


def test_a_file_that_differs_from_the_listing_is_refused(hub: Hub, tmp_path: Path) -> None:
    # Changed after the stand-in listed it: same size, other bytes (as a corrupted transfer).
    config = hub.root / "config.json"
    config.write_text(config.read_text().replace("llama", "LLAMA"))
    out = tmp_path / "out"
    out.mkdir()
    run = subprocess.run(_download_argv(hub, out, f"dgx-spark-vllm-test-hubdl-{os.getpid()}-c", token=True),
                         capture_output=True, text=True, check=False, timeout=300)
    assert run.returncode == 1, run.stdout
    assert "config.json: the Hub says" in run.stderr, run.stderr
    assert not (out / "model/config.json").exists()
    assert not (out / "model/.complete").exists()
