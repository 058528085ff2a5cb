"""Download a model from the Hugging Face Hub into a folder, resumably, saying how far it got.

Runs inside the serving image (``docker run --entrypoint python3 IMAGE
hub_download.py REPO DIR MARKER``, roles/vllm_serve/tasks/download.yml) with the image's own
huggingface_hub for what talks to the Hub: HF_ENDPOINT, the token (from
HF_TOKEN_PATH, a file the role mounts read-only, never the command line), the
repository listing, the resolve URLs and the HTTP session (which drops the
token on a redirect to another host, such as the Hub's CDN).

It fetches each file itself rather than through ``snapshot_download``:
huggingface_hub 2.x writes each download to a temporary file unique to the
process and deletes it when the process fails (huggingface_hub PR #4228), so a
cut run of ``hf download`` starts every unfinished file again. Here a file
grows in DIR/.partial/ and a later run continues it with an HTTP Range request;
a finished file is checked against the Hub's SHA-256 (LFS files) or git blob
SHA-1 before it is moved into place.

Nothing the Hub says can write outside DIR: a listed path that is absolute,
has a ``..`` component, names the role's own files (``.partial``,
``.dgx-spark-vllm-*``) or resolves (through a symbolic link already in DIR)
outside DIR is refused before anything is fetched. A token never goes over
plain ``http://``: with a token, an ``http://`` HF_ENDPOINT is refused.
``--revision`` (a branch, a tag or a 40-hex commit) is resolved once to its
commit, and every file is fetched at that commit.

Every ``--interval`` seconds (and once at the end) it prints one line: bytes in
the folder (finished and partial files), the total from the listing, the rate
since this run began, and the time elapsed. When every file is there it
writes MARKER, holding the revision asked for: how the role knows the folder
is complete for that revision.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "0"  # the serving image sets it to 1: this is the one place that goes online

PARTIAL = ".partial"
CHUNK = 1 << 20
ATTEMPTS = 5  # per file, within one run; a later run continues anyway
RETRY_PAUSE = 10
UNITS = ("B", "KiB", "MiB", "GiB", "TiB")
# A branch or tag name (slashes allowed, as in refs/pr/1) or a commit; never "..".
REVISION = re.compile(r"^(?!.*\.\.)(?!/)(?!.*//)(?!.*/$)[A-Za-z0-9._/-]{1,200}$")
MARKER_PREFIX = ".dgx-spark-vllm-"  # the role's own files in the folder (its marker)
DEFAULT_ENDPOINT = "https://huggingface.co"


class Refused(Exception):
    """The Hub, or the settings, asked for something that must not happen."""


def check_revision(revision: str) -> None:
    """Refuse a revision that is neither a branch or tag name nor a commit."""
    if not REVISION.match(revision) or revision.startswith(("-", ".")):
        raise Refused(f"revision {revision!r} is not a branch, tag or commit (letters, digits, . _ - /, no '..')")


def has_token() -> bool:
    """Whether huggingface_hub will send a token: HF_TOKEN, or the file HF_TOKEN_PATH names (by
    default HF_HOME/token, where `hf auth login` keeps one)."""
    if os.environ.get("HF_TOKEN"):
        return True
    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache/huggingface")
    path = Path(os.environ.get("HF_TOKEN_PATH") or home / "token")
    return path.is_file() and bool(path.read_text().strip())


def check_endpoint(endpoint: str, token: bool) -> None:
    """Refuse to send a token over plain HTTP."""
    if token and not endpoint.lower().startswith("https://"):
        raise Refused(f"the token would go over plain HTTP to {endpoint}: set model_hf_endpoint to an https:// URL "
                      "(or leave it empty for huggingface.co), or download without model_hf_token")


def inside(root: Path, path: Path) -> bool:
    """Whether path, once every symbolic link on it is followed, is under root."""
    return path.resolve().is_relative_to(root.resolve())


def contained(folder: Path, relative: str) -> Path:
    """folder/relative, refused unless it stays inside folder (no absolute path, '..' or link out)."""
    parts = Path(relative).parts
    if not parts or relative.startswith("/") or "\\" in relative:
        raise Refused(f"the Hub listed {relative!r}, an absolute or empty path")
    if ".." in parts:
        raise Refused(f"the Hub listed {relative!r}, which leaves the model folder")
    if parts[0] == PARTIAL or parts[0].startswith(MARKER_PREFIX):
        raise Refused(f"the Hub listed {relative!r}, a name the download keeps for itself")
    for target in (folder / relative, folder / PARTIAL / relative):
        if not inside(folder, target):
            raise Refused(f"the Hub listed {relative!r}, which resolves to {target.resolve()}, outside {folder}")
    return folder / relative


def human(n: float) -> str:
    """Bytes as 1.5 GiB."""
    for unit in UNITS:
        if abs(n) < 1024 or unit == UNITS[-1]:
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} {UNITS[-1]}"


def clock(seconds: float) -> str:
    """Seconds as H:MM:SS."""
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def bytes_on_disk(folder: Path, marker: Path) -> int:
    """What the download has written so far: finished and partial files."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            path = Path(root) / name
            if path == marker or ".cache" in path.relative_to(folder).parts:
                continue
            try:
                total += path.stat().st_size
            except FileNotFoundError:  # moved into place meanwhile
                pass
    return total


def progress_line(done: int, total: int | None, start_bytes: int, elapsed: float) -> str:
    """One progress report."""
    rate = (done - start_bytes) / elapsed if elapsed > 0 else 0.0
    of = f" of {human(total)} ({100 * done // total if total else 100}%)" if total is not None else ""
    return f"downloaded {human(done)}{of}, {human(rate)}/s, elapsed {clock(elapsed)}"


@dataclass(frozen=True)
class Entry:
    """One file of the repository, and how to check it."""

    path: str
    size: int
    sha256: str | None  # LFS files
    blob_sha1: str  # git blob id (what the Hub gives small files)


def list_files(repo: str, revision: str, folder: Path) -> tuple[str, list[Entry]]:
    """The commit a revision points at, and its files; refused when any path would leave folder."""
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    api = HfApi()
    commit = api.repo_info(repo, revision=revision).sha
    assert commit, f"the Hub gave no commit for {repo}@{revision}"
    files = [Entry(f.path, f.size, f.lfs.sha256 if f.lfs else None, f.blob_id)
             for f in api.list_repo_tree(repo, recursive=True, revision=commit) if isinstance(f, RepoFile)]
    for entry in files:
        contained(folder, entry.path)
    return commit, files


def digest_of(path: Path, entry: Entry) -> tuple[str, str]:
    """(what the Hub says, what the file holds) for the file's own kind of hash."""
    if entry.sha256 is not None:
        digest, want = hashlib.sha256(), entry.sha256
    else:
        digest, want = hashlib.sha1(f"blob {path.stat().st_size}\0".encode()), entry.blob_sha1
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    return want, digest.hexdigest()


def fetch(repo: str, commit: str, entry: Entry, folder: Path) -> bool:
    """Put one file in place, continuing a partial copy left by an earlier run; False when it
    already was."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    final, part = contained(folder, entry.path), folder / PARTIAL / entry.path
    if final.is_file() and final.stat().st_size == entry.size:
        want, got = digest_of(final, entry)
        if want == got:
            return False
        final.unlink()  # another revision's file of the same size
    part.parent.mkdir(parents=True, exist_ok=True)
    contained(folder, entry.path)  # again, now that the folders exist
    have = part.stat().st_size if part.exists() else 0
    if have > entry.size:
        part.unlink()
        have = 0
    if have < entry.size:
        headers = build_hf_headers()
        headers["Accept-Encoding"] = "identity"
        if have:
            headers["Range"] = f"bytes={have}-"
        url = hf_hub_url(repo, entry.path, revision=commit)
        with get_session().stream("GET", url, headers=headers, timeout=60) as response:
            hf_raise_for_status(response)
            mode = "ab" if have and response.status_code == 206 else "wb"  # 200: the server ignored the range
            with part.open(mode) as out:
                for chunk in response.iter_bytes(CHUNK):
                    out.write(chunk)
    want, got = digest_of(part, entry)
    if want != got:
        part.unlink()
        raise ValueError(f"{entry.path}: the Hub says {want}, the download holds {got}; removed, re-run")
    final.parent.mkdir(parents=True, exist_ok=True)
    part.replace(contained(folder, entry.path))
    return True


def fetch_with_retries(repo: str, commit: str, entry: Entry, folder: Path, attempts: int = ATTEMPTS) -> bool:
    """fetch, again from where it stopped after a network error (not after an answer such as 401 or 404)."""
    from huggingface_hub.errors import HfHubHTTPError

    for attempt in range(1, attempts + 1):
        try:
            return fetch(repo, commit, entry, folder)
        except (HfHubHTTPError, ValueError, Refused):
            raise
        except Exception as error:  # noqa: BLE001 (httpx's and the OS's network errors)
            if attempt == attempts:
                raise
            print(f"{entry.path}: {type(error).__name__}: {error}; continuing in {RETRY_PAUSE} s "
                  f"(attempt {attempt + 1} of {attempts})", flush=True)
            time.sleep(RETRY_PAUSE)
    raise AssertionError("unreachable: the last attempt returns or raises")


def download(repo: str, commit: str, files: list[Entry], folder: Path, errors: list[BaseException],
             fetched: list[str]) -> None:
    """Fetch every file in turn, noting those that were not already there; an exception is kept
    for the main thread."""
    try:
        for entry in files:
            if fetch_with_retries(repo, commit, entry, folder):
                fetched.append(entry.path)
    except BaseException as error:  # noqa: BLE001 (reported by main)
        errors.append(error)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hub_download", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("repo")
    parser.add_argument("folder", type=Path)
    parser.add_argument("marker", type=Path)
    parser.add_argument("--revision", default="main")
    parser.add_argument("--interval", type=float, default=30.0)
    args = parser.parse_args(argv)
    try:
        check_revision(args.revision)
        check_endpoint(os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT, has_token())
    except Refused as error:
        print(f"refused: {error}", file=sys.stderr, flush=True)
        return 1
    args.folder.mkdir(parents=True, exist_ok=True)
    began, start_bytes = time.monotonic(), bytes_on_disk(args.folder, args.marker)
    try:
        commit, files = list_files(args.repo, args.revision, args.folder)
    except Refused as error:
        print(f"refused {args.repo}@{args.revision}, nothing downloaded: {error}", file=sys.stderr, flush=True)
        return 1
    except Exception as error:  # noqa: BLE001 (one line, not a traceback)
        print(f"cannot list {args.repo}@{args.revision}: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        return 1
    total = sum(f.size for f in files)
    print(f"downloading {args.repo}@{commit} ({len(files)} files, {human(total)}) into {args.folder}; "
          f"{human(start_bytes)} already there from an earlier run", flush=True)
    errors: list[BaseException] = []
    fetched: list[str] = []
    worker = threading.Thread(target=download, args=(args.repo, commit, files, args.folder, errors, fetched),
                              daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(args.interval)
        print(progress_line(bytes_on_disk(args.folder, args.marker), total, start_bytes, time.monotonic() - began),
              flush=True)
    if errors:
        print(f"download failed: {type(errors[0]).__name__}: {errors[0]}", file=sys.stderr, flush=True)
        return 1
    shutil.rmtree(args.folder / PARTIAL, ignore_errors=True)
    args.marker.write_text(args.revision + "\n")
    # "0 of": every file was already there (the role then reports no change).
    print(f"download complete: {len(fetched)} of {len(files)} files fetched", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
