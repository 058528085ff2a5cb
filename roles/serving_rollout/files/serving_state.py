"""Print, as one JSON object, what a rollout decides on (tasks/decide.yml), read in one module run.

Run on a node as ``python3 -c "<this file>" [--unit UNIT] [--front UNIT CONFIG]``; it only reads
(it runs in check mode too, on a node where nothing is installed yet):

    {"unit": "active",
     "front": {"active": true, "engines": ["198.51.100.10:8000", "198.51.100.11:8000"]}}

``unit`` is systemd's ActiveState of the serving unit (a serving node); ``front`` (the cluster
head) says whether the endpoint's unit runs and which engines its nginx configuration sends to
(every ``server ADDRESS:PORT`` line, marked down or not, sorted). A configuration that cannot be
read has no engines; a unit systemd does not know is ``inactive``.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from typing import Any

SERVER_LINE = re.compile(r"(?m)^\s*server ([^\s;]+:[0-9]+) ")


def active_state(unit: str) -> str:
    shown = subprocess.run(["systemctl", "show", unit, "--property=ActiveState", "--value"],
                           capture_output=True, text=True, check=False)
    return shown.stdout.strip() or "inactive"


def front_engines(config_text: str) -> list[str]:
    return sorted(SERVER_LINE.findall(config_text))


def read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as config:
            return config.read()
    except OSError:
        return ""


def gather(unit: str | None, front: list[str] | None) -> dict[str, Any]:
    state: dict[str, Any] = {}
    if unit:
        state["unit"] = active_state(unit)
    if front:
        front_unit, config = front
        running = active_state(front_unit) == "active"
        state["front"] = {"active": running, "engines": front_engines(read_text(config)) if running else []}
    return state


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="serving_state")
    parser.add_argument("--unit")
    parser.add_argument("--front", nargs=2, metavar=("UNIT", "CONFIG"))
    args = parser.parse_args(argv)
    print(json.dumps(gather(args.unit, args.front), sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
