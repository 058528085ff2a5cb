"""The serving node's helper of dgx_spark.vllm: the serving guard (one small process per serving
node) and the short commands the unit and the playbooks run on the node.

Over 400 lines on purpose: one file is what a node runs, installed once and run by the unit, the
guard and the playbooks alike; its parts share the probe, the unit and the API code.

vLLM is fail-stop and a serving group only works as a whole: a headless rank
never notices that its head died, and a new head cannot use an old rank. The
guard makes the group restart together, with no controller and no SSH:

  head guard    probes a real completion every INTERVAL s (TIMEOUT s each);
                FAILURES failures in a row, once the engine has served or its
                start-up grace is over, restart the head's unit. It publishes
                the head engine's epoch (systemd's InvocationID of the unit,
                new at every start) on the fabric: GET /epoch.
  worker guard  reads the head's epoch every INTERVAL s. Its engine belongs to
                the epoch it first saw while running; when the head's epoch
                changes (the head restarted) it restarts its own unit, which
                then joins the head's new engine. A head that is down or out
                of reach is waited for: its next engine is a new epoch.

Why it cannot loop: every restart goes through systemd, whose start limit
(StartLimitBurst= in StartLimitIntervalSec=) bounds the starts of each unit,
and `serving_node.py backoff` (the unit's ExecStartPre) spaces systemd's own
restarts exponentially. When the limit is hit the unit stays failed, the guard
says why in its status, and no one restarts it until an operator or a run does.

Subcommands:
  guard CONFIG.json                         the daemon (vllm-serve-guard.service)
  probe URL MODEL SECRETS UNIT SECONDS RESTARTS_BEFORE PROMPT [PROGRESS]
                                            wait up to SECONDS until ready (or down), the result
                                            as JSON; PROGRESS: a file whose one line says how
                                            far it got (the playbook's wait shows it)
  backoff UNIT BASE CAP                     sleep BASE * 2^(n-1), at most CAP, after the n-th
                                            automatic restart (the unit's ExecStartPre)
  status SETTINGS.json                      this node's units, guard, image and endpoint, as
                                            JSON (playbooks/status.yml; read-only)
  await-container NAME SECONDS              wait until a container runs (the Ray executor's
                                            serving unit waits for the head's Ray container)
  stop UNIT CONTAINER SECONDS               the unit's ExecStop: `docker stop --time SECONDS`,
                                            or `docker kill` when the guard restarts an engine
                                            it found broken (a hung engine ignores SIGTERM)
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

LOG_LINE = re.compile(r"\b(INFO|WARNING|ERROR|CRITICAL)\b|Error|Traceback")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
STATE_DIR = "/run/dgx-spark-vllm"


# ---- shared: the API, the unit, the journal ---------------------------------

def api_key(path: str) -> str:
    """The API key from the root-only secrets file (shell-quoted: the container's sh sources it)."""
    try:
        with open(path, encoding="utf-8") as secrets:
            for line in secrets:
                if line.startswith("VLLM_API_KEY="):
                    return shlex.split(line.split("=", 1)[1])[0]
    except OSError:
        pass
    return ""


def request(url: str, key: str, body: dict[str, Any] | None = None, timeout: float = 30) -> tuple[int, str]:
    """(HTTP status, body); status 0 with the error when nothing answered in time."""
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = json.dumps(body).encode() if body is not None else None
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers), timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
    except (OSError, ValueError) as error:
        return 0, str(error) or type(error).__name__


def completion(url: str, model: str, key: str, prompt: str, timeout: float, tokens: int) -> tuple[bool, str]:
    status, body = request(f"{url}/v1/completions", key,
                           {"model": model, "prompt": prompt, "max_tokens": tokens, "temperature": 0}, timeout)
    if status != 200:
        return False, f"/v1/completions: {status or body} {body[:200] if status else ''}".strip()
    try:
        return True, json.loads(body)["choices"][0]["text"]
    except (ValueError, KeyError, IndexError):
        return False, f"/v1/completions: unreadable answer {body[:200]}"


def unit_show(unit: str, *properties: str) -> dict[str, str]:
    out = subprocess.run(["systemctl", "show", unit, *[f"--property={p}" for p in properties]],
                         capture_output=True, text=True, check=False).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def latest_log(unit: str) -> str:
    out = subprocess.run(["journalctl", "-u", unit, "-n", "200", "-o", "cat", "--no-pager"],
                         capture_output=True, text=True, check=False).stdout
    lines = [ANSI.sub("", line).strip() for line in out.splitlines() if LOG_LINE.search(line)]
    return lines[-1][-200:] if lines else ""


# ---- probe: the playbook's readiness wait -----------------------------------

def probe_once(url: str, model: str, key: str, prompt: str) -> tuple[str, str]:
    status, body = request(f"{url}/health", "")
    if status != 200:
        return "loading", f"/health: {status or body}"
    status, body = request(f"{url}/v1/models", key)
    try:
        listed = [m.get("id") for m in json.loads(body).get("data", [])] if status == 200 else []
    except ValueError:
        listed = []
    if model not in listed:
        return "models", f"/v1/models: {status} {body[:200]}"
    ok, detail = completion(url, model, key, prompt, 30, 4)
    return ("ready", detail) if ok else ("completion", detail)


def progress_line(elapsed: float, stage: str, detail: str, log: str) -> str:
    """What the playbook's wait shows: elapsed seconds, stage (and why not ready), the engine's latest log line."""
    return f"{elapsed:.0f} s: {stage}{'' if stage == 'ready' else f' ({detail})'} | {log}"


def probe(args: list[str]) -> int:
    url, model, secrets, unit = args[:4]
    seconds, restarts_before, prompt = float(args[4]), int(args[5]), args[6]
    progress = Path(args[7]) if len(args) > 7 else None
    key = api_key(secrets)
    began = time.monotonic()
    while True:
        props = unit_show(unit, "ActiveState", "NRestarts")
        state, restarts = props.get("ActiveState", "unknown"), int(props.get("NRestarts") or 0)
        if state in ("failed", "inactive") or restarts > restarts_before:
            stage, detail = "down", f"{unit} is {state}, restarted {restarts - restarts_before} time(s)"
        else:
            stage, detail = probe_once(url, model, key, prompt)
        done = stage in ("ready", "down") or time.monotonic() - began > seconds
        log = latest_log(unit) if progress or done else ""
        if progress:
            progress.write_text(progress_line(time.monotonic() - began, stage, detail, log) + "\n")
        if done:
            break
        time.sleep(1)
    print(json.dumps({"stage": stage, "detail": detail, "log": log, "state": state, "restarts": restarts,
                      "elapsed": round(time.monotonic() - began)}))
    return 0


# ---- backoff: spacing systemd's own restarts ---------------------------------

def backoff_seconds(restarts: int, base: float, cap: float) -> float:
    """0 for a start that is not an automatic restart, then base, 2 base, 4 base, ... at most cap."""
    return 0.0 if restarts < 1 else min(cap, base * 2 ** (restarts - 1))


def backoff(args: list[str]) -> int:
    unit, base, cap = args[0], float(args[1]), float(args[2])
    restarts = int(unit_show(unit, "NRestarts").get("NRestarts") or 0)
    seconds = backoff_seconds(restarts, base, cap)
    if seconds:
        print(f"{unit}: automatic restart {restarts}: waiting {seconds:.0f} s first (exponential back-off, "
              f"at most {cap:.0f} s)", flush=True)
        time.sleep(seconds)
    return 0


# ---- await-container: serving waits for the Ray head's container -------------

def await_container(args: list[str]) -> int:
    """0 once the container runs, 1 after SECONDS: a start that waits instead of failing spends no
    attempt of the unit's start limit."""
    name, deadline = args[0], time.monotonic() + float(args[1])
    while time.monotonic() < deadline:
        found, _error = docker_inspect("container", "inspect", name)
        if found.get("State", {}).get("Running"):
            return 0
        time.sleep(1)
    print(f"container {name} is not running after {args[1]} s", flush=True)
    return 1


# ---- stop: the unit's ExecStop ------------------------------------------------

def kill_flag(unit: str) -> str:
    """Left by the guard for the unit's next stop: the engine is broken, a graceful stop only waits."""
    return os.path.join(STATE_DIR, f"{unit}.kill")


def stop(args: list[str]) -> int:
    unit, container, seconds = args[0], args[1], args[2]
    try:
        os.remove(kill_flag(unit))
        command = ["docker", "kill", container]
    except FileNotFoundError:
        command = ["docker", "stop", "--time", seconds, container]
    return subprocess.run(command, check=False).returncode


# ---- status: what playbooks/status.yml shows --------------------------------

UNIT_PROPERTIES = ("LoadState", "ActiveState", "SubState", "Result", "NRestarts", "InvocationID",
                   "ActiveEnterTimestamp", "StatusText")


def unit_report(unit: str) -> dict[str, str]:
    props = unit_show(unit, *UNIT_PROPERTIES)
    return {key: props.get(key, "") for key in UNIT_PROPERTIES}


def guard_report(unit: str) -> dict[str, Any]:
    try:
        with open(os.path.join(STATE_DIR, f"{unit}-guard.json"), encoding="utf-8") as state:
            return dict(json.load(state))
    except (OSError, ValueError):
        return {}


def docker_inspect(*args: str) -> tuple[dict[str, Any], str]:
    """The first object `docker ... inspect` prints, or {} and the error. (No Go template here: playbooks
    pass this file through Jinja as a lookup, where double braces would be Jinja's.)"""
    result = subprocess.run(["docker", *args], capture_output=True, text=True, check=False)
    try:
        return (json.loads(result.stdout)[0], "") if result.returncode == 0 else ({}, result.stderr.strip()[:120])
    except (ValueError, IndexError):
        return {}, result.stdout.strip()[:120]


def image_id(image: str) -> str:
    found, error = docker_inspect("image", "inspect", image)
    return str(found.get("Id", "")) if found else f"absent ({error})"


def fabric_address(containers: list[str]) -> str:
    """VLLM_HOST_IP of the first of these containers that runs: the fabric address the node
    was deployed with, as its Ray or vLLM process uses it (empty when none runs)."""
    for name in containers:
        found, _error = docker_inspect("container", "inspect", name)
        for variable in (found.get("Config") or {}).get("Env") or []:
            if variable.startswith("VLLM_HOST_IP="):
                return str(variable.split("=", 1)[1])
    return ""


def status(args: list[str]) -> int:
    with open(args[0], encoding="utf-8") if args[0] != "-" else sys.stdin as settings_file:
        settings = json.load(settings_file)
    report: dict[str, Any] = {
        "units": {unit: unit_report(unit) for unit in settings["units"]},
        "guard": guard_report(settings["serve_unit"]),
        "image": image_id(settings["image"]),
        "model_present": os.path.isdir(settings["model_dir"]) if settings.get("model_dir") else None,
        "fabric_address": fabric_address(settings["units"]),
    }
    if settings.get("api_url"):
        ok, detail = completion(settings["api_url"], settings["model"], api_key(settings["secrets"]),
                                settings["prompt"], 30, 4)
        report["endpoint"] = "answers a completion" if ok else f"no completion: {detail}"
    print(json.dumps(report))
    return 0


# ---- guard: the daemon -------------------------------------------------------

@dataclass
class Config:
    unit: str
    role: str                 # head | worker
    interval: float
    failures: int
    api_url: str = ""         # head
    model: str = ""           # head
    secrets: str = ""         # head
    prompt: str = "ping"      # head
    timeout: float = 30       # head: one completion
    grace: float = 600        # head: start-up time before failures count
    epoch_bind: str = ""      # head of an mp group: the fabric address to publish the epoch on
    epoch_url: str = ""       # worker: the head guard's /epoch
    port: int = 0


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


class Guard:
    """What the guard did, for `systemctl status`, the journal and playbooks/status.yml."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.restarts = 0
        self.last_reason = ""
        self.last_restart = 0.0
        self.gave_up = ""
        self.epoch = ""           # head: the epoch that last served; worker: the head epoch it belongs to

    def say(self, status: str) -> None:
        print(status, flush=True)
        notify(f"STATUS={status}")

    def save(self) -> None:
        os.makedirs(STATE_DIR, exist_ok=True)
        path = os.path.join(STATE_DIR, f"{self.config.unit}-guard.json")
        with open(path + ".tmp", "w", encoding="utf-8") as state:
            json.dump({"unit": self.config.unit, "role": self.config.role, "guard_restarts": self.restarts,
                       "last_reason": self.last_reason, "last_restart": self.last_restart,
                       "gave_up": self.gave_up, "epoch": self.epoch}, state)
        os.replace(path + ".tmp", path)

    def note_epoch(self, epoch: str) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.save()

    def restart(self, reason: str) -> None:
        """Restart this node's unit through systemd (its start limit bounds how often)."""
        self.restarts += 1
        self.last_reason, self.last_restart = reason, time.time()
        self.say(f"restarting {self.config.unit}: {reason}")
        os.makedirs(STATE_DIR, exist_ok=True)
        with open(kill_flag(self.config.unit), "w", encoding="utf-8"):
            pass  # the unit's ExecStop kills the broken engine instead of waiting for it
        result = subprocess.run(["systemctl", "restart", self.config.unit], capture_output=True, text=True,
                                check=False)
        with contextlib.suppress(FileNotFoundError):
            os.remove(kill_flag(self.config.unit))  # unused when the unit was not running: not for a later stop
        self.gave_up = ""
        if result.returncode != 0:
            self.gave_up = (f"{self.config.unit} could not be restarted ({result.stderr.strip()[:200]}); it stays "
                            f"down until a run or an operator starts it. Last reason: {reason}. Its journal: "
                            f"journalctl -u {self.config.unit}")
            self.say(self.gave_up)
        self.save()


def unit_life(unit: str) -> tuple[str, str, float]:
    """(ActiveState, InvocationID, seconds since it became active)."""
    props = unit_show(unit, "ActiveState", "InvocationID", "ActiveEnterTimestampMonotonic")
    entered = int(props.get("ActiveEnterTimestampMonotonic") or 0) / 1e6
    return props.get("ActiveState", "unknown"), props.get("InvocationID", ""), time.monotonic() - entered


def serve_epoch(config: Config) -> None:
    """GET /epoch on the head's fabric address: the InvocationID of its running engine, or ''."""
    unit = config.unit

    class Epoch(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            state, invocation, _age = unit_life(unit)
            body = json.dumps({"epoch": invocation if state == "active" else ""}).encode()
            self.send_response(200 if self.path == "/epoch" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
            return

    server = ThreadingHTTPServer((config.epoch_bind, config.port), Epoch)
    threading.Thread(target=server.serve_forever, daemon=True).start()


def head_step(guard: Guard, key: str, state: dict[str, Any]) -> None:
    config = guard.config
    active, invocation, age = unit_life(config.unit)
    if active != "active":
        state.update(failures=0)
        guard.note_epoch("")
        return
    ok, detail = completion(config.api_url, config.model, key, config.prompt, config.timeout, 1)
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


def read_epoch(url: str) -> str | None:
    """The head's epoch: '' when its engine is down, None when its guard does not answer."""
    status, body = request(url, "", timeout=5)
    if status != 200:
        return None
    try:
        return str(json.loads(body).get("epoch", ""))
    except ValueError:
        return None


def worker_step(guard: Guard, state: dict[str, Any]) -> None:
    config = guard.config
    active, invocation, _age = unit_life(config.unit)
    if active != "active":
        state.update(joined=None, misses=0)
        guard.note_epoch("")
        return
    epoch = read_epoch(config.epoch_url)
    joined = state.get("joined")
    if joined is None or joined[0] != invocation:
        # This engine's life belongs to the first head epoch it sees.
        state.update(joined=(invocation, epoch) if epoch else None, misses=0)
        guard.note_epoch(epoch or "")
        return
    if epoch and epoch != joined[1]:
        guard.restart(f"the head's engine restarted (epoch {joined[1][:8]} -> {epoch[:8]}); this rank rejoins it")
        state.update(joined=None, misses=0)
        return
    if epoch:
        state["misses"] = 0
        return
    # The head's engine is down, or the fabric or its node is: a new rank could join nothing now (and
    # restarting during a fabric cut only costs a weight load). The head's next engine is a new
    # epoch, and that brings this rank along.
    state["misses"] = state.get("misses", 0) + 1
    if state["misses"] == config.failures:
        what = "down" if epoch == "" else "unreachable over the fabric"
        guard.say(f"the head's engine is {what} ({config.failures} checks); this rank rejoins its next epoch")


def guard_main(args: list[str]) -> int:
    with open(args[0], encoding="utf-8") as config_file:
        config = Config(**json.load(config_file))
    guard = Guard(config)
    guard.save()
    key = api_key(config.secrets) if config.role == "head" else ""
    if config.role == "head" and config.epoch_bind:
        serve_epoch(config)
    notify("READY=1")
    guard.say(f"guarding {config.unit} as the {config.role}: a check every {config.interval:.0f} s, "
              f"{config.failures} failures in a row restart")
    state: dict[str, Any] = {}
    while True:
        if config.role == "head":
            head_step(guard, key, state)
        else:
            worker_step(guard, state)
        time.sleep(config.interval)


def main() -> int:
    commands = {"guard": guard_main, "probe": probe, "backoff": backoff, "status": status,
                "await-container": await_container, "stop": stop}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        print(__doc__, file=sys.stderr)
        return 2
    return commands[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
