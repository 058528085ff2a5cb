"""Tests of roles/bench/files/bench_serve.py: a refused request's record carries what the server said,
not only the HTTP reason (vLLM's benchmark client keeps response.reason alone). The HTTP library is
a small stand-in here; tests/integration/test_bench_serve_in_image.py runs the serving image's own."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from support.role_files import load_role_file

bench = load_role_file("roles/bench/files/bench_serve.py")

CONTEXT = ('{"error": {"message": "This model\'s maximum context length is 256 tokens. However, your request has '
           '1152 input tokens.", "type": "BadRequestError", "param": null, "code": 400}}')


@pytest.mark.parametrize("body, said", [
    (CONTEXT, "This model's maximum context length is 256 tokens. However, your request has 1152 input tokens."),
    ('{"message": "The model `x` does not exist."}', "The model `x` does not exist."),
    ('{"error": "Unauthorized"}', "Unauthorized"),
    ("<html>\n<h1>502 Bad Gateway</h1>\n</html>", "<html> <h1>502 Bad Gateway</h1> </html>"),
    ("", ""),
])
def test_the_server_message_is_read_from_its_answer(body: str, said: str) -> None:
    assert bench.server_message(body) == said


def test_a_long_answer_is_cut() -> None:
    assert len(bench.server_message("x" * 2000)) == bench.MAX_TEXT


def test_the_reason_is_followed_by_the_server_text() -> None:
    assert bench.with_server_text("Bad Request", CONTEXT).startswith("Bad Request: This model's maximum context")
    assert bench.with_server_text("Bad Gateway", "") == "Bad Gateway"
    assert bench.with_server_text(None, '{"error": "Unauthorized"}') == "HTTP error: Unauthorized"


class Response:
    def __init__(self, status: int, reason: str, body: bytes) -> None:
        self.status, self.reason, self._body = status, reason, body

    async def read(self) -> bytes:
        return self._body


def fake_aiohttp(response: Response) -> Any:
    class ClientSession:
        async def _request(self, *_args: Any, **_kwargs: Any) -> Response:
            return response
    return SimpleNamespace(ClientSession=ClientSession)


def requested(response: Response) -> Response:
    aiohttp = fake_aiohttp(response)
    bench.install(aiohttp)
    return asyncio.run(aiohttp.ClientSession()._request("POST", "http://127.0.0.1/v1/completions"))


def test_a_refused_request_records_the_server_text() -> None:
    assert requested(Response(400, "Bad Request", CONTEXT.encode())).reason.startswith(
        "Bad Request: This model's maximum context length is 256 tokens.")


def test_an_answered_request_is_left_alone() -> None:
    assert requested(Response(200, "OK", b"data: {}")).reason == "OK"
