"""Run `vllm bench serve` keeping the server's own error text of every failed request.

vLLM's benchmark client records a refused request's HTTP reason only (``output.error =
response.reason``, e.g. "Bad Request"), never reading vLLM's answer, which says why (e.g.
"This model's maximum context length is 256 tokens..."). This wrapper reads the body of every
answer with an error status before the client sees it and appends its message to the reason, so
the saved result's ``errors`` carry it; then it runs vLLM's own command line unchanged. Where the
client's HTTP library is not the one this expects, the benchmark runs without the wrapper.

Usage (in the serving image; roles/bench/tasks/main.yml hands this file in on stdin):
  python3 bench_serve.py vllm bench serve ARGS...
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any

MAX_TEXT = 500


def server_message(body: str) -> str:
    """vLLM's error message from its JSON answer ({"error": {"message": ...}} or {"message": ...}),
    else the body itself, on one line and at most MAX_TEXT characters."""
    text = body.strip()
    try:
        answer = json.loads(text)
    except ValueError:
        answer = None
    if isinstance(answer, dict):
        error = answer.get("error")
        found = error.get("message") if isinstance(error, dict) else error if isinstance(error, str) else None
        text = str(found or answer.get("message") or answer.get("detail") or text)
    return " ".join(text.split())[:MAX_TEXT]


def with_server_text(reason: str | None, body: str) -> str:
    """The HTTP reason followed by what the server said, e.g. "Bad Request: This model's ..."."""
    message = server_message(body)
    return f"{reason or 'HTTP error'}: {message}" if message else (reason or "")


def install(aiohttp: Any) -> None:
    """Wrap aiohttp's ClientSession._request so that an answer with an error status has its body read
    (aiohttp keeps it for a later read) and its message appended to the reason the client records."""
    original = aiohttp.ClientSession._request

    async def _request(self: Any, *args: Any, **kwargs: Any) -> Any:
        response = await original(self, *args, **kwargs)
        if response.status >= 400:
            try:
                body = (await response.read()).decode(errors="replace")
            except Exception:  # pylint: disable=broad-exception-caught  # the reason alone, as before
                body = ""
            response.reason = with_server_text(response.reason, body)
        return response

    aiohttp.ClientSession._request = _request


def main(argv: list[str]) -> int:
    """argv: vllm bench serve ARGS...; runs vLLM's command line in this process, wrapped."""
    try:
        import aiohttp  # pylint: disable=import-outside-toplevel
        from vllm.entrypoints.cli.main import main as vllm_main  # pylint: disable=import-outside-toplevel
        install(aiohttp)
    except (ImportError, AttributeError) as error:
        print(f"bench_serve.py: running vllm unwrapped (failed requests show their HTTP reason only): {error}",
              file=sys.stderr, flush=True)
        os.execvp(argv[0], argv)
    sys.argv = argv
    return int(vllm_main() or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
