"""A playbook run past its deadline comes back as a failed run with what it had printed,
so that a test's report shows where it was (not only subprocess's TimeoutExpired)."""
from __future__ import annotations

from pathlib import Path

import pytest

from support import ansible_run


def fake_playbook_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script_body: str) -> None:
    """ansible-playbook replaced by a shell script with this body."""
    script = tmp_path / "ansible-playbook"
    script.write_text("#!/bin/sh\n" + script_body)
    script.chmod(0o755)
    monkeypatch.setattr(ansible_run, "ansible_playbook_executable", lambda: str(script))


def test_a_run_past_its_deadline_fails_with_its_output_so_far(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    fake_playbook_command(tmp_path, monkeypatch, "echo 'TASK [the slow one]'\necho 'a warning' >&2\nexec sleep 30\n")
    result = ansible_run.run_ansible_playbook("site.yml", [str(tmp_path / "hosts.yml")], timeout=2)
    assert result.returncode == ansible_run.TIMED_OUT
    assert "TASK [the slow one]" in result.stdout
    assert "a warning" in result.stderr
    assert "still running after 2 s" in result.stderr


def test_a_python_process_hung_at_the_deadline_prints_where_it_was(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    fake_playbook_command(tmp_path, monkeypatch,
                          "exec python3 -c 'import time\ndef stuck_here():\n    time.sleep(30)\nstuck_here()'\n")
    result = ansible_run.run_ansible_playbook("site.yml", [str(tmp_path / "hosts.yml")], timeout=2)
    assert result.returncode == ansible_run.TIMED_OUT
    assert "in stuck_here" in result.stderr, result.stderr


def test_a_run_within_its_deadline_is_returned_as_it_ended(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    fake_playbook_command(tmp_path, monkeypatch, "echo done\nexit 3\n")
    result = ansible_run.run_ansible_playbook("site.yml", [str(tmp_path / "hosts.yml")], timeout=20)
    assert (result.returncode, result.stdout) == (3, "done\n")
