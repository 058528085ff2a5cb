"""roles/serving_rollout/files/serving_state.py with systemctl stood in for by a script that
answers the ActiveState the test gives each unit (what a rollout decides on, in one module run)."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from support.role_files import load_role_file

state = load_role_file("roles/serving_rollout/files/serving_state.py")

Systemd = Callable[[dict[str, str]], None]  # gives units their ActiveState

FRONT = """upstream vllm_engines {
        # node-1
        server 198.51.100.11:8000 max_fails=1 fail_timeout=5s;
        # node-0: out of rotation while its group restarts (a rolling restart)
        server 198.51.100.10:8000 max_fails=1 fail_timeout=5s down;
    }
    server {
        listen 198.18.0.10:8080;
"""


@pytest.fixture()
def systemd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Systemd:
    """Give each unit the ActiveState `systemctl show UNIT --property=ActiveState --value` prints
    (a unit not given prints nothing, as systemd does for a name it cannot load)."""
    table = tmp_path / "states"
    table.write_text("")
    systemctl = tmp_path / "systemctl"
    systemctl.write_text(f'#!/bin/sh\ngrep "^$2=" {table} | cut -d= -f2\n')
    systemctl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    return lambda states: table.write_text("".join(f"{unit}={value}\n" for unit, value in states.items())) and None


def test_a_serving_node_reads_its_unit(tmp_path: Path, systemd: Systemd) -> None:
    systemd({"vllm-serve": "failed"})
    assert state.gather("vllm-serve", None) == {"unit": "failed"}


def test_the_cluster_head_reads_the_front_and_every_engine_it_sends_to(tmp_path: Path, systemd: Systemd) -> None:
    config = tmp_path / "front.conf"
    config.write_text(FRONT)
    systemd({"vllm-serve": "active", "dgx-spark-endpoint": "active"})
    assert state.gather("vllm-serve", ["dgx-spark-endpoint", str(config)]) == {
        "unit": "active", "front": {"active": True, "engines": ["198.51.100.10:8000", "198.51.100.11:8000"]}}


def test_a_front_that_does_not_run_sends_nowhere(tmp_path: Path, systemd: Systemd, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "front.conf"
    config.write_text(FRONT)
    systemd({"dgx-spark-endpoint": "inactive"})
    state.main(["--front", "dgx-spark-endpoint", str(config)])
    assert json.loads(capsys.readouterr().out) == {"front": {"active": False, "engines": []}}


def test_units_systemd_does_not_know_and_a_missing_configuration_are_inactive_and_empty(
        tmp_path: Path, systemd: Systemd) -> None:
    systemd({"dgx-spark-endpoint": "active"})
    assert state.gather("vllm-serve", ["dgx-spark-endpoint", str(tmp_path / "absent.conf")]) == {
        "unit": "inactive", "front": {"active": True, "engines": []}}
