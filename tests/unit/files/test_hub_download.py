"""The download's progress report (roles/vllm_serve/files/hub_download.py)."""
from __future__ import annotations

from pathlib import Path

from support.role_files import load_role_file

hub_download = load_role_file("roles/vllm_serve/files/hub_download.py")


def test_progress_line_says_bytes_total_rate_and_elapsed() -> None:
    line = hub_download.progress_line(3 * 2**30, 12 * 2**30, 2**30, 65.0)
    assert line == "downloaded 3.0 GiB of 12.0 GiB (25%), 31.5 MiB/s, elapsed 0:01:05"


def test_progress_line_without_a_total() -> None:
    assert hub_download.progress_line(512, None, 0, 2.0) == "downloaded 512 B, 256 B/s, elapsed 0:00:02"


def test_bytes_on_disk_counts_finished_and_partial_files_not_the_marker(tmp_path: Path) -> None:
    (tmp_path / ".partial").mkdir()
    (tmp_path / ".partial/model.safetensors").write_bytes(b"x" * 100)
    (tmp_path / "config.json").write_bytes(b"y" * 10)
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache/other").write_bytes(b"z" * 1000)
    marker = tmp_path / ".dgx-spark-vllm-complete"
    marker.write_bytes(b"m" * 5)
    assert hub_download.bytes_on_disk(tmp_path, marker) == 110
