"""The endpoint, from outside the cluster: the head's management address."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

from nodes import API, API_KEY, MODEL


def call(path: str, key: str | None = API_KEY, body: dict | None = None) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(API + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def test_health_answers_without_a_key():
    assert call("/health", key=None)[0] == 200


def test_models_lists_the_served_model():
    status, body = call("/v1/models")
    assert status == 200
    assert [m["id"] for m in body["data"]] == [MODEL]


def test_completion_returns_tokens_from_both_nodes():
    status, body = call("/v1/completions", body={"model": MODEL, "prompt": "The cluster", "max_tokens": 8,
                                                 "temperature": 0})
    assert status == 200, body
    assert body["usage"]["completion_tokens"] == 8
    assert isinstance(body["choices"][0]["text"], str) and body["choices"][0]["text"]


def test_requests_without_or_with_a_wrong_key_are_refused():
    body = {"model": MODEL, "prompt": "x", "max_tokens": 1}
    assert call("/v1/models", key=None)[0] == 401
    assert call("/v1/completions", key=None, body=body)[0] == 401
    assert call("/v1/completions", key="not-the-key", body=body)[0] == 401
