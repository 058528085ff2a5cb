"""Probe a vLLM endpoint from its node, for up to SECONDS, and report as JSON.

Usage: python3 serve_probe.py URL MODEL SECRETS_FILE UNIT SECONDS RESTARTS_BEFORE PROMPT

Stages, in order: the unit is down or crash-looping ("down"), /health is not
200 yet ("loading"), /v1/models does not list MODEL yet ("models"), a short
completion fails ("completion"), or it answered ("ready"). The API key is read
from the root-only SECRETS_FILE and never printed. "log" is the latest
meaningful line of the unit's journal, for progress.
"""
import json
import re
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request

LOG_LINE = re.compile(r"\b(INFO|WARNING|ERROR|CRITICAL)\b|Error|Traceback")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def api_key(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as secrets:
            for line in secrets:
                if line.startswith("VLLM_API_KEY="):  # shell-quoted: the container's sh sources it
                    return shlex.split(line.split("=", 1)[1])[0]
    except OSError:
        pass
    return ""


def request(url: str, key: str, body: dict | None = None) -> tuple[int, str]:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = json.dumps(body).encode() if body is not None else None
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers), timeout=30) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
    except OSError as error:
        return 0, str(error)


def unit_state(unit: str) -> tuple[str, int]:
    out = subprocess.run(["systemctl", "show", unit, "-p", "ActiveState", "-p", "NRestarts"],
                         capture_output=True, text=True, check=False).stdout
    props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return props.get("ActiveState", "unknown"), int(props.get("NRestarts", "0") or 0)


def latest_log(unit: str) -> str:
    out = subprocess.run(["journalctl", "-u", unit, "-n", "200", "-o", "cat", "--no-pager"],
                         capture_output=True, text=True, check=False).stdout
    lines = [ANSI.sub("", line).strip() for line in out.splitlines() if LOG_LINE.search(line)]
    return lines[-1][-200:] if lines else ""


def probe(url: str, model: str, key: str, prompt: str) -> tuple[str, str]:
    status, body = request(f"{url}/health", "")
    if status != 200:
        return "loading", f"/health: {status or body}"
    status, body = request(f"{url}/v1/models", key)
    if status != 200 or model not in [m.get("id") for m in json.loads(body).get("data", [])]:
        return "models", f"/v1/models: {status} {body[:200]}"
    status, body = request(f"{url}/v1/completions", key,
                           {"model": model, "prompt": prompt, "max_tokens": 4, "temperature": 0})
    if status != 200:
        return "completion", f"/v1/completions: {status} {body[:200]}"
    return "ready", json.loads(body)["choices"][0]["text"]


def main() -> None:
    url, model, secrets, unit = sys.argv[1:5]
    seconds, restarts_before, prompt = float(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
    key = api_key(secrets)
    deadline = time.monotonic() + seconds
    while True:
        state, restarts = unit_state(unit)
        if state in ("failed", "inactive") or restarts > restarts_before:
            stage, detail = "down", f"{unit} is {state}, restarted {restarts - restarts_before} time(s)"
        else:
            stage, detail = probe(url, model, key, prompt)
        if stage in ("ready", "down") or time.monotonic() > deadline:
            break
        time.sleep(3)
    print(json.dumps({"stage": stage, "detail": detail, "log": latest_log(unit),
                      "state": state, "restarts": restarts}))


main()
