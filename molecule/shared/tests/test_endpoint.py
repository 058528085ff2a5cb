"""The endpoint, from outside the cluster: the head's management address."""
from __future__ import annotations

import pytest

from endpoint import assert_completes, call
from nodes import MODEL

pytestmark = pytest.mark.gate


def test_health_answers_without_a_key():
    assert call("/health", key=None)[0] == 200


def test_models_lists_the_served_model():
    status, body = call("/v1/models")
    assert status == 200
    assert [m["id"] for m in body["data"]] == [MODEL]


def test_completion_returns_tokens():
    assert_completes()


def test_requests_without_or_with_a_wrong_key_are_refused():
    body = {"model": MODEL, "prompt": "x", "max_tokens": 1}
    assert call("/v1/models", key=None)[0] == 401
    assert call("/v1/completions", key=None, body=body)[0] == 401
    assert call("/v1/completions", key="not-the-key", body=body)[0] == 401
