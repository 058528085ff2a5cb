"""Put a new endpoint configuration in place and reload the endpoint, in one module run.

Run on the cluster head as ``python3 -c "<this file>" CONFIG UNIT`` with the new configuration on
standard input (tasks/rotation.yml renders it from the same template as tasks/nginx.yml). The
same steps as the template module with ``validate: nginx -t`` followed by ``systemctl reload``,
which take three module runs: a rolling restart takes a group out of the front's rotation on its
way to the restart, so each of them is time to the restart. Prints one JSON object:

    {"changed": true, "reloaded": true, "error": ""}

Unchanged text changes nothing. A configuration nginx refuses is never put in place (exit 1);
one nginx took but whose reload failed exits with systemctl's status.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

NGINX = "/usr/sbin/nginx"


def current_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as config:
            return config.read()
    except OSError:
        return None


def write_beside(path: str, text: str) -> str:
    """The new text in a file beside PATH (same file system: the swap is one rename), mode 0644."""
    staged = f"{path}.next"
    descriptor = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with os.fdopen(descriptor, "w", encoding="utf-8") as config:
        config.write(text)
    os.chmod(staged, 0o644)
    return staged


def swap(path: str, unit: str, text: str) -> tuple[dict[str, object], int]:
    if current_text(path) == text:
        return {"changed": False, "reloaded": False, "error": ""}, 0
    staged = write_beside(path, text)
    check = subprocess.run([NGINX, "-t", "-q", "-c", staged], capture_output=True, text=True, check=False)
    if check.returncode != 0:
        os.remove(staged)
        return {"changed": False, "reloaded": False, "error": check.stderr.strip()[-500:]}, 1
    os.replace(staged, path)
    reload = subprocess.run(["systemctl", "reload", unit], capture_output=True, text=True, check=False)
    return {"changed": True, "reloaded": reload.returncode == 0, "error": reload.stderr.strip()}, reload.returncode


def main(argv: list[str]) -> int:
    report, status = swap(argv[0], argv[1], sys.stdin.read())
    print(json.dumps(report))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
