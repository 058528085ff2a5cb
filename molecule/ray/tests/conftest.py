"""Make the shared test helpers importable: molecule/shared/files (the cluster helpers and the
playbook_run adapter) and tests/support (ansible_run, the runner that adapter uses)."""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
for helpers in (REPO / "tests" / "support", REPO / "molecule" / "shared" / "files"):
    sys.path.insert(0, str(helpers))
