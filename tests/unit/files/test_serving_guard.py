"""Tests of roles/serving_guard/files/serving_guard.py: the decisions of the serving guard.

systemd and the other node are replaced by small fakes (the unit's state, the head's epoch);
the HTTP parts run for real over loopback: a fake vLLM API that answers, refuses or hangs, and
the head guard's /epoch server.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from support.role_files import load_role_file

KEY = "test-key"

node = load_role_file("roles/vllm_serve/files/serving_node.py")  # imported by the guard as serving_node
sg = load_role_file("roles/serving_guard/files/serving_guard.py")
SECRET = b"the-cluster-secret"


class FakeGuard(sg.Guard):
    """A Guard that records restarts instead of calling systemctl."""

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.reasons: list[str] = []
        self.said: list[str] = []

    def restart(self, reason: str) -> None:
        self.reasons.append(reason)

    def save(self) -> None:
        pass

    def say(self, status: str) -> None:
        self.said.append(status)


@pytest.fixture
def unit(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The serving unit's state as systemd would report it (tests change it)."""
    state: dict[str, Any] = {"active": "active", "invocation": "a" * 32, "age": 1000.0}
    monkeypatch.setattr(sg, "unit_life", lambda _unit: (state["active"], state["invocation"], state["age"]))
    return state


# ---- the worker's guard: following the head's epoch -------------------------

def worker(failures: int = 3) -> FakeGuard:
    return FakeGuard(sg.Config(unit="vllm-serve", role="worker", interval=1, failures=failures,
                               epoch_url="http://head/epoch"))


def run_worker(guard: FakeGuard, state: dict[str, Any], epochs: list[str | None],
               monkeypatch: pytest.MonkeyPatch) -> None:
    for epoch in epochs:
        monkeypatch.setattr(sg, "read_epoch", lambda _url, _secret, e=epoch: e)
        sg.worker_step(guard, state, SECRET)


def test_a_worker_stays_while_its_head_keeps_its_epoch(unit: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    guard, state = worker(), {}
    run_worker(guard, state, ["E1"] * 10, monkeypatch)
    assert guard.reasons == []
    assert guard.epoch == "E1"


def test_a_worker_rejoins_once_when_its_head_restarted(unit: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    guard, state = worker(), {}
    run_worker(guard, state, ["E1", "E1", "E2"], monkeypatch)
    assert len(guard.reasons) == 1 and "restarted" in guard.reasons[0]
    # systemd starts the worker's unit anew: a new life, which follows the new epoch
    unit["invocation"] = "b" * 32
    run_worker(guard, state, ["E2"] * 5, monkeypatch)
    assert len(guard.reasons) == 1
    assert guard.epoch == "E2"


@pytest.mark.parametrize("missing, word", [("", "down"), (None, "unreachable")])
def test_a_worker_whose_head_is_gone_waits_for_its_next_epoch_and_rejoins_it_once(
        unit: dict, monkeypatch: pytest.MonkeyPatch, missing: str | None, word: str) -> None:
    """A fabric cut or a head restarting: restarting this rank then would join nothing."""
    guard, state = worker(failures=3), {}
    run_worker(guard, state, ["E1"] + [missing] * 10, monkeypatch)
    assert guard.reasons == []
    assert any(word in status for status in guard.said)
    run_worker(guard, state, ["E1"] * 3, monkeypatch)  # the link came back, the head's engine lived on
    assert guard.reasons == []
    run_worker(guard, state, [missing, "E2"], monkeypatch)
    assert len(guard.reasons) == 1 and "E1"[:8] in guard.reasons[0] and "restarted" in guard.reasons[0]


def test_a_worker_started_before_its_head_waits_without_restarting(unit: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    guard, state = worker(failures=3), {}
    run_worker(guard, state, [None] * 10 + ["E1"] * 3, monkeypatch)
    assert guard.reasons == []
    assert guard.epoch == "E1"


def test_a_stopped_worker_is_left_alone(unit: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    guard, state = worker(), {}
    run_worker(guard, state, ["E1"], monkeypatch)
    unit["active"] = "inactive"
    run_worker(guard, state, ["E2", None, None, None, None], monkeypatch)
    assert guard.reasons == []


# ---- the head's guard: a real completion -------------------------------------

class FakeApi(BaseHTTPRequestHandler):
    """A vLLM API: mode 'ok' answers, 'error' returns 500, 'hang' never answers in time."""

    mode = "ok"

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length))
        if self.headers.get("Authorization") != f"Bearer {KEY}":
            self.reply(401, {"error": "Unauthorized"})
        elif FakeApi.mode == "hang":
            time.sleep(3)
            self.reply(200, {"choices": [{"text": "late"}]})
        elif FakeApi.mode == "error":
            self.reply(500, {"error": "EngineDeadError"})
        else:
            self.reply(200, {"choices": [{"text": " tokens"}], "model": body["model"]})

    def reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@pytest.fixture
def api() -> Iterator[str]:
    FakeApi.mode = "ok"
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def head(api_url: str, failures: int = 3, grace: float = 600) -> FakeGuard:
    return FakeGuard(sg.Config(unit="vllm-serve", role="head", interval=1, failures=failures, api_url=api_url,
                               model="m", timeout=1, grace=grace))


@pytest.mark.parametrize("mode", ["error", "hang"])
def test_the_head_restarts_after_failures_completions_fail_or_hang(unit: dict, api: str, mode: str) -> None:
    guard, state = head(api, failures=3), {}
    sg.head_step(guard, KEY, state)
    assert guard.epoch == unit["invocation"]
    FakeApi.mode = mode
    for _step in range(2):
        sg.head_step(guard, KEY, state)
    assert guard.reasons == []
    sg.head_step(guard, KEY, state)
    assert len(guard.reasons) == 1 and "completions in a row failed" in guard.reasons[0]


def test_a_wrong_key_counts_as_a_failure(unit: dict, api: str) -> None:
    guard, state = head(api, failures=1), {}
    sg.head_step(guard, "not-the-key", state)
    assert len(guard.reasons) == 1 and "401" in guard.reasons[0]


def test_a_head_still_loading_is_given_its_grace(unit: dict, api: str) -> None:
    unit["age"] = 10.0
    FakeApi.mode = "error"
    guard, state = head(api, failures=1, grace=60), {}
    for _step in range(5):
        sg.head_step(guard, KEY, state)
    assert guard.reasons == []
    unit["age"] = 61.0
    sg.head_step(guard, KEY, state)
    assert len(guard.reasons) == 1


def test_one_success_resets_the_count(unit: dict, api: str) -> None:
    guard, state = head(api, failures=2), {}
    sg.head_step(guard, KEY, state)
    for mode in ["error", "ok", "error", "ok", "error"]:
        FakeApi.mode = mode
        sg.head_step(guard, KEY, state)
    assert guard.reasons == []


# ---- the epoch server --------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def epoch_server(unit_name: str = "vllm-serve") -> str:
    port = free_port()
    sg.serve_epoch(sg.Config(unit=unit_name, role="head", interval=1, failures=1, epoch_bind="127.0.0.1",
                             port=port), SECRET)
    url = f"http://127.0.0.1:{port}/epoch"
    for _attempt in range(50):
        try:
            urllib.request.urlopen(f"{url}?nonce={'0' * 32}", timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    return url


def test_the_head_publishes_its_running_engines_invocation_as_epoch(unit: dict) -> None:
    url = epoch_server()
    assert sg.read_epoch(url, SECRET) == unit["invocation"]
    unit["active"] = "failed"
    assert sg.read_epoch(url, SECRET) == ""
    assert sg.read_epoch(f"http://127.0.0.1:{free_port()}/epoch", SECRET) is None


def test_an_epoch_without_the_clusters_secret_is_no_epoch(unit: dict) -> None:
    url = epoch_server()
    assert sg.read_epoch(url, b"another-secret") is None


class ForgedEpoch(BaseHTTPRequestHandler):
    """A fabric host impersonating the head's guard: a new epoch every answer, MAC'd without the secret."""

    answers = 0

    def do_GET(self) -> None:  # noqa: N802
        ForgedEpoch.answers += 1
        epoch = f"forged{ForgedEpoch.answers}"
        body = json.dumps({"epoch": epoch, "mac": sg.epoch_mac(b"guessed", "0" * 32, epoch)}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


def test_a_worker_fed_forged_epochs_never_restarts(unit: dict) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), ForgedEpoch)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        guard = FakeGuard(sg.Config(unit="vllm-serve", role="worker", interval=1, failures=3,
                                    epoch_url=f"http://127.0.0.1:{server.server_address[1]}/epoch"))
        state: dict[str, Any] = {}
        for _step in range(6):
            sg.worker_step(guard, state, SECRET)
    finally:
        server.shutdown()
    assert ForgedEpoch.answers >= 6
    assert guard.reasons == []


def test_the_epoch_server_answers_a_well_formed_nonce_only(unit: dict) -> None:
    url = epoch_server()
    for query in ["", "?nonce=", "?nonce=xyz", f"?nonce={'a' * 65}"]:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url + query, timeout=2)
        assert refused.value.code == 400


def test_a_client_that_never_finishes_its_request_does_not_hold_the_epoch_server(unit: dict) -> None:
    url = epoch_server()
    port = int(url.split(":")[2].split("/")[0])
    with socket.create_connection(("127.0.0.1", port)) as stalled:
        stalled.sendall(b"GET /epoch?nonce=")  # and nothing more
        began = time.monotonic()
        assert sg.read_epoch(url, SECRET) == unit["invocation"]
    assert time.monotonic() - began < 4  # the stalled client's socket timeout (2 s), not for ever


# ---- stop: a graceful stop, unless the guard found the engine broken --------

def test_a_guard_restart_kills_the_broken_engine_and_only_that_stop_does(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    commands: list[list[str]] = []

    def run(command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        commands.append(command)
        return subprocess.CompletedProcess(command, 0, "", "")

    def restart_running_unit(command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        if command[:2] == ["systemctl", "restart"]:  # systemd runs the unit's ExecStop meanwhile
            node.stop(["vllm-serve", "vllm-serve", "30"])
        return run(command)

    monkeypatch.setattr(node, "STATE_DIR", str(tmp_path))
    monkeypatch.setattr(sg.subprocess, "run", restart_running_unit)
    guard = sg.Guard(sg.Config(unit="vllm-serve", role="worker", interval=1, failures=1))
    guard.restart("the head's engine restarted")
    assert commands[-2:] == [["docker", "kill", "vllm-serve"], ["systemctl", "restart", "vllm-serve"]]
    assert node.stop(["vllm-serve", "vllm-serve", "30"]) == 0  # an operator's stop later: graceful
    assert commands[-1] == ["docker", "stop", "--time", "30", "vllm-serve"]


def test_a_guard_restart_of_a_unit_that_was_not_running_leaves_no_kill_for_a_later_stop(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    commands: list[list[str]] = []
    monkeypatch.setattr(node, "STATE_DIR", str(tmp_path))
    monkeypatch.setattr(sg.subprocess, "run",
                        lambda command, **_: commands.append(command) or subprocess.CompletedProcess(command, 0))
    sg.Guard(sg.Config(unit="vllm-serve", role="worker", interval=1, failures=1)).restart("a reason")
    assert node.stop(["vllm-serve", "vllm-serve", "30"]) == 0
    assert commands[-1] == ["docker", "stop", "--time", "30", "vllm-serve"]
