"""A file a role copies to the nodes stays small enough to read in one sitting (issue 29): over
400 lines it says why in its first lines ("Over 400 lines on purpose: ..."). The Grafana dashboard
is Grafana's JSON export, which holds no comment; its page (docs/monitoring.md) says what it is.
"""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAX_LINES = 400
HEADER_LINES = 40
REASON = "Over 400 lines on purpose"
# Data, not code: exported by Grafana, imported as one file.
EXPORTS = {"roles/monitoring/files/dgx-spark-vllm-dashboard.json"}
ROLE_FILES = sorted(path for path in REPO.glob("roles/*/files/*") if path.is_file())


def test_the_role_files_are_found() -> None:
    assert len(ROLE_FILES) >= 10, ROLE_FILES


@pytest.mark.parametrize("path", ROLE_FILES, ids=lambda path: str(path.relative_to(REPO)))
def test_a_long_role_file_says_why_in_its_header(path: Path) -> None:
    name = str(path.relative_to(REPO))
    lines = path.read_text().splitlines()
    if len(lines) <= MAX_LINES or name in EXPORTS:
        return
    assert REASON in "\n".join(lines[:HEADER_LINES]), \
        f"{name} has {len(lines)} lines: split it, or say why not in its header ({REASON}: ...)"
