"""The serving node's helper of dgx_spark.vllm: the short commands the serving unit, the
serving guard (roles/serving_guard, which imports this file) and the playbooks run on the node.

Subcommands:
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
  drain-restart UNIT METRICS_URL SECONDS    wait up to SECONDS until the engine answers no
                                            request (vLLM's own gauges), then restart UNIT; the
                                            result as JSON (a restart's drain, the old head's
                                            stop and the new head's start in one step:
                                            serving_rollout)
"""
from __future__ import annotations

import datetime
import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
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

LOG_EVERY = 10  # seconds between two reads of the engine's latest log line while it starts
# Seconds between two probes: what a restart adds after the engine is ready is half of it on
# average; a probe before then is a refused connection or a /health call.
PROBE_EVERY = 0.25


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
    log, log_read = "", -LOG_EVERY
    while True:
        props = unit_show(unit, "ActiveState", "NRestarts")
        state, restarts = props.get("ActiveState", "unknown"), int(props.get("NRestarts") or 0)
        if state in ("failed", "inactive") or restarts > restarts_before:
            stage, detail = "down", f"{unit} is {state}, restarted {restarts - restarts_before} time(s)"
        else:
            stage, detail = probe_once(url, model, key, prompt)
        done = stage in ("ready", "down") or time.monotonic() - began > seconds
        # The journal read costs CPU the starting engine wants: the playbook shows a line every 30 s,
        # and a wait that failed the last lines; one that ended ready needs none.
        if (done and stage != "ready") or (progress and time.monotonic() - log_read >= LOG_EVERY):
            log, log_read = latest_log(unit), time.monotonic()
        if progress:
            progress.write_text(progress_line(time.monotonic() - began, stage, detail, log) + "\n")
        if done:
            break
        time.sleep(PROBE_EVERY)
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


# ---- drain-restart: a restart's drain, its old head's stop and its new head's start ----

DRAIN_POLL = 0.2  # seconds between two reads of the engine's gauges while it finishes its requests
BUSY_GAUGE = re.compile(r"(?m)^vllm:num_requests_(?:running|waiting)(?:\{[^}]*\})? ([0-9.eE+-]+)$")


def requests_in_engine(metrics: str) -> float:
    """What the engine is answering or holds in its queue, from its Prometheus text."""
    return sum(float(value) for value in BUSY_GAUGE.findall(metrics))


def drain(metrics_url: str, seconds: float) -> tuple[bool, float]:
    """(drained, seconds waited): until no request runs or waits, at most SECONDS. An engine
    that does not answer its metrics answers no request either."""
    began = time.monotonic()
    while True:
        status, body = request(metrics_url, "", timeout=5)
        if status != 200 or requests_in_engine(body) == 0:
            return True, time.monotonic() - began
        if time.monotonic() - began >= seconds:
            return False, time.monotonic() - began
        time.sleep(DRAIN_POLL)


def drain_restart(args: list[str]) -> int:
    unit, metrics_url, seconds = args[0], args[1], float(args[2])
    drained, waited = drain(metrics_url, seconds) if seconds > 0 else (True, 0.0)
    restarted = subprocess.run(["systemctl", "restart", unit], capture_output=True, text=True, check=False)
    print(json.dumps({"drained": drained, "waited": round(waited, 1), "restarted": restarted.returncode == 0,
                      "error": restarted.stderr.strip()}))
    return restarted.returncode


# ---- status: what playbooks/status.yml shows --------------------------------

UNIT_PROPERTIES = ("LoadState", "ActiveState", "SubState", "Result", "NRestarts", "InvocationID",
                   "ActiveEnterTimestamp", "StatusText")


def unit_report(unit: str) -> dict[str, str]:
    props = unit_show(unit, *UNIT_PROPERTIES)
    return {key: props.get(key, "") for key in UNIT_PROPERTIES}


def guard_state_file(unit: str) -> str:
    """Where the serving guard of this unit keeps what it did (for status)."""
    return os.path.join(STATE_DIR, f"{unit}-guard.json")


def guard_report(unit: str) -> dict[str, Any]:
    try:
        with open(guard_state_file(unit), encoding="utf-8") as state:
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


def started_epoch(started_at: str) -> float:
    """Docker's StartedAt (RFC 3339 with nanoseconds, UTC) as epoch seconds; 0 when unknown."""
    match = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z$", started_at or "")
    if not match:
        return 0.0
    whole = datetime.datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return max(0.0, whole.timestamp() + float(f"0.{match.group(2) or 0}"))


def unit_config_id(unit_text: str, label: str) -> str:
    """The configuration id the unit file starts its container with (--label LABEL=ID)."""
    match = re.search(rf"--label {re.escape(label)}=([0-9a-f]+)", unit_text)
    return match.group(1) if match else ""


def served_report(container: str, unit_file: str, label: str) -> dict[str, Any]:
    """What the serving container runs: its `vllm serve` arguments, since when, and whether it
    was started with the configuration its unit file gives now."""
    found, error = docker_inspect("container", "inspect", container)
    if not found:
        return {"running": False, "detail": error}
    # The unit runs /bin/sh -c LAUNCHER NAME vllm serve ...: the command is what follows NAME.
    arguments = [str(a) for a in found.get("Args") or []]
    try:
        current = unit_config_id(Path(unit_file).read_text(encoding="utf-8"), label)
    except OSError:
        current = ""
    running = str(((found.get("Config") or {}).get("Labels") or {}).get(label, ""))
    return {"running": True, "started": started_epoch(str((found.get("State") or {}).get("StartedAt", ""))),
            "command": arguments[3:] if arguments[:1] == ["-c"] else arguments,
            "config": running, "config_current": bool(current) and running == current}


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
    if settings.get("serves"):
        report["served"] = served_report(settings["serve_unit"], settings["unit_file"], settings["config_label"])
    if settings.get("api_url"):
        ok, detail = completion(settings["api_url"], settings["model"], api_key(settings["secrets"]),
                                settings["prompt"], 30, 4)
        report["endpoint"] = "answers a completion" if ok else f"no completion: {detail}"
    print(json.dumps(report))
    return 0


def main() -> int:
    commands = {"probe": probe, "backoff": backoff, "status": status,
                "await-container": await_container, "stop": stop, "drain-restart": drain_restart}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        print(__doc__, file=sys.stderr)
        return 2
    return commands[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
