"""A model folder that arrived as a tar goes in place only when nothing in it can leave the folder
(roles/model/files/unpack_model.py, run as the role runs it: ``python3 -c`` on a node, as root).

Each case builds an archive the way a forged stream would, and checks the disk afterwards: what
was in place before, what lies outside the folder, and the owners and modes of what came in.
"""
from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from support.ansible_run import REPO

SCRIPT = (REPO / "roles/model/files/unpack_model.py").read_text()


def add_file(tar: tarfile.TarFile, name: str, data: bytes = b"x", mode: int = 0o644, uid: int = 0) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.uid, info.gid = len(data), mode, uid, uid
    tar.addfile(info, io.BytesIO(data))


def add_link(tar: tarfile.TarFile, name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    tar.addfile(info)


class Node:
    """A node's models folder: the old copy in place, and an archive that arrived for it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dest = root / "models/m"
        self.incoming = root / "models/m.incoming"
        self.previous = root / "models/m.previous"
        self.archive = root / "models/m.incoming.tar"
        self.dest.mkdir(parents=True)
        (self.dest / "config.json").write_text("old")

    def unpack(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", SCRIPT, str(self.archive), str(self.incoming), str(self.previous), str(self.dest)],
            capture_output=True, text=True, check=False, cwd=self.root)

    def everything(self) -> set[str]:
        return {str(p.relative_to(self.root)) for p in self.root.rglob("*")}


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path / "node")


def test_a_clean_archive_replaces_the_folder_without_its_owners_or_modes(node: Node) -> None:
    with tarfile.open(node.archive, "w") as tar:
        add_file(tar, "./config.json", b"new", mode=0o4777, uid=1234)
        add_file(tar, "./sub/model.safetensors", b"w" * 10, mode=0o600, uid=1234)
        add_link(tar, "./sub/alias.safetensors", "model.safetensors")
    proc = node.unpack()
    assert proc.returncode == 0, proc.stderr
    assert (node.dest / "config.json").read_text() == "new"
    assert (node.dest / "sub/alias.safetensors").read_bytes() == b"w" * 10
    config = (node.dest / "config.json").stat()
    assert config.st_uid == os.getuid()  # not 1234: the archive's owner is not kept
    assert not config.st_mode & (stat.S_ISUID | stat.S_IWGRP | stat.S_IWOTH)
    assert node.everything() == {"models", "models/m", "models/m/config.json", "models/m/sub",
                                 "models/m/sub/model.safetensors", "models/m/sub/alias.safetensors"}


@pytest.mark.parametrize(("build", "why"), [
    (lambda tar: add_file(tar, "../escape"), "'..' component"),
    (lambda tar: add_file(tar, "./sub/../../escape"), "'..' component"),
    (lambda tar: add_file(tar, "/etc/dgx-spark-test-escape"), "is absolute"),
    (lambda tar: add_link(tar, "./etc", "/etc"), "points to '/etc'"),
    (lambda tar: add_link(tar, "./up", "../.."), "points to '../..'"),
    (lambda tar: add_link(tar, "./shadow", "/etc/shadow", tarfile.LNKTYPE), "hard link"),
    (lambda tar: tar.addfile(_fifo("./fifo")), "special file"),
], ids=["dotdot", "nested-dotdot", "absolute", "symlink-to-etc", "symlink-up", "hardlink-out", "fifo"])
def test_an_archive_that_could_leave_the_folder_is_refused_and_nothing_moves(
        node: Node, build: Callable[[tarfile.TarFile], None], why: str) -> None:
    with tarfile.open(node.archive, "w") as tar:
        add_file(tar, "./config.json", b"forged")
        build(tar)
        add_file(tar, "./etc/passwd", b"forged")  # would go through a link to /etc
    before = node.everything() - {"models/m.incoming.tar"}
    proc = node.unpack()
    assert proc.returncode == 1
    assert why in proc.stderr and "nothing extracted" in proc.stderr
    assert (node.dest / "config.json").read_text() == "old"
    assert node.everything() == before  # the archive is gone, nothing else came or went
    assert not Path("/etc/dgx-spark-test-escape").exists()
    assert not (node.root.parent / "escape").exists()


def _fifo(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.FIFOTYPE
    return info


def test_an_archive_that_is_not_a_tar_leaves_the_folder(node: Node) -> None:
    node.archive.write_bytes(b"\x00garbage" * 1000)
    proc = node.unpack()
    assert proc.returncode == 1
    assert (node.dest / "config.json").read_text() == "old"
    assert not node.archive.exists() and not node.incoming.exists()
