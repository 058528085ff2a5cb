"""Put a model folder that arrived as a tar in place, refusing anything that could leave it.

Run by root on a node, as ``python3 -c`` (Python 3.9+, standard library and GNU tar), once the
archive's SHA-256 equals what the head sent (role fabric_transfer); until then the archive is a
root-only file and nothing of it is extracted.

  unpack_model.py ARCHIVE INCOMING PREVIOUS DEST

Every member is checked before anything is extracted. Refused, naming the member: an absolute
path, a ``..`` component, a symbolic or hard link whose target is absolute or has a ``..``
component (relative targets without ``..`` can only point further into the folder), devices,
FIFOs and other special files. Then GNU tar extracts into INCOMING (emptied first) without the
archive's owners or modes (``--no-same-owner --no-same-permissions``, umask 022: files end up
root's, 0644 or 0755), and INCOMING replaces DEST (DEST moves to PREVIOUS, which is removed at
the end). ARCHIVE is removed whatever happens; INCOMING too when anything failed, leaving DEST
as it was.

Exit 0 when DEST holds the archive's contents; 1 (one line on stderr) otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import PurePosixPath
from typing import Optional, Sequence


class Refused(Exception):
    """The archive holds a member that could write outside the folder."""


def unsafe_path(path: str) -> Optional[str]:
    """Why ``path`` (a member name or a link target) could leave the folder; None when it cannot."""
    if path.startswith("/"):
        return "is absolute"
    if ".." in PurePosixPath(path).parts:
        return "has a '..' component"
    return None


def check_member(member: tarfile.TarInfo) -> None:
    """Raise Refused when extracting ``member`` could write outside the folder."""
    why = unsafe_path(member.name)
    if why is not None:
        raise Refused(f"member {member.name!r} {why}")
    if member.issym() or member.islnk():
        kind = "symbolic link" if member.issym() else "hard link"
        why = unsafe_path(member.linkname)
        if why is not None:
            raise Refused(f"{kind} {member.name!r} points to {member.linkname!r}, which {why}")
    elif not (member.isfile() or member.isdir()):
        raise Refused(f"member {member.name!r} is a device, FIFO or other special file")


def check_archive(archive: str) -> int:
    """Check every member of ``archive``; return how many there are."""
    count = 0
    try:
        with tarfile.open(archive, "r:") as tar:
            for member in tar:
                check_member(member)
                count += 1
    except tarfile.TarError as error:
        raise Refused(f"not a readable tar archive: {error}") from None
    return count


def extract(archive: str, incoming: str) -> None:
    """Extract ``archive`` into an empty ``incoming``, without the archive's owners or modes."""
    shutil.rmtree(incoming, ignore_errors=True)
    os.umask(0o022)
    os.mkdir(incoming, 0o755)
    subprocess.run(
        ["tar", "-C", incoming, "--no-same-owner", "--no-same-permissions", "-xf", archive],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def replace(incoming: str, previous: str, dest: str) -> None:
    """Move ``incoming`` to ``dest``; the old ``dest`` goes by way of ``previous``."""
    shutil.rmtree(previous, ignore_errors=True)
    if os.path.lexists(dest):
        os.rename(dest, previous)
    os.rename(incoming, dest)
    shutil.rmtree(previous, ignore_errors=True)


def unpack(archive: str, incoming: str, previous: str, dest: str) -> None:
    """Check, extract and put in place; the archive goes, and ``incoming`` too on failure."""
    placed = False
    try:
        check_archive(archive)
        extract(archive, incoming)
        replace(incoming, previous, dest)
        placed = True
    finally:
        if os.path.lexists(archive):
            os.remove(archive)
        if not placed:
            shutil.rmtree(incoming, ignore_errors=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run ``unpack`` on the command line's four paths; return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 4:
        print("usage: unpack_model.py ARCHIVE INCOMING PREVIOUS DEST", file=sys.stderr)
        return 2
    archive = args[0]
    try:
        unpack(*args)
    except Refused as error:
        print(f"unpack_model: refused {archive}, nothing extracted: {error}", file=sys.stderr)
        return 1
    except (OSError, subprocess.CalledProcessError) as error:
        print(f"unpack_model: {archive} not put in place: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
