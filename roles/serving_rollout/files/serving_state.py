"""Print, as one JSON object, what a rollout decides on (tasks/decide.yml, tasks/as_is.yml), read
in one module run.

Run on a node as ``python3 -c "<this file>" [--unit UNIT] [--front UNIT CONFIG]
[--as-is RECORD STAMP --files FILE... --running UNIT...]``; it only reads (it runs in check mode
too, on a node where nothing is installed yet):

    {"unit": "active",
     "front": {"active": true, "engines": ["198.51.100.10:8000", "198.51.100.11:8000"]},
     "as_is": {"as_is": true, "why": "the inputs and the serving files are those of ..."}}

``unit`` is systemd's ActiveState of the serving unit (a serving node); ``front`` (the cluster
head) says whether the endpoint's unit runs and which engines its nginx configuration sends to
(every ``server ADDRESS:PORT`` line, marked down or not, sorted). A configuration that cannot be
read has no engines; a unit systemd does not know is ``inactive``. ``as_is`` (a forced restart)
says whether serving may restart as it is: RECORD (in the last known good folder) holds STAMP,
each FILE equals its copy there and each UNIT runs.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
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


def as_is_verdict(record: Path, stamp: str, files: list[Path], units: list[str],
                  state: Callable[[str], str] = active_state) -> tuple[bool, str]:
    """(as is, why not): the last converge that served recorded this run's stamp, every serving
    file is still the copy it kept beside the record, and every unit a converge would start runs."""
    try:
        recorded = json.loads(record.read_text(encoding="utf-8")).get("stamp", "")
    except (OSError, ValueError, AttributeError) as error:
        return False, f"no record of a converge that served ({record}: {error.__class__.__name__})"
    if not stamp or recorded != stamp:
        return False, "the inputs changed since the last converge that served"
    for path in files:
        kept = record.parent / path.name
        try:
            if path.read_bytes() != kept.read_bytes():
                return False, f"{path} differs from what the last converge that served left"
        except OSError as error:
            return False, f"{path} or its copy {kept} cannot be read ({error.strerror})"
    for unit in units:
        if state(unit) != "active":
            return False, f"{unit} does not run (a converge starts it)"
    return True, "the inputs and the serving files are those of the last converge that served"


def gather(unit: str | None, front: list[str] | None, as_is: argparse.Namespace | None = None) -> dict[str, Any]:
    state: dict[str, Any] = {}
    if unit:
        state["unit"] = active_state(unit)
    if front:
        front_unit, config = front
        running = active_state(front_unit) == "active"
        state["front"] = {"active": running, "engines": front_engines(read_text(config)) if running else []}
    if as_is:
        same, why = as_is_verdict(Path(as_is.as_is[0]), as_is.as_is[1], [Path(path) for path in as_is.files],
                                  as_is.running)
        state["as_is"] = {"as_is": same, "why": why}
    return state


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="serving_state")
    parser.add_argument("--unit")
    parser.add_argument("--front", nargs=2, metavar=("UNIT", "CONFIG"))
    parser.add_argument("--as-is", nargs=2, metavar=("RECORD", "STAMP"))
    parser.add_argument("--files", nargs="*", default=[])
    parser.add_argument("--running", nargs="*", default=[])
    args = parser.parse_args(argv)
    print(json.dumps(gather(args.unit, args.front, args if args.as_is else None), sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
