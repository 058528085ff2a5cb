"""roles/ray_node/files/raylet_state.py: whether a Ray node's container runs a raylet. It reads
/proc as it is, so the test starts a process named like Ray's raylet binary and looks again."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "roles/ray_node/files/raylet_state.py"
RAYLET = "/opt/venv/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet"


def look() -> str:
    # As roles/ray_node/tasks/raylet.yml runs it: the script an argument of python3 -c.
    return subprocess.run([sys.executable, "-c", SCRIPT.read_text()], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_no_raylet_process_is_gone() -> None:
    assert look() == "gone"


def test_a_process_running_the_raylet_binary_is_running_and_gone_again_once_it_ends() -> None:
    # exec -a names the process as Ray names its raylet binary.
    raylet = subprocess.Popen(["bash", "-c", f'exec -a {RAYLET} sleep 30'])
    try:
        exec_done = time.monotonic() + 10
        while RAYLET not in Path(f"/proc/{raylet.pid}/cmdline").read_text() and time.monotonic() < exec_done:
            time.sleep(0.05)  # until bash has exec'd
        assert look() == "running"
    finally:
        raylet.kill()
        raylet.wait()
    assert look() == "gone"


def test_a_process_that_only_mentions_the_raylet_is_not_one() -> None:
    mention = subprocess.Popen(["sleep", "30", f"{RAYLET}.log"])
    try:
        assert look() == "gone"
    finally:
        mention.kill()
        mention.wait()
