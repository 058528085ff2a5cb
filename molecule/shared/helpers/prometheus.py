"""Prometheus on the cluster head, asked the way status.yml asks it: on the head itself (it listens
on 127.0.0.1 only)."""
from __future__ import annotations

import json
import shlex
from typing import Any

from nodes import HEAD, node_host
from settings import setting

PORT: int = setting("dgx_spark_prometheus_port")
URL = f"http://127.0.0.1:{PORT}"


def api(path: str, **params: str) -> Any:
    """The `data` of one GET of Prometheus' HTTP API (the parameters URL-encoded by curl)."""
    encoded = " ".join(f"--data-urlencode {shlex.quote(f'{key}={value}')}" for key, value in params.items())
    answer = json.loads(node_host(HEAD).check_output(f"curl -sf --max-time 10 -G {encoded} {shlex.quote(URL + path)}"))
    assert answer["status"] == "success", answer
    return answer["data"]


def query(expression: str) -> list[dict[str, Any]]:
    """An instant query's result vector."""
    return api("/api/v1/query", query=expression)["result"]
