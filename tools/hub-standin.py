"""A Hugging Face Hub stand-in: one model repository from a local folder.

It answers the requests the real ``hf download`` / ``huggingface_hub``
``snapshot_download`` client makes (read from huggingface_hub 2.4, the version
inside the test serving image), so that client, with ``HF_ENDPOINT`` pointed
here, runs its real download code (resume included) without the Internet:

    GET  /api/models/{repo}[/revision/{rev}]   repo_info: the commit ``sha``
    GET  /api/models/{repo}/tree/{rev}[/{dir}] list_repo_tree (one page)
    HEAD /{repo}/resolve/{rev}/{file}          metadata: X-Repo-Commit, ETag, size
    GET  /{repo}/resolve/{rev}/{file}          the bytes; ``Range: bytes=N-`` gives 206

Every request must carry ``Authorization: Bearer <token>``; without it, or
with another token, the answer is 401, as the Hub answers for a gated or
private repository. Files are served as plain git blobs (ETag = git blob
SHA-1, no LFS redirect, no Xet headers, so the client uses plain HTTP).

``--rate`` throttles each response (bytes per second), so that a test can cut a
download half way. Each request is logged on stdout as one JSON line with the
bytes of body sent: a test counts what the client fetched.

Why not a package: olah (the maintained self-hosted Hub mirror on PyPI) is a
caching proxy of huggingface.co: it fills its cache from the real Hub, and it
does not require a token of its own clients. Neither fits a test cluster that
has no Internet and must refuse a request without the token; this file is
small and uses the standard library only.

Usage: hub-standin.py --root DIR --repo ORG/NAME [--token-file FILE] [--tls-cert PEM --tls-key PEM]
                      [--bind 0.0.0.0] [--port 8080]

Without --token-file every request is served, as the Hub serves a public model. With
--tls-cert and --tls-key it serves HTTPS: the role sends a token over HTTPS only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import ssl
import sys
import threading
import time
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

CHUNK = 64 * 1024


@dataclass(frozen=True)
class RepoFile:
    """One file of the served repository."""

    path: str  # relative, with forward slashes
    size: int
    oid: str  # git blob SHA-1: the Hub's ETag of a non-LFS file


@dataclass(frozen=True)
class Repo:
    """The one repository served, and its commit."""

    repo_id: str
    root: Path
    files: dict[str, RepoFile]
    sha: str


def git_blob_sha1(path: Path) -> str:
    """The git object id of a file's content (what the Hub gives as ETag)."""
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def load_repo(repo_id: str, root: Path) -> Repo:
    """Index the folder; the commit id is a hash of the paths and blob ids."""
    files: dict[str, RepoFile] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("."):  # .cache/, markers: not part of a model
            continue
        files[rel] = RepoFile(rel, path.stat().st_size, git_blob_sha1(path))
    listing = "".join(f"{f.path}\0{f.oid}\n" for f in files.values())
    return Repo(repo_id, root, files, hashlib.sha1(listing.encode()).hexdigest())


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """``bytes=N-`` or ``bytes=N-M`` as an inclusive (start, end); None for none or unsupported."""
    match = re.fullmatch(r"bytes=(\d+)-(\d*)", header or "")
    if match is None:
        return None
    start = int(match.group(1))
    end = int(match.group(2)) if match.group(2) else size - 1
    return start, min(end, size - 1)


def tree_entries(repo: Repo, directory: str, recursive: bool) -> list[dict[str, object]]:
    """The tree listing of a directory, as the Hub's /tree endpoint gives it."""
    prefix = f"{directory.strip('/')}/" if directory.strip("/") else ""
    entries: list[dict[str, object]] = []
    folders: set[str] = set()
    for f in repo.files.values():
        if not f.path.startswith(prefix):
            continue
        rest = f.path[len(prefix):]
        if "/" in rest and not recursive:
            folders.add(prefix + rest.split("/", 1)[0])
            continue
        entries.append({"type": "file", "oid": f.oid, "size": f.size, "path": f.path})
    entries += [{"type": "directory", "oid": "0" * 40, "size": 0, "path": d} for d in sorted(folders)]
    return entries


def repo_info(repo: Repo) -> dict[str, object]:
    """The model info document (what repo_info/model_info read)."""
    return {
        "_id": repo.sha[:24],
        "id": repo.repo_id,
        "modelId": repo.repo_id,
        "sha": repo.sha,
        "private": True,
        "gated": False,
        "disabled": False,
        "tags": [],
        "siblings": [{"rfilename": p} for p in repo.files],
    }


class HubHandler(BaseHTTPRequestHandler):
    """Routes one request; the server carries the repo, token and rate."""

    server: HubServer
    protocol_version = "HTTP/1.1"

    def do_HEAD(self) -> None:  # noqa: N802 (http.server's naming)
        self.route(send_body=False)

    def do_GET(self) -> None:  # noqa: N802
        self.route(send_body=True)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        """Silence the default stderr log; log_request_json writes one line instead."""

    def log_request_json(self, status: int, body_bytes: int) -> None:
        line = {"method": self.command, "path": self.path, "status": status, "body_bytes": body_bytes,
                "range": self.headers.get("Range")}
        with self.server.log_lock:
            print(json.dumps(line), flush=True)

    def authorized(self) -> bool:
        return not self.server.token or self.headers.get("Authorization", "") == f"Bearer {self.server.token}"

    def route(self, send_body: bool) -> None:
        if not self.authorized():
            self.send_json(HTTPStatus.UNAUTHORIZED, {"error": "Invalid credentials in Authorization header"},
                           send_body, {"X-Error-Code": "GatedRepo"})
            return
        path = unquote(urlsplit(self.path).path)
        query = urlsplit(self.path).query
        repo = self.server.repo
        api = f"/api/models/{repo.repo_id}"
        resolve = re.fullmatch(rf"/{re.escape(repo.repo_id)}/resolve/([^/]+)/(.+)", path)
        tree = re.fullmatch(rf"{re.escape(api)}/tree/([^/]+)(/.*)?", path)
        if path == api or re.fullmatch(rf"{re.escape(api)}/revision/[^/]+", path):
            if not self.known_revision(path.rsplit("/", 1)[-1] if "/revision/" in path else "main"):
                return
            self.send_json(HTTPStatus.OK, repo_info(repo), send_body)
        elif tree is not None:
            if self.known_revision(tree.group(1)):
                self.send_json(HTTPStatus.OK, tree_entries(repo, tree.group(2) or "", "recursive=true" in query.lower()),
                               send_body)
        elif resolve is not None:
            if self.known_revision(resolve.group(1)):
                self.send_file(resolve.group(2), send_body)
        else:
            self.send_json(HTTPStatus.NOT_FOUND, {"error": "Repository not found"}, send_body,
                           {"X-Error-Code": "RepoNotFound"})

    def known_revision(self, revision: str) -> bool:
        if revision in ("main", self.server.repo.sha):
            return True
        self.send_json(HTTPStatus.NOT_FOUND, {"error": f"Invalid rev id: {revision}"}, True,
                       {"X-Error-Code": "RevisionNotFound"})
        return False

    def common_headers(self) -> None:
        self.send_header("X-Repo-Commit", self.server.repo.sha)

    def send_json(self, status: HTTPStatus, document: object, send_body: bool,
                  extra: dict[str, str] | None = None) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self.common_headers()
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if send_body:
            self.wfile.write(body)
        self.log_request_json(status, len(body) if send_body else 0)

    def send_file(self, rel: str, send_body: bool) -> None:
        entry = self.server.repo.files.get(rel)
        if entry is None:
            self.send_json(HTTPStatus.NOT_FOUND, {"error": "Entry not found"}, send_body,
                           {"X-Error-Code": "EntryNotFound"})
            return
        wanted = parse_range(self.headers.get("Range"), entry.size)
        start, end = wanted if wanted is not None else (0, entry.size - 1)
        if wanted is not None and start >= entry.size:
            self.send_response(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
            self.send_header("Content-Range", f"bytes */{entry.size}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            self.log_request_json(416, 0)
            return
        self.send_response(HTTPStatus.PARTIAL_CONTENT if wanted is not None else HTTPStatus.OK)
        self.common_headers()
        self.send_header("ETag", f'"{entry.oid}"')
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start + 1))
        if wanted is not None:
            self.send_header("Content-Range", f"bytes {start}-{end}/{entry.size}")
        self.end_headers()
        sent = self.copy_range(self.server.repo.root / rel, start, end) if send_body else 0
        self.log_request_json(206 if wanted is not None else 200, sent)

    def copy_range(self, path: Path, start: int, end: int) -> int:
        """Send bytes start..end of a file at most server.rate bytes/s; the count sent (less when cut)."""
        sent = 0
        began = time.monotonic()
        with path.open("rb") as handle:
            handle.seek(start)
            while sent < end - start + 1:
                chunk = handle.read(min(CHUNK, end - start + 1 - sent))
                try:
                    self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    break
                sent += len(chunk)
                if self.server.rate > 0:
                    ahead = sent / self.server.rate - (time.monotonic() - began)
                    if ahead > 0:
                        time.sleep(ahead)
        return sent


class HubServer(ThreadingHTTPServer):
    """The HTTP server, holding what every handler needs."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], repo: Repo, token: str, rate: int) -> None:
        super().__init__(address, HubHandler)
        self.repo = repo
        self.token = token
        self.rate = rate
        self.log_lock = threading.Lock()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--root", type=Path, required=True, help="folder holding the model's files")
    parser.add_argument("--repo", required=True, help="repository id to serve it as, e.g. test-org/tiny-llama")
    parser.add_argument("--token-file", type=Path, help="file holding the one accepted token; none: no token wanted")
    parser.add_argument("--tls-cert", type=Path, help="PEM certificate (chain) to serve HTTPS with")
    parser.add_argument("--tls-key", type=Path, help="PEM private key of --tls-cert")
    parser.add_argument("--bind", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--rate", type=int, default=0, help="bytes per second per response; 0 for no limit")
    args = parser.parse_args(argv)
    token = args.token_file.read_text().strip() if args.token_file else ""
    if args.token_file and not token:
        parser.error(f"{args.token_file} is empty")
    if (args.tls_cert is None) != (args.tls_key is None):
        parser.error("give both --tls-cert and --tls-key, or neither")
    server = HubServer((args.bind, args.port), load_repo(args.repo, args.root), token, args.rate)
    if args.tls_cert is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print(json.dumps({"serving": args.repo, "sha": server.repo.sha, "files": len(server.repo.files),
                      "port": args.port}), flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
