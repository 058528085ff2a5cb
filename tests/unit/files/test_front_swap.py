"""roles/endpoint/files/front_swap.py with nginx and systemctl stood in for by small scripts that
record what they were asked (the rotation's one module run: check, swap, reload)."""
from __future__ import annotations

import io
import json
import stat
from pathlib import Path

import pytest

from support.role_files import load_role_file

swap = load_role_file("roles/endpoint/files/front_swap.py")

OLD = "http { upstream vllm_engines { server 198.51.100.10:8000; } }\n"
OUT = "http { upstream vllm_engines { server 198.51.100.10:8000 down; } }\n"


def script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


@pytest.fixture()
def head(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A head whose nginx refuses a configuration with "refuse" in it and whose systemctl
    fails a reload when the file reload-fails exists; both log their calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    script(bin_dir / "nginx", f'echo "nginx $* $(cat "$4" | tr -d "\\n")" >> {log}\n'
                              'grep -q refuse "$4" && { echo "refused: unknown directive" >&2; exit 1; }\nexit 0\n')
    script(bin_dir / "systemctl", f'echo "systemctl $*" >> {log}\n'
                                  f'[ -e {tmp_path}/reload-fails ] && {{ echo "reload failed" >&2; exit 3; }}\nexit 0\n')
    monkeypatch.setattr(swap, "NGINX", str(bin_dir / "nginx"))
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    (tmp_path / "endpoint.nginx.conf").write_text(OLD)
    return tmp_path


def calls(head: Path) -> list[str]:
    log = head / "calls"
    return log.read_text().splitlines() if log.exists() else []


def test_a_new_configuration_is_checked_put_in_place_and_reloaded(head: Path) -> None:
    config = head / "endpoint.nginx.conf"
    report, status = swap.swap(str(config), "dgx-spark-endpoint", OUT)
    assert (report, status) == ({"changed": True, "reloaded": True, "error": ""}, 0)
    assert config.read_text() == OUT
    assert stat.S_IMODE(config.stat().st_mode) == 0o644
    assert calls(head) == [f"nginx -t -q -c {config}.next {OUT.strip()}", "systemctl reload dgx-spark-endpoint"]
    assert not Path(f"{config}.next").exists()


def test_the_same_configuration_changes_nothing(head: Path) -> None:
    assert swap.swap(str(head / "endpoint.nginx.conf"), "dgx-spark-endpoint", OLD) == (
        {"changed": False, "reloaded": False, "error": ""}, 0)
    assert calls(head) == []


def test_a_configuration_nginx_refuses_is_never_put_in_place(head: Path) -> None:
    config = head / "endpoint.nginx.conf"
    report, status = swap.swap(str(config), "dgx-spark-endpoint", "refuse this\n")
    assert status == 1 and not report["changed"] and "unknown directive" in str(report["error"])
    assert config.read_text() == OLD
    assert [call.split()[0] for call in calls(head)] == ["nginx"]
    assert not Path(f"{config}.next").exists()


def test_a_failed_reload_says_so_with_systemctls_status(
        head: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (head / "reload-fails").touch()
    monkeypatch.setattr("sys.stdin", io.StringIO(OUT))
    assert swap.main([str(head / "endpoint.nginx.conf"), "dgx-spark-endpoint"]) == 3
    assert json.loads(capsys.readouterr().out) == {"changed": True, "reloaded": False, "error": "reload failed"}
    assert (head / "endpoint.nginx.conf").read_text() == OUT
