"""The endpoint as a client outside the cluster sees it: the head's management address, over HTTPS,
trusting exactly the certificate the head serves (read from the head, as a client would pin it)."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from nodes import API, API_KEY, MODEL, endpoint_tls

COMPLETION = {"model": MODEL, "prompt": "The cluster", "max_tokens": 8, "temperature": 0}


def call(path: str, key: str | None = API_KEY, body: dict | None = None, timeout: float = 60) -> tuple[int, dict]:
    """One request; (status, JSON body). Connection errors raise."""
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(API + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=endpoint_tls()) as response:
            return response.status, as_json(response.read())
    except urllib.error.HTTPError as error:
        return error.code, as_json(error.read())


def as_json(raw: bytes) -> dict:
    """vLLM's JSON answer; an answer of nginx's own (an HTML error page) as {"html": its text}."""
    try:
        return json.loads(raw or b"{}")
    except ValueError:
        return {"html": raw.decode(errors="replace")}


def assert_completes() -> None:
    """A real completion is answered: status 200, the tokens asked for, some text."""
    status, body = call("/v1/completions", body=COMPLETION)
    assert status == 200, body
    assert body["usage"]["completion_tokens"] == COMPLETION["max_tokens"]
    assert isinstance(body["choices"][0]["text"], str) and body["choices"][0]["text"]


def completes(timeout: float = 10) -> bool:
    """Whether a real completion is answered with tokens right now."""
    try:
        status, body = call("/v1/completions", body=COMPLETION, timeout=timeout)
    except (OSError, ValueError):
        return False
    return status == 200 and body.get("usage", {}).get("completion_tokens") == COMPLETION["max_tokens"]


def seconds_to_first_completion(started: float, deadline: float, interval: float = 0.5) -> float | None:
    """Poll a completion until one is answered; seconds since `started` (time.monotonic()), or None."""
    while time.monotonic() - started < deadline:
        if completes():
            return time.monotonic() - started
        time.sleep(interval)
    return None
