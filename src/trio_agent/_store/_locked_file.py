"""The file work under a JSONL transcript: an exclusive lock, durable writes.

Plain blocking POSIX calls (run them in a worker thread from trio). The lock is a
``flock`` on the open file (none on Windows): it keeps two writers — in this or another
process — from appending to one transcript, and keeps a rewrite from replacing a file a
writer still has open.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING

from .._core import AgentUsageError

if sys.platform != "win32":
    import fcntl

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["CHUNK", "datasync", "fsync_dir", "line_start", "names", "open_locked", "write_all"]

# How far back to look for the start of the last line at a time, when reopening a file.
CHUNK = 1 << 16
# How often to reopen a file that is replaced between opening and locking it.
_REOPEN_TRIES = 100


def fsync_dir(directory: Path) -> None:
    """Make a new or renamed directory entry durable (POSIX; a no-op where unsupported)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def datasync(fd: int) -> None:
    # fdatasync skips metadata that does not matter for reading the data back.
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:  # pragma: no cover - macOS, Windows
        os.fsync(fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _lock_file(fd: int, path: Path) -> None:
    if sys.platform == "win32":  # pragma: no cover
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise AgentUsageError(
            f"{path} is already open for writing by another JsonlTranscript "
            "(in this or another process); close that one first"
        ) from None


def names(fd: int, path: Path) -> bool:
    """True if ``path`` still names the file open as ``fd``."""
    try:
        there = os.stat(path)
    except FileNotFoundError:
        return False
    here = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def open_locked(path: Path, flags: int) -> tuple[int, bool]:
    """Open ``path`` (created if missing) and lock it; return the fd and whether it was
    created.

    A file that was renamed over between opening and locking (by
    :func:`write_transcript`) is not the transcript any more: open the new one.

    Raises:
        AgentUsageError: another writer holds the lock.
        OSError: the file cannot be opened.
    """
    for _ in range(_REOPEN_TRIES):
        created = True
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            created = False
            try:
                fd = os.open(path, flags)
            except FileNotFoundError:
                continue  # removed meanwhile: create it
        try:
            _lock_file(fd, path)
            if names(fd, path):
                return fd, created
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    raise OSError(f"{path} kept being replaced while it was being opened; try again")


def line_start(fd: int, stop: int, floor: int) -> int:
    """Offset just after the last newline before ``stop`` (at least ``floor``)."""
    pos = stop
    while pos > floor:
        begin = max(floor, pos - CHUNK)
        chunk = os.pread(fd, pos - begin, begin)
        i = chunk.rfind(b"\n")
        if i >= 0:
            return begin + i + 1
        pos = begin
    return floor
