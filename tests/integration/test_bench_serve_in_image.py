"""roles/bench/files/bench_serve.py in the serving image, with the image's own aiohttp (the HTTP
library of vLLM's benchmark client): a refused request's reason carries vLLM's message, an answered
one is untouched, and the wrapper runs vLLM's own command line."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from support.images import TEST_IMAGES

REPO = Path(__file__).resolve().parents[2]
IMAGE = TEST_IMAGES["SERVING_IMAGE"]
FILES = REPO / "roles/bench/files"

pytestmark = pytest.mark.images(IMAGE)

CHECK = """
import asyncio, sys
sys.path.insert(0, "/bench")
import aiohttp
from aiohttp import web
import bench_serve

async def main():
    async def refuse(request):
        return web.json_response({"error": {"message": "This model's maximum context length is 256 tokens.",
                                            "type": "BadRequestError", "code": 400}}, status=400)
    async def answer(request):
        return web.json_response({"choices": [{"text": "hi"}]})
    app = web.Application()
    app.router.add_post("/refuse", refuse)
    app.router.add_post("/answer", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 8765).start()
    bench_serve.install(aiohttp)
    async with aiohttp.ClientSession() as session:
        for path in ("refuse", "answer"):
            async with session.post(f"http://127.0.0.1:8765/{path}", json={}) as response:
                print(response.status, response.reason, (await response.read()).decode())
    await runner.cleanup()

asyncio.run(main())
"""


def in_image(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", "run", "--rm", "--network", "none", "--read-only", "--tmpfs", "/tmp",
                           "--volume", f"{FILES}:/bench:ro", "--entrypoint", "python3", IMAGE, *argv],
                          capture_output=True, text=True, timeout=300, check=False)


def test_the_image_client_records_the_server_text() -> None:
    proc = in_image("-c", CHECK)
    assert proc.returncode == 0, proc.stderr[-2000:]
    refused, answered = proc.stdout.splitlines()[-2:]
    assert refused.startswith("400 Bad Request: This model's maximum context length is 256 tokens. {")
    assert answered == '200 OK {"choices": [{"text": "hi"}]}'


def test_the_wrapper_runs_the_vllm_command_line() -> None:
    proc = in_image("/bench/bench_serve.py", "vllm", "bench", "serve", "--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage: vllm bench serve" in proc.stdout
    assert "unwrapped" not in proc.stderr
