"""The serving guard of dgx_spark.vllm: one small process per serving node (vllm-serve-guard.service).

vLLM is fail-stop and a serving group only works as a whole: a headless rank
never notices that its head died, and a new head cannot use an old rank. The
guard makes the group restart together, with no controller and no SSH:

  head guard    probes a real completion every INTERVAL s (TIMEOUT s each);
                FAILURES failures in a row, once the engine has served or its
                start-up grace is over, restart the head's unit. It publishes
                the head engine's epoch (systemd's InvocationID of the unit,
                new at every start) on the fabric: GET /epoch?nonce=N.
  worker guard  reads the head's epoch every INTERVAL s. Its engine belongs to
                the epoch it first saw while running; when the head's epoch
                changes (the head restarted) it restarts its own unit, which
                then joins the head's new engine. A head that is down or out
                of reach is waited for: its next engine is a new epoch.

Why a forged epoch restarts nothing: the head answers each worker's fresh
nonce with HMAC-SHA256(cluster secret, nonce + epoch); an answer without the
right MAC counts as a head out of reach, which a worker only waits for.

Why it cannot loop: every restart goes through systemd, whose start limit
(StartLimitBurst= in StartLimitIntervalSec=) bounds the starts of each unit,
and the unit's ExecStartPre (serving_node.py backoff) spaces systemd's own
restarts exponentially. When the limit is hit the unit stays failed, the guard
says why in its status, and no one restarts it until an operator or a run does.

Over 400 lines on purpose: systemd runs this one file with the node's python3 (no package on the
node), and the head's and the workers' halves of the epoch protocol must come from one copy.

What it saw goes to Prometheus too: every check rewrites METRICS_DIR/<unit>-guard.prom
(the node exporter's textfile collector reads it; its timestamp going stale means the guard died).

Usage: serving_guard.py CONFIG.json (serving_node.py, the engine's helper, sits beside it).
"""
from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import math
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, Literal

import serving_node as node  # the engine's helper, installed beside this file

NONCE = re.compile(r"^[0-9a-f]{32,64}$")


@dataclass
class Config:
    unit: str
    role: str                 # head | worker
    interval: float
    failures: int
    secret_file: str = ""     # the cluster's guard secret (root only): the epoch's MAC key
    api_url: str = ""         # head
    model: str = ""           # head
    secrets: str = ""         # head: the API key's file
    prompt: str = "ping"      # head
    timeout: float = 30       # head: one completion
    grace: float = 600        # head: start-up time before failures count
    epoch_bind: str = ""      # head of an mp group: the fabric address to publish the epoch on
    epoch_url: str = ""       # worker: the head guard's /epoch
    port: int = 0
    metrics_dir: str = ""     # the node exporter's textfile folder ('' writes no metrics)


def notify(message: str) -> None:
    """sd_notify(3): READY=1 / STATUS=..., shown by `systemctl status`."""
    address = os.environ.get("NOTIFY_SOCKET", "")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.connect(address)
        sock.sendall(message.encode())


def read_secret(path: str) -> bytes:
    with open(path, encoding="utf-8") as secret:
        value = secret.read().strip()
    if not value:
        raise SystemExit(f"{path} is empty: a run of the playbook writes the cluster's guard secret there")
    return value.encode()


def epoch_mac(secret: bytes, nonce: str, epoch: str) -> str:
    return hmac.new(secret, f"{nonce}\n{epoch}".encode(), hashlib.sha256).hexdigest()


# ---- Prometheus' text format (the textfile collector's input) --------------

@dataclass(frozen=True)
class Metric:
    """One metric family: its samples are (labels, value)."""

    name: str
    kind: Literal["gauge", "counter"]
    help: str
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def escape_label(value: str) -> str:
    return escape_help(value).replace('"', '\\"')


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def render_metrics(metrics: list[Metric]) -> str:
    """The text exposition format (version 0.0.4): HELP and TYPE, then one line per sample."""
    lines: list[str] = []
    for metric in metrics:
        lines.append(f"# HELP {metric.name} {escape_help(metric.help)}")
        lines.append(f"# TYPE {metric.name} {metric.kind}")
        for labels, value in metric.samples:
            pairs = ",".join(f'{key}="{escape_label(text)}"' for key, text in sorted(labels.items()))
            lines.append(f"{metric.name}{{{pairs}}} {format_value(value)}" if pairs
                         else f"{metric.name} {format_value(value)}")
    return "\n".join(lines) + "\n"


def write_textfile(directory: str, name: str, text: str) -> None:
    """Replace DIRECTORY/NAME at once (a temporary file beside it, then a rename): the collector never
    reads half a file. The temporary name does not end in .prom, so the collector skips it."""
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, os.path.join(directory, name))
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise


def short_reason(reason: str) -> str:
    """A reason's first clause (no counts of the moment, no epochs): a label value of few distinct values."""
    return re.split(r" \(|;", reason, maxsplit=1)[0][:80]


class Guard:
    """What the guard did, for `systemctl status`, the journal, playbooks/status.yml and Prometheus."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.restarts = 0
        self.last_reason = ""
        self.last_restart = 0.0
        self.gave_up = ""
        self.epoch = ""           # head: the epoch that last served; worker: the head epoch it belongs to
        self.serving = False      # head: its last probe got a completion; worker: it belongs to the head's epoch
        self.probe_seconds: float | None = None  # head: the last probe's latency
        self.engine_starts = 0    # InvocationIDs of the unit seen, the first included
        self.invocation = ""
        self.start_limit_hit = False
        self.failure = ""         # the last failure's short reason, and when
        self.failure_time = 0.0
        self.failed_invocation = ""
        self.metrics_error = ""    # the last write's error, said once

    def say(self, status: str) -> None:
        print(status, flush=True)
        notify(f"STATUS={status}")

    def save(self) -> None:
        os.makedirs(node.STATE_DIR, exist_ok=True)
        path = node.guard_state_file(self.config.unit)
        with open(path + ".tmp", "w", encoding="utf-8") as state:
            json.dump({"unit": self.config.unit, "role": self.config.role, "guard_restarts": self.restarts,
                       "last_reason": self.last_reason, "last_restart": self.last_restart,
                       "gave_up": self.gave_up, "epoch": self.epoch}, state)
        os.replace(path + ".tmp", path)

    def note_epoch(self, epoch: str) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.save()

    def note_failure(self, reason: str, when: float) -> None:
        self.failure, self.failure_time = reason, when

    def observe(self, props: dict[str, str]) -> None:
        """The unit's state for the metrics: its starts (a new InvocationID each), a failed state."""
        invocation, failed = props.get("InvocationID", ""), props.get("ActiveState") == "failed"
        if invocation and invocation != self.invocation:
            self.invocation = invocation
            self.engine_starts += 1
        self.start_limit_hit = failed and props.get("Result") == "start-limit-hit"
        if failed and self.failed_invocation != invocation:
            self.failed_invocation = invocation
            self.note_failure(f"unit failed: {props.get('Result') or 'unknown'}", time.time())

    def metrics(self, now: float) -> list[Metric]:
        """This guard's families, each sample labelled with its unit and role."""
        labels = {"unit": self.config.unit, "role": self.config.role}

        def one(name: str, kind: Literal["gauge", "counter"], text: str, value: float,
                **extra: str) -> Metric:
            return Metric(name, kind, text, [({**labels, **extra}, value)])

        families = [
            one("dgx_spark_guard_last_update_timestamp_seconds", "gauge",
                "Unix time of the guard's last check (stale: the guard is dead).", now),
            one("dgx_spark_guard_serving", "gauge",
                "1 when the head's last probe got a completion, or the worker's engine is up and belongs to the "
                "head's current epoch.", float(self.serving)),
            one("dgx_spark_guard_engine_starts_total", "counter",
                "Starts of the serving unit the guard saw (new InvocationIDs, the first included).",
                self.engine_starts),
            one("dgx_spark_guard_restarts_total", "counter",
                "Restarts of the serving unit the guard asked systemd for.", self.restarts),
            one("dgx_spark_guard_start_limit_hit", "gauge",
                "1 when the serving unit is failed with result start-limit-hit (no one restarts it).",
                float(self.start_limit_hit)),
            one("dgx_spark_guard_epoch_info", "gauge",
                "The serving group's epoch (the head engine's InvocationID) this node belongs to ('' none).",
                1, epoch=self.epoch),
        ]
        if self.failure:
            families.append(one("dgx_spark_guard_last_failure_timestamp_seconds", "gauge",
                                "Unix time of the last failure the guard saw, with its reason.",
                                self.failure_time, reason=self.failure))
        if self.config.role == "head" and self.probe_seconds is not None:
            families.append(one("dgx_spark_guard_probe_duration_seconds", "gauge",
                                "Seconds the head's last liveness completion took.", self.probe_seconds))
        return families

    def write_metrics(self) -> None:
        """Replace this guard's textfile; a folder that cannot be written costs the metrics, not the guard."""
        if not self.config.metrics_dir:
            return
        try:
            write_textfile(self.config.metrics_dir, f"{self.config.unit}-guard.prom",
                           render_metrics(self.metrics(time.time())))
            self.metrics_error = ""
        except OSError as error:
            kind = error.strerror or type(error).__name__  # not str(error): the temporary name varies
            if kind != self.metrics_error:  # once, not at every check
                print(f"metrics: {error}", flush=True)
            self.metrics_error = kind

    def restart(self, reason: str) -> None:
        """Restart this node's unit through systemd (its start limit bounds how often)."""
        self.restarts += 1
        self.last_reason, self.last_restart = reason, time.time()
        self.note_failure(short_reason(reason), self.last_restart)
        self.say(f"restarting {self.config.unit}: {reason}")
        os.makedirs(node.STATE_DIR, exist_ok=True)
        with open(node.kill_flag(self.config.unit), "w", encoding="utf-8"):
            pass  # the unit's ExecStop kills the broken engine instead of waiting for it
        result = subprocess.run(["systemctl", "restart", self.config.unit], capture_output=True, text=True,
                                check=False)
        with contextlib.suppress(FileNotFoundError):
            os.remove(node.kill_flag(self.config.unit))  # unused when the unit was not running: not for a later stop
        self.gave_up = ""
        if result.returncode != 0:
            self.gave_up = (f"{self.config.unit} could not be restarted ({result.stderr.strip()[:200]}); it stays "
                            f"down until a run or an operator starts it. Last reason: {reason}. Its journal: "
                            f"journalctl -u {self.config.unit}")
            self.say(self.gave_up)
        self.save()


def unit_life(unit: str) -> tuple[str, str, float]:
    """(ActiveState, InvocationID, seconds since it became active)."""
    props = node.unit_show(unit, "ActiveState", "InvocationID", "ActiveEnterTimestampMonotonic")
    entered = int(props.get("ActiveEnterTimestampMonotonic") or 0) / 1e6
    return props.get("ActiveState", "unknown"), props.get("InvocationID", ""), time.monotonic() - entered


def serve_epoch(config: Config, secret: bytes) -> HTTPServer:
    """GET /epoch?nonce=N on the head's fabric address: the InvocationID of its running engine ('' when
    none) and its MAC over the nonce. One request at a time, each bounded by a socket timeout: a client
    that never finishes its request holds the server for seconds, not for ever."""
    unit = config.unit

    class Epoch(BaseHTTPRequestHandler):
        timeout = 2

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            url = urllib.parse.urlsplit(self.path)
            nonce = urllib.parse.parse_qs(url.query).get("nonce", [""])[0]
            if url.path != "/epoch" or not NONCE.match(nonce):
                self.reply(404 if url.path != "/epoch" else 400, {})
                return
            state, invocation, _age = unit_life(unit)
            epoch = invocation if state == "active" else ""
            self.reply(200, {"epoch": epoch, "mac": epoch_mac(secret, nonce, epoch)})

        def reply(self, status: int, answer: dict[str, str]) -> None:
            body = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
            return

    server = HTTPServer((config.epoch_bind, config.port), Epoch)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def head_step(guard: Guard, key: str, state: dict[str, Any]) -> None:
    config = guard.config
    active, invocation, age = unit_life(config.unit)
    guard.serving = False
    if active != "active":
        state.update(failures=0)
        guard.note_epoch("")
        return
    began = time.monotonic()
    ok, detail = node.completion(config.api_url, config.model, key, config.prompt, config.timeout, 1)
    guard.probe_seconds, guard.serving = time.monotonic() - began, ok
    if ok:
        if state.get("served") != invocation:
            guard.say(f"{config.unit} serves (epoch {invocation[:8]})")
            guard.note_epoch(invocation)
        state.update(failures=0, served=invocation)
        return
    if state.get("served") != invocation and age < config.grace:
        return  # still loading: vLLM's own start-up timeout governs that
    state["failures"] = state.get("failures", 0) + 1
    print(f"liveness: a completion failed ({state['failures']}/{config.failures}): {detail}", flush=True)
    if state["failures"] >= config.failures:
        state.update(failures=0, served="")
        guard.restart(f"{config.failures} completions in a row failed (last: {detail}); the head restarts, "
                      "and every rank follows its new epoch")


def read_epoch(url: str, secret: bytes) -> str | None:
    """The head's epoch: '' when its engine is down, None when no guard holding the cluster's secret
    answered (nothing, or a forgery: both leave this rank waiting, never restarting)."""
    nonce = secrets.token_hex(16)
    status, body = node.request(f"{url}?nonce={nonce}", "", timeout=5)
    if status != 200:
        return None
    try:
        answer = json.loads(body)
        epoch, mac = str(answer["epoch"]), str(answer["mac"])
    except (ValueError, KeyError, TypeError):
        return None
    if not hmac.compare_digest(mac, epoch_mac(secret, nonce, epoch)):
        print(f"{url} answered an epoch without the cluster's MAC: ignored", flush=True)
        return None
    return epoch


def worker_step(guard: Guard, state: dict[str, Any], secret: bytes) -> None:
    config = guard.config
    active, invocation, _age = unit_life(config.unit)
    guard.serving = False
    if active != "active":
        state.update(joined=None, misses=0)
        guard.note_epoch("")
        return
    epoch = read_epoch(config.epoch_url, secret)
    joined = state.get("joined")
    if joined is None or joined[0] != invocation:
        # This engine's life belongs to the first head epoch it sees.
        state.update(joined=(invocation, epoch) if epoch else None, misses=0)
        guard.note_epoch(epoch or "")
        guard.serving = bool(epoch)
        return
    if epoch and epoch != joined[1]:
        guard.restart(f"the head's engine restarted (epoch {joined[1][:8]} -> {epoch[:8]}); this rank rejoins it")
        state.update(joined=None, misses=0)
        return
    if epoch:
        state["misses"] = 0
        guard.serving = True
        return
    # The head's engine is down, or the fabric or its node is: a new rank could join nothing now (and
    # restarting during a fabric cut only costs a weight load). The head's next engine is a new
    # epoch, and that brings this rank along.
    state["misses"] = state.get("misses", 0) + 1
    if state["misses"] == config.failures:
        what = "down" if epoch == "" else "unreachable over the fabric"
        guard.say(f"the head's engine is {what} ({config.failures} checks); this rank rejoins its next epoch")


def main(args: list[str]) -> int:
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    with open(args[0], encoding="utf-8") as config_file:
        config = Config(**json.load(config_file))
    secret = read_secret(config.secret_file)
    guard = Guard(config)
    guard.save()
    key = node.api_key(config.secrets) if config.role == "head" else ""
    if config.role == "head" and config.epoch_bind:
        serve_epoch(config, secret)
    notify("READY=1")
    guard.say(f"guarding {config.unit} as the {config.role}: a check every {config.interval:.0f} s, "
              f"{config.failures} failures in a row restart")
    state: dict[str, Any] = {}
    while True:
        if config.role == "head":
            head_step(guard, key, state)
        else:
            worker_step(guard, state, secret)
        guard.observe(node.unit_show(config.unit, "ActiveState", "Result", "InvocationID"))
        guard.write_metrics()
        time.sleep(config.interval)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
