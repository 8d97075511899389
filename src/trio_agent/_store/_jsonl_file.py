"""Versioned JSONL files: the one file format under transcripts, cassettes and fleet
results, and the crash model every writer of it keeps.

Theory of operation
-------------------
A file is UTF-8 text, one JSON value per line, each line ending with ``\\n``. It opens
with a header line naming its format and version (``{"format":"trio-agent-transcript",
"version":1}``) — or, for a format that has none (:data:`NO_HEADER`: fleet results), with
its first value.

Writing: a file is opened for appending (:meth:`AppendFile.open`) and each line (or
group of lines) goes out with one ``write``; a write that fails (a full disk) is cut back
off at once, and the file takes no more lines (:attr:`AppendFile.broken`). A line is
durable once :meth:`AppendFile.append` (``sync=True``) or :meth:`AppendFile.sync`
returned; when to sync is each writer's policy (every line, every turn, never).

So a crash — a killed process, a power loss — can leave at most one *torn* last line.
A line is torn when it is the last one and is not UTF-8 JSON text: cut JSON, a cut UTF-8
sequence, a blank line. Well-formed JSON is never torn (a cut line is never whole JSON),
and neither is a line nested too deeply to read (no writer writes one). Readers
(:class:`JsonLines`) leave a torn line out and report it; opening the file for appending
cuts it off (and ends a whole last line that lost its ``\\n``), so the next line starts
on a line of its own. A header cut short (a file created by a writer that crashed
before its header was whole) is started over.

Every function here blocks (file I/O): from trio, run it in a worker thread.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import TYPE_CHECKING, Any, BinaryIO, Final, Literal, final

import attrs

from .._core import JsonTooDeep, TranscriptFormatError, parse_json
from ._locked_file import CHUNK, datasync, fsync_dir, line_start, names, open_locked, write_all

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

__all__ = [
    "NO_HEADER",
    "AppendFile",
    "FsyncMode",
    "HeaderError",
    "JsonLines",
    "LineFormat",
    "UnreadableLine",
    "check_fsync",
    "decode_line",
]

FsyncMode = bool | Literal["turn"]
"""When a writer of lines syncs them to disk: ``True`` after every line, ``"turn"`` once
per turn, ``False`` never (a process crash loses nothing written, a machine crash may)."""


def check_fsync(_instance: Any, _attribute: Any, value: Any) -> None:
    """An attrs validator of a :data:`FsyncMode` field."""
    if value is not True and value is not False and value != "turn":
        raise ValueError(f"fsync must be True, False or 'turn', not {value!r}")


class UnreadableLine(ValueError):
    """A line that is not UTF-8 JSON text.

    Attributes:
        torn: whether a crash while the line was written can explain it (cut JSON, a
            cut UTF-8 sequence, a blank line): then, as the last line of a file, it is
            a torn tail. A line nested too deeply to read is never torn: no writer
            writes one, and a cut line is never deeper than the whole one.
    """

    def __init__(self, reason: str, *, torn: bool = True) -> None:
        super().__init__(reason)
        self.torn = torn


def decode_line(raw: bytes) -> Any:
    """The JSON value of one line (without its newline). Raises :class:`UnreadableLine`."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableLine(
            f"not UTF-8 text ({exc.reason}: byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
        ) from None
    if not text.strip():
        raise UnreadableLine("blank line")
    try:
        return parse_json(text)
    except JsonTooDeep as exc:
        raise UnreadableLine(f"malformed JSON: {exc}", torn=False) from None
    except ValueError as exc:
        msg = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        col = f" (column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise UnreadableLine(f"malformed JSON: {msg}{col}") from None


class HeaderError(ValueError):
    """The first line of a file is not the header of its format (each format words it).

    Attributes:
        kind: ``empty`` (no line at all), ``unreadable`` (not UTF-8 JSON text: the
            message says why), ``foreign`` (JSON, not this format's header),
            ``no_version`` (no integer version) or ``version`` (a version this code
            does not read).
        version: the version the header gives, for ``no_version`` and ``version``.
    """

    def __init__(
        self,
        kind: Literal["empty", "unreadable", "foreign", "no_version", "version"],
        reason: str = "",
        version: object = None,
    ) -> None:
        super().__init__(reason or kind)
        self.kind = kind
        self.version = version


@final
@attrs.frozen
class LineFormat:
    """A kind of versioned JSONL file: the format name and version its header gives.

    Attributes:
        name: the header's ``format``; None for a file without a header.
        version: the version this code writes and reads.
    """

    name: str | None
    version: int = 1

    @property
    def header_line(self) -> bytes:
        """The header line, newline included (empty for a file without a header)."""
        if self.name is None:
            return b""
        header = {"format": self.name, "version": self.version}
        return (json.dumps(header, separators=(",", ":")) + "\n").encode()

    def read_header(self, raw: bytes) -> int:
        """The version of the header line ``raw`` (without its newline).

        Raises:
            HeaderError: ``raw`` is not this format's header of this version.
        """
        try:
            data = decode_line(raw)
        except UnreadableLine as exc:
            raise HeaderError("unreadable", str(exc)) from None
        if not isinstance(data, dict) or data.get("format") != self.name:
            raise HeaderError("foreign")
        version = data.get("version")
        if type(version) is not int:
            raise HeaderError("no_version", version=version)
        if version != self.version:
            raise HeaderError("version", version=version)
        return version

    def read_first_line(self, file: BinaryIO) -> int:
        """Read the header from the start of ``file`` (positioned after it on return);
        the version. A file without a header is not read: its version is returned.

        Raises:
            HeaderError: as :meth:`read_header`; ``empty`` for an empty file.
        """
        if self.name is None:
            return self.version
        header = file.readline()
        if not header:
            raise HeaderError("empty")
        return self.read_header(header.removesuffix(b"\n"))


NO_HEADER: Final = LineFormat(None)
"""The format of a JSONL file without a header line (fleet results)."""


def _format_error(where: str, line: int, reason: str) -> Exception:
    return TranscriptFormatError(f"{where}:{line}: {reason}", line=line)


@final
class JsonLines:
    """The lines of a versioned JSONL file after its header, with the rule for a torn
    tail (see the module docstring).

    Iterating gives ``(line number, JSON value)`` for each line of ``file``, read from
    where it stands one line at a time and one line ahead (to know which line is the
    last): memory stays near the size of one line. A torn last line is not given, and
    once the iteration is over :attr:`torn_line` and :attr:`torn_reason` say so. Any
    other unreadable line, and a line nested too deeply to read wherever it is, raises.

    Args:
        file: a binary file positioned after the header line (at its start, for a file
            without a header).
        where: how messages name the file.
        skip_blank: pass over blank lines instead of refusing them.
        first_line: the number of the line ``file`` is positioned at (2: after a
            header).
        bad_line: builds the error for an unreadable line from the file, the line number
            and the reason (default: :class:`TranscriptFormatError` with ``.line``).

    Raises:
        TranscriptFormatError: (while iterating; or what ``bad_line`` builds) a line
            that is not UTF-8 JSON text and not a torn tail.
        OSError: the file cannot be read.
    """

    def __init__(
        self,
        file: BinaryIO,
        where: str,
        *,
        skip_blank: bool = False,
        first_line: int = 2,
        bad_line: Callable[[str, int, str], Exception] = _format_error,
    ) -> None:
        self._file = file
        self._where = where
        self._skip_blank = skip_blank
        self._first = first_line
        self._bad_line = bad_line
        self.torn_line: int | None = None
        """The 1-based number of a torn last line that was left out, else None."""
        self.torn_reason: str | None = None
        """Why that line could not be read."""

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        readline = self._file.readline
        number = self._first - 1
        line = readline()
        while line:
            number += 1
            after = readline()
            raw = line.removesuffix(b"\n")
            if self._skip_blank and not raw.strip():
                line = after
                continue
            try:
                item = decode_line(raw)
            except UnreadableLine as exc:
                if not after and exc.torn:
                    self.torn_line, self.torn_reason = number, str(exc)
                    return
                raise self._bad_line(self._where, number, str(exc)) from None
            yield number, item
            line = after


@final
class AppendFile:
    """A versioned JSONL file open for appending whole lines; build it with :meth:`open`.

    Attributes:
        path: the file.
        size: the bytes of whole lines it holds (where the next line goes).
        broken: the ``OSError`` of a write or sync that failed, if one did: the file
            was cut back to its last whole line, and its writer takes no more lines.
        dirty: lines were appended since the last sync.
        dropped_bytes: bytes of a torn last line cut off when the file was opened.
    """

    __slots__ = ("_fd", "_metadata", "broken", "dirty", "dropped_bytes", "path", "size")

    def __init__(self, path: Path, fd: int, size: int, *, metadata: bool) -> None:
        self.path = path
        self._fd: int | None = fd
        self._metadata = metadata
        self.size = size
        self.broken: OSError | None = None
        self.dirty = False
        self.dropped_bytes = 0

    @classmethod
    def open(
        cls,
        path: Path,
        fmt: LineFormat,
        *,
        lock: bool = False,
        fresh: bool = False,
        durable: bool = True,
        metadata: bool = False,
        check_last: Callable[[Any], object] | None = None,
    ) -> tuple[AppendFile, Any]:
        """Open ``path`` for appending (created if missing); returns the file and the
        JSON value of its last line as it was found (None when there was none, or it was
        torn and cut off).

        A new, empty or ``fresh`` (emptied first) file gets the header line. An existing
        one has its header checked, its torn last line cut off, a last line that lost
        its newline ended. A file this call created and could not even write the header
        to (a full disk) is removed again before the error propagates.

        Args:
            lock: take the file's exclusive lock (see ``_locked_file``), held until
                :meth:`close`.
            durable: sync the header and the new directory entry of a created file.
            metadata: sync the file's metadata too on every sync (``fsync``, not
                ``fdatasync``).
            check_last: called with the value of an existing last line before anything
                is written (so that a file it refuses is left as it is).

        Raises:
            HeaderError: the existing file does not start with this format's header.
            UnreadableLine: its last line is unreadable and not torn (too deep).
            AgentUsageError: with ``lock``, another writer holds the lock.
            OSError: the file cannot be opened, read or written.
        """
        flags = os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        if lock:
            fd, created = open_locked(path, flags)
        else:
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
                created = True
            except FileExistsError:
                fd, created = os.open(path, flags), False
        file = cls(path, fd, 0, metadata=metadata)
        try:
            if fresh:
                os.ftruncate(fd, 0)
            size = os.fstat(fd).st_size
            last = None
            if size:
                size, last = file._check_existing(fmt, size, check_last)
            if not size and fmt.name is not None:
                write_all(fd, fmt.header_line)
                size = len(fmt.header_line)
                if durable:
                    file._sync()
            elif durable and file.dropped_bytes:
                file._sync()  # the torn line stays cut off
            if created and durable:
                fsync_dir(path.parent)
        except BaseException:
            # A file this call created and could not give its header is removed, under
            # the lock: no empty or torn file that does not load.
            if created and names(fd, path):
                with contextlib.suppress(OSError):
                    path.unlink()
            os.close(fd)
            raise
        file.size = size
        return file, last

    def _check_existing(
        self, fmt: LineFormat, size: int, check_last: Callable[[Any], object] | None
    ) -> tuple[int, Any]:
        """Check the header and the last line; return the size to append at and the
        last line's value."""
        fd = self._fd
        assert fd is not None
        header_end = 0
        if fmt.name is not None:
            header = fmt.header_line
            head = os.pread(fd, min(size, CHUNK), 0)
            end = head.find(b"\n")
            if end < 0:
                if size <= len(header) and header.startswith(head):
                    os.ftruncate(fd, 0)  # the header itself was torn: start over
                    return 0, None
                fmt.read_header(head)  # raises unless it is a whole header line
                write_all(fd, b"\n")
                return size + 1, None
            fmt.read_header(head[:end])
            header_end = end + 1
            if size == header_end:
                return size, None
        # The last line: from after the last newline before the final byte.
        ends_with_newline = os.pread(fd, 1, size - 1) == b"\n"
        stop = size - 1 if ends_with_newline else size
        start = line_start(fd, stop, header_end)
        try:
            last = decode_line(os.pread(fd, stop - start, start))
        except UnreadableLine as exc:
            if not exc.torn:
                raise
            os.ftruncate(fd, start)
            self.dropped_bytes = size - start
            return start, None
        if check_last is not None:
            check_last(last)
        if not ends_with_newline:
            write_all(fd, b"\n")
            size += 1
        return size, last

    def append(self, data: bytes, *, sync: bool) -> None:
        """Write ``data`` (whole lines) with one ``write``; with ``sync``, then sync.

        Raises:
            OSError: the write or sync failed: the file is cut back to its last whole
                line and :attr:`broken` set (the writer takes no more lines).
            ValueError: the file is closed.
        """
        fd = self._fd
        if fd is None:
            raise ValueError(f"{self.path} is closed")
        try:
            if data:
                write_all(fd, data)
            if sync:
                self._sync()
        except OSError as exc:
            # A line cut short would make the next one unreadable: cut it back off.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self.size)
            self.broken = exc
            raise
        self.size += len(data)
        self.dirty = not sync and (self.dirty or bool(data))

    def sync(self) -> None:
        """Sync what was appended since the last sync (nothing to do: nothing done).

        Raises:
            OSError: the sync failed (:attr:`broken` set).
        """
        if self.dirty:
            self.append(b"", sync=True)

    def _sync(self) -> None:
        fd = self._fd
        assert fd is not None
        if self._metadata:
            os.fsync(fd)
        else:
            datasync(fd)

    def close(self) -> None:
        """Close the file (releasing its lock). Closing twice does nothing."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
