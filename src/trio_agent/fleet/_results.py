"""``results.jsonl``: one line per finished task, appended by the driver alone.

Each line is written whole with one ``write`` to a file opened for appending, and the
file is fsynced before the tasks it records count as done (lines that finish together
share one write and one fsync: a group commit). A crash can leave one torn last line: it
is ignored when the file is read, and cut off when it is opened again, so the task it was
about is simply run (or rebuilt from its transcript) again. A write that fails (a full
disk) is cut back off at once, and the file takes no more lines: what it holds stays
whole lines.

A task run again by ``retry_failed`` gets a second line; its last line is the one that
counts.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import TYPE_CHECKING, Any

import trio

from ._task import StorageError, TaskResult

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["ResultsLog"]


def _read(fd: int, where: str) -> tuple[set[str], set[str], int]:
    """The ids of the results in the file, those whose last line is a failure, and the
    size to append at (a torn tail cut off)."""
    size = os.fstat(fd).st_size
    data = os.pread(fd, size, 0) if size else b""
    results: set[str] = set()
    failed: set[str] = set()
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline, else an unfinished line
    keep = size - len(tail)
    for number, raw in enumerate(lines, start=1):
        try:
            result = TaskResult.from_json(json.loads(raw))
        except (ValueError, KeyError, TypeError) as exc:
            if number == len(lines) and not tail:
                # The last line, whole but unreadable: a crash tore it. Drop it.
                keep -= len(raw) + 1
                break
            raise ValueError(
                f"{where}:{number}: not a result line ({type(exc).__name__}: {exc}); "
                "fix or remove that line to go on"
            ) from None
        results.add(result.id)
        if result.failed:
            failed.add(result.id)
        else:
            failed.discard(result.id)
    return results, failed, keep


class ResultsLog:
    """The results file of a fleet, opened for appending. Use :meth:`open`."""

    def __init__(self, path: Path, fd: int, done: set[str], failed: set[str], size: int) -> None:
        self.path = path
        self._fd: int | None = fd
        self.done = done
        """The ids of the tasks recorded in the file (read when opened, then added to)."""
        self.failed = failed
        """The ids whose last line in the file is a failure (see ``TaskResult.failed``)."""
        self._size = size
        self._pending: list[bytes] = []
        self._queued = 0  # lines handed to record() so far
        self._written = 0  # of those, lines on disk
        self._broken: StorageError | None = None
        self._lock = trio.Lock()

    @classmethod
    def open_sync(cls, path: Path) -> ResultsLog:
        """Open (or create) ``path`` and read what it holds. Blocks (file I/O).

        Raises:
            ValueError: a line other than the last is not a result line.
            OSError: the file cannot be opened.
        """
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            done, failed, keep = _read(fd, os.fspath(path))
            if keep < os.fstat(fd).st_size:
                os.ftruncate(fd, keep)
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, done, failed, keep)

    async def record(self, result: TaskResult) -> None:
        """Append ``result``'s line and fsync; returns once the line is on disk.

        A checkpoint. Lines recorded while a write is in progress go out together in the
        next write. The write itself is shielded from cancellation (it is short), so a
        result handed over is never half-recorded by a Ctrl-C.

        Raises:
            StorageError: the write failed, this time or before (a full disk): the file
                was cut back to its last whole line and takes no more lines; the fleet
                stops, and the tasks not recorded run again next time.
        """
        self._pending.append(
            json.dumps(result.to_json(), ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        )
        self._queued += 1
        mine = self._queued
        with trio.CancelScope(shield=True):
            async with self._lock:
                # Unless an earlier holder of the lock wrote our line with its own:
                if mine > self._written:
                    if self._broken is not None:
                        raise self._broken
                    count = len(self._pending)
                    batch, self._pending = b"".join(self._pending), []
                    await trio.to_thread.run_sync(self._write, batch)
                    self._written += count
        if result.failed:
            self.failed.add(result.id)
        else:
            self.failed.discard(result.id)

    def _write(self, data: bytes) -> None:
        fd = self._fd
        if fd is None:
            raise trio.ClosedResourceError("the results file is closed")
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        except OSError as exc:
            # A line cut short would make the next line unreadable: cut it back off.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self._size)
            broken = self._broken = StorageError(f"cannot write {self.path}: {exc}")
            raise broken from exc
        self._size += len(data)

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> ResultsLog:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
