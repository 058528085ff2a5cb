"""The front door, from outside the cluster (the head's management address): only /v1/ and /health
pass the endpoint, over HTTPS with the certificate the deploy made. Every other route vLLM has
(read from its own OpenAPI schema, on the engine's fabric address) is nginx's 404, with or
without the key. Shared by the scenarios (each links this file into its tests/)."""
from __future__ import annotations

import hashlib
import json
import re
import socket
import time
import urllib.error
import urllib.request

import pytest

from endpoint import call
from nodes import API, API_KEY, API_PORT, ENGINE_PORT, FABRIC, HEAD, HEAD_MANAGEMENT, endpoint_tls, node_host
from playbook_run import failure, run_playbook

pytestmark = pytest.mark.gate

# Routes of vLLM's that answer without the key, or that no client of the API needs; some are
# mounted outside the schema (/metrics). The schema's own routes are added to these.
KNOWN_INTERNAL = ["/metrics", "/docs", "/redoc", "/openapi.json", "/version", "/load", "/ping",
                  "/tokenize", "/detokenize", "/invocations", "/scale_elastic_ep", "/server_info"]
# Paths that try to get past the /v1/ location to an internal route.
TRICKS = ["/v1/../metrics", "/v1/%2e%2e/metrics", "/v1/..%2fmetrics", "//metrics", "/V1/models"]


@pytest.fixture(scope="module")
def engine_routes() -> list[str]:
    """Every path of vLLM's OpenAPI schema, from the engine itself (on the head, on its fabric
    address: the LAN cannot reach it), path parameters filled in."""
    schema = json.loads(node_host(HEAD).check_output(
        f"curl -sf --max-time 30 http://{FABRIC[HEAD]}:{ENGINE_PORT}/openapi.json"))
    paths = [re.sub(r"\{[^}]*\}", "x", path) for path in schema["paths"]]
    assert "/v1/models" in paths and "/health" in paths, sorted(paths)
    return sorted(set(paths) | set(KNOWN_INTERNAL))


def send(path: str, method: str, key: str | None) -> tuple[int, bytes]:
    """One request to the front over HTTPS (its certificate pinned); (status, body)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    data = b"{}" if method == "POST" else None
    if data is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(API + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30, context=endpoint_tls()) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def from_nginx(body: bytes) -> bool:
    """nginx's own error page, not vLLM's JSON answer ({"detail": ...} or {"error": ...})."""
    return body.lstrip().startswith(b"<html>")


def test_only_v1_and_health_pass_the_front_with_or_without_the_key(engine_routes):
    passed = [(method, path, key is not None, status)
              for path in engine_routes if not (path.startswith("/v1/") or path == "/health")
              for method in ("GET", "POST") for key in (None, API_KEY)
              for status, body in [send(path, method, key)] if status != 404 or not from_nginx(body)]
    print(f"{len(engine_routes)} routes of the engine's schema and known internal ones; answered other than "
          f"nginx's 404: {passed}")
    assert not passed


def test_paths_that_try_to_get_past_v1_are_not_found():
    for path in TRICKS:
        for key in (None, API_KEY):
            status, body = send(path, "GET", key)
            assert status == 404, (path, status, body[:200])
            assert b'"object"' not in body and b"vllm" not in body.lower(), (path, body[:200])


def test_models_needs_the_key_over_tls():
    assert call("/v1/models", key=None)[0] == 401
    assert call("/v1/models", key="not-the-key")[0] == 401
    assert call("/v1/models")[0] == 200


def test_health_says_only_up():
    status, body = send("/health", "GET", None)
    assert (status, body) == (200, b"")


def test_plain_http_gets_no_answer_from_the_api():
    """No plain HTTP on the front: nginx's 400 for a plain request on its HTTPS port."""
    request = urllib.request.Request(f"http://{HEAD_MANAGEMENT}:{API_PORT}/v1/models",
                                     headers={"Authorization": f"Bearer {API_KEY}"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)  # pylint: disable=consider-using-with
    assert refused.value.code == 400


def served_fingerprint() -> str:
    """SHA-256 of the certificate the front serves, as openssl prints it (AA:BB:...), from a TLS
    handshake that trusts exactly the certificate read from the head."""
    with socket.create_connection((HEAD_MANAGEMENT, API_PORT), timeout=30) as raw:
        with endpoint_tls().wrap_socket(raw, server_hostname=HEAD_MANAGEMENT) as tls:
            der = tls.getpeercert(binary_form=True)
    digest = hashlib.sha256(der).hexdigest().upper()
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def test_the_served_certificate_is_the_one_the_run_reports():
    """playbooks/status.yml prints the fingerprint the deploy published (endpoint_tls_fingerprint);
    it is the certificate's the front serves, and that certificate names the management address
    (the handshake checks the name)."""
    fingerprint = served_fingerprint()
    result = run_playbook("playbooks/status.yml")
    output = result.stdout + result.stderr
    assert result.returncode == 0, failure(output)
    # \s+: the YAML callback may break the report's long line at any of these spaces.
    reported = re.findall(r"TLS\s+certificate\s+SHA-256\s+((?:[0-9A-F]{2}:){31}[0-9A-F]{2})", output)
    print(f"served {fingerprint}, reported {reported}")
    assert reported and set(reported) == {fingerprint}, output[-3000:]


def test_no_engine_reachable_is_a_503_with_retry_after():
    """While the head cannot reach any engine (its connections to the engine port refused, by a
    table of the test's own), /v1/ and /health answer 503 with Retry-After and an OpenAI-style
    error, not a refused connection or nginx's 502; after the fault, completions again."""
    head = node_host(HEAD)
    fault = (f"table inet dgx_spark_test_no_engine {{\n chain output {{\n type filter hook output priority 0;\n"
             f" tcp dport {ENGINE_PORT} reject with tcp reset\n }}\n}}")
    try:
        head.check_output(f"nft -f - <<'EOF'\n{fault}\nEOF")
        for path, method in (("/v1/models", "GET"), ("/v1/completions", "POST"), ("/health", "GET")):
            request = urllib.request.Request(API + path, data=b"{}" if method == "POST" else None, method=method,
                                             headers={"Authorization": f"Bearer {API_KEY}",
                                                      "Content-Type": "application/json"})
            try:
                urllib.request.urlopen(request, timeout=30, context=endpoint_tls()).close()
                raise AssertionError(f"{path}: answered while no engine is reachable")
            except urllib.error.HTTPError as error:
                body = error.read()
                assert error.code == 503, (path, error.code, body[:300])
                assert int(error.headers["Retry-After"]) > 0, (path, dict(error.headers))
                if path != "/health":
                    assert json.loads(body)["error"]["code"] == 503, body
    finally:
        head.run("nft delete table inet dgx_spark_test_no_engine")
    # an engine marked failed (several replicas) is tried again after endpoint_fail_timeout (10 s)
    deadline = time.monotonic() + 30
    while send("/v1/models", "GET", API_KEY)[0] != 200:
        assert time.monotonic() < deadline, "no answer 30 s after the fault was undone"
        time.sleep(1)
