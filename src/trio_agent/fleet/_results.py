"""``results.jsonl``: one line per finished task, appended by the driver alone.

A versioned JSONL file without a header (``_store``'s ``NO_HEADER`` format), written and
read with the crash model every such file keeps: each line is written whole with one
``write`` to a file opened for appending, and the file is fsynced before the tasks it
records count as done (lines that finish together share one write and one fsync: a
group commit). A crash can leave one torn last line: it is ignored when the file is
read, and cut off when it is opened again, so the task it was about is simply run (or
rebuilt from its transcript) again. A write that fails (a full disk) is cut back off at
once, and the file takes no more lines: what it holds stays whole lines. Any other line
that is not a result (not JSON, or JSON that is not a result) is an error naming it.

A task run again by ``retry_failed`` gets a second line; its last line is the one that
counts.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import trio

from .._store import NO_HEADER, AppendFile, JsonLines
from ._task import DEFERRED, StorageError, TaskResult

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["ResultsLog"]


def _not_a_result(where: str, line: int, reason: str) -> ValueError:
    return ValueError(
        f"{where}:{line}: not a result line ({reason}); fix or remove that line to go on"
    )


def _read(path: Path) -> tuple[set[str], set[str], set[str]]:
    """The ids of the results in the file, those whose last line is a failure, and
    those whose last line is ``deferred`` (a torn last line left out).

    Raises:
        ValueError: a line that is not a result line (and not a torn last line).
        OSError: the file cannot be read.
    """
    results: set[str] = set()
    failed: set[str] = set()
    deferred: set[str] = set()
    where = os.fspath(path)
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return results, failed, deferred
    with f:
        for number, data in JsonLines(f, where, first_line=1, bad_line=_not_a_result):
            try:
                result = TaskResult.from_json(data)
            except (ValueError, KeyError, TypeError) as exc:
                raise _not_a_result(where, number, f"{type(exc).__name__}: {exc}") from None
            results.add(result.id)
            if result.failed:
                failed.add(result.id)
            else:
                failed.discard(result.id)
            if result.reason == DEFERRED:
                deferred.add(result.id)
            else:
                deferred.discard(result.id)
    return results, failed, deferred


class ResultsLog:
    """The results file of a fleet, opened for appending. Use :meth:`open`."""

    def __init__(
        self,
        file: AppendFile,
        done: set[str],
        failed: set[str],
        deferred: set[str] | None = None,
    ) -> None:
        self.path = file.path
        self._file: AppendFile | None = file
        self.done = done
        """The ids of the tasks recorded in the file (read when opened, then added to)."""
        self.failed = failed
        """The ids whose last line in the file is a failure (see ``TaskResult.failed``)."""
        self.deferred = set(deferred or ())
        """The ids whose last line in the file is ``deferred`` (calls wait)."""
        self._pending: list[bytes] = []
        self._queued = 0  # lines handed to record() so far
        self._written = 0  # of those, lines on disk
        self._broken: StorageError | None = None
        self._lock = trio.Lock()

    @classmethod
    def open_sync(cls, path: Path) -> ResultsLog:
        """Open (or create) ``path`` and read what it holds. Blocks (file I/O).

        Raises:
            ValueError: a line other than a torn last one is not a result line (the
                file is left as it is).
            OSError: the file cannot be opened.
        """
        done, failed, deferred = _read(path)
        file, _ = AppendFile.open(path, NO_HEADER, metadata=True)
        return cls(file, done, failed, deferred)

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
        if result.reason == DEFERRED:
            self.deferred.add(result.id)
        else:
            self.deferred.discard(result.id)

    def _write(self, data: bytes) -> None:
        file = self._file
        if file is None:
            raise trio.ClosedResourceError("the results file is closed")
        try:
            file.append(data, sync=True)
        except OSError as exc:
            broken = self._broken = StorageError(f"cannot write {self.path}: {exc}")
            raise broken from exc

    def close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            file.close()

    def __enter__(self) -> ResultsLog:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
