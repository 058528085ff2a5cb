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


def kept_serving(tmp_path: Path, stamp: str) -> tuple[Path, list[Path]]:
    """A unit and an environment file, their copies in the last known good folder and its record."""
    live, last_good = tmp_path / "etc", tmp_path / "last-good"
    live.mkdir()
    last_good.mkdir()
    files = [live / "vllm-serve.service", live / "vllm-serve.env"]
    for path in files:
        path.write_text(f"content of {path.name}\n")
        (last_good / path.name).write_text(f"content of {path.name}\n")
    record = last_good / "vllm-serve.as-is.json"
    record.write_text(json.dumps({"stamp": stamp}))
    return record, files


def running(unit: str) -> str:
    return "active"


def test_serving_restarts_as_it_is_when_the_stamp_and_every_file_match(tmp_path: Path) -> None:
    record, files = kept_serving(tmp_path, "a" * 64)
    assert state.as_is_verdict(record, "a" * 64, files, ["vllm-serve-guard"], running)[0]


def test_a_unit_a_converge_would_start_makes_it_converge(tmp_path: Path) -> None:
    record, files = kept_serving(tmp_path, "a" * 64)
    states = {"vllm-serve-guard": "active", "vllm-serve-endpoint": "failed"}
    assert state.as_is_verdict(record, "a" * 64, files, list(states), states.__getitem__) == \
        (False, "vllm-serve-endpoint does not run (a converge starts it)")


def test_changed_inputs_a_changed_file_or_no_record_converge_first(tmp_path: Path) -> None:
    record, files = kept_serving(tmp_path, "a" * 64)
    assert state.as_is_verdict(record, "b" * 64, files, [], running) == \
        (False, "the inputs changed since the last converge that served")
    assert not state.as_is_verdict(record, "", files, [], running)[0]
    files[1].write_text("VLLM_HOST_IP=198.51.100.99\n")
    assert state.as_is_verdict(record, "a" * 64, files, [], running) == \
        (False, f"{files[1]} differs from what the last converge that served left")
    files[1].unlink()
    assert "cannot be read" in state.as_is_verdict(record, "a" * 64, files, [], running)[1]
    record.unlink()
    assert state.as_is_verdict(record, "a" * 64, files, [], running)[1].startswith(
        "no record of a converge that served")


def test_the_forced_restarts_read_gives_what_the_rollout_decides_on_and_the_verdict(
        tmp_path: Path, systemd: Systemd, capsys: pytest.CaptureFixture[str]) -> None:
    record, files = kept_serving(tmp_path, "a" * 64)
    systemd({"vllm-serve": "active", "vllm-serve-guard": "active"})
    state.main(["--unit", "vllm-serve", "--as-is", str(record), "a" * 64, "--files", *map(str, files),
                "--running", "vllm-serve-guard"])
    assert json.loads(capsys.readouterr().out) == {
        "unit": "active", "as_is": {"as_is": True, "why": state.as_is_verdict(record, "a" * 64, files, [])[1]}}
    systemd({"vllm-serve": "active"})
    state.main(["--unit", "vllm-serve", "--as-is", str(record), "a" * 64, "--files", *map(str, files),
                "--running", "vllm-serve-guard"])
    assert json.loads(capsys.readouterr().out)["as_is"] == {
        "as_is": False, "why": "vllm-serve-guard does not run (a converge starts it)"}
