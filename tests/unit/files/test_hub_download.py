"""The download's progress report (roles/model/files/hub_download.py)."""
from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
from support.role_files import load_role_file

hub_download = load_role_file("roles/model/files/hub_download.py")


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


class FakeHubError(Exception):
    """Stands in for huggingface_hub.errors.HfHubHTTPError (huggingface_hub lives in the serving image)."""


@pytest.fixture
def fake_hub_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    errors = types.ModuleType("huggingface_hub.errors")
    errors.HfHubHTTPError = FakeHubError  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "huggingface_hub", types.ModuleType("huggingface_hub"))
    monkeypatch.setitem(sys.modules, "huggingface_hub.errors", errors)
    monkeypatch.setattr(hub_download, "RETRY_PAUSE", 0)


ENTRY = hub_download.Entry("model.safetensors", 10, None, "0" * 40)


def test_a_network_error_is_retried_within_the_run(fake_hub_errors: None, monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    calls: list[int] = []

    def flaky(*_args: object) -> None:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionResetError("reset by peer")

    monkeypatch.setattr(hub_download, "fetch", flaky)
    hub_download.fetch_with_retries("r", "c", ENTRY, tmp_path)
    assert len(calls) == 3


def test_an_answer_of_the_hub_or_a_bad_hash_is_not_retried(
        fake_hub_errors: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for error in (FakeHubError("401 Unauthorized"), ValueError("hash differs")):
        calls: list[int] = []

        def refused(*_args: object, error: Exception = error) -> None:
            calls.append(1)
            raise error

        monkeypatch.setattr(hub_download, "fetch", refused)
        with pytest.raises(type(error)):
            hub_download.fetch_with_retries("r", "c", ENTRY, tmp_path)
        assert len(calls) == 1


def test_a_network_error_that_persists_fails_after_the_last_attempt(fake_hub_errors: None,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    calls: list[int] = []

    def down(*_args: object) -> None:
        calls.append(1)
        raise TimeoutError("timed out")

    monkeypatch.setattr(hub_download, "fetch", down)
    with pytest.raises(TimeoutError):
        hub_download.fetch_with_retries("r", "c", ENTRY, tmp_path, attempts=3)
    assert len(calls) == 3


@pytest.mark.parametrize("listed", ["../escape", "/etc/x", "sub/../../escape", "", ".partial/x",
                                    ".dgx-spark-vllm-complete", "a\\..\\b"])
def test_a_listed_path_that_could_leave_the_folder_is_refused(tmp_path: Path, listed: str) -> None:
    with pytest.raises(hub_download.Refused):
        hub_download.contained(tmp_path / "model", listed)


def test_a_listed_path_through_a_link_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "model/weights").symlink_to("../elsewhere")
    with pytest.raises(hub_download.Refused, match="outside"):
        hub_download.contained(tmp_path / "model", "weights/model.safetensors")


def test_a_listed_path_inside_the_folder_is_where_it_goes(tmp_path: Path) -> None:
    assert hub_download.contained(tmp_path, "sub/.gitattributes") == tmp_path / "sub/.gitattributes"


@pytest.mark.parametrize("revision", ["main", "v1.0", "refs/pr/1", "0123456789abcdef0123456789abcdef01234567"])
def test_a_branch_tag_or_commit_is_a_revision(revision: str) -> None:
    hub_download.check_revision(revision)


@pytest.mark.parametrize("revision", ["../main", "main/..", "a b", "-x", "/main", "main/", "a//b", ""])
def test_anything_else_is_not_a_revision(revision: str) -> None:
    with pytest.raises(hub_download.Refused):
        hub_download.check_revision(revision)


@pytest.mark.parametrize(("endpoint", "token", "refused"), [
    ("http://mirror:8080", True, True), ("HTTP://mirror", True, True), ("https://mirror", True, False),
    ("http://mirror:8080", False, False)])
def test_a_token_goes_over_https_only(endpoint: str, token: bool, refused: bool) -> None:
    if refused:
        with pytest.raises(hub_download.Refused, match="model_hf_endpoint"):
            hub_download.check_endpoint(endpoint, token)
    else:
        hub_download.check_endpoint(endpoint, token)


def test_a_token_is_seen_wherever_huggingface_hub_would_read_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HF_TOKEN", "HF_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    assert not hub_download.has_token()
    (tmp_path / "token").write_text("hf_from_a_login\n")  # `hf auth login` keeps it in HF_HOME
    assert hub_download.has_token()
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "absent"))
    assert not hub_download.has_token()
    monkeypatch.setenv("HF_TOKEN", "hf_in_the_environment")
    assert hub_download.has_token()
