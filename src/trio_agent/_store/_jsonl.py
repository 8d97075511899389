"""JSONL transcripts on disk: written as a run goes, read back after a crash.

File format, version 1 (UTF-8, one JSON object per line, each line ends with ``\\n``;
surrogate code points, which UTF-8 cannot hold, are written as ``\\uXXXX`` escapes)::

    {"format":"trio-agent-transcript","version":1}       line 1: the header
    {"role":"user","content":[...],"timestamp":...}       then one line per finished
    {"role":"assistant","content":[...],...}              message, in transcript order
    {"marker":"compaction","data":{...}}                  a marker line, between messages

Marker lines carry what a run records beside its messages (a compaction, a deferral, the
timings of its requests and calls): ``"marker"`` names the kind, ``"data"`` is a JSON
object. They never change the messages: :func:`load_transcript` returns them apart, each
with the number of messages before it (:class:`Marker`), and a reader keeps the kinds it
knows and skips the others. A file without marker lines is what earlier versions wrote;
one with them loads only in versions that know markers (earlier ones report the line as
"not a message").

A transcript is a versioned JSONL file (``_jsonl_file``: the format and the crash model
it shares with cassettes and fleet results).

Crash model. :class:`JsonlTranscript` writes each message with a single ``write`` to an
unbuffered file opened for appending, so once its sink has returned the line is in the
operating system: a process killed at any instant (SIGKILL included) loses no message
whose ``MessageEnd`` had been written. ``fsync`` (the default: after every line) also
makes the line survive a machine crash or power loss. The worst a crash can leave is one
*torn* last line; :func:`load_transcript` drops and reports it, and opening the file
again for appending cuts it off.

Resuming a run after a crash::

    loaded = load_transcript(path)          # torn tail dropped, reported as loaded.torn_line
    messages = repair(loaded.messages)      # every unanswered call gets an aborted result
    write_transcript(path, messages)        # atomic rewrite, so the file matches
    async with JsonlTranscript(path) as transcript:
        await run_agent_loop([], Context(messages=messages, tools=tools), model,
                             on_event=transcript)

(``load_transcript`` and ``write_transcript`` block: inside trio, call them through
``trio.to_thread.run_sync``.)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, final

import attrs
import trio

from .._core import (
    Message,
    TranscriptFormatError,
    as_history,
    check_json,
    from_jsonable,
    json_text,
    message_to_json,
    to_jsonable,
    waiting_in,
)
from .._core import events as ev
from ._jsonl_file import (
    AppendFile,
    FsyncMode,
    HeaderError,
    JsonLines,
    LineFormat,
    UnreadableLine,
    check_fsync,
)
from ._locked_file import fsync_dir, names, open_locked
from ._timings import TIMINGS, TimingRecorder

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from types import TracebackType

__all__ = [
    "COMPACTION",
    "JsonlTranscript",
    "LoadedTranscript",
    "Marker",
    "carry_markers",
    "compaction_marker",
    "load_transcript",
    "write_transcript",
]

TRANSCRIPT: Final = LineFormat("trio-agent-transcript", 1)
"""The transcript file format: its header's name and version."""
VERSION: Final = TRANSCRIPT.version
HEADER_LINE: Final = TRANSCRIPT.header_line


def _header_error(exc: HeaderError, where: str) -> TranscriptFormatError:
    """How a transcript reader words a first line that is not a transcript header."""
    if exc.kind == "version":
        return TranscriptFormatError(
            f"{where}:1: transcript format version {exc.version} is not supported "
            f"(this trio-agent reads version {VERSION}; upgrade trio-agent to read it)",
            path="$.version",
            line=1,
        )
    what = {
        "empty": "empty file, not a trio-agent transcript (expected a header line)",
        "unreadable": f"no transcript header ({exc})",
        "foreign": "no transcript header (not a trio-agent transcript)",
        "no_version": f"the header has no integer version (got {exc.version!r})",
    }[exc.kind]
    if exc.kind != "empty":
        what += f"; a trio-agent transcript starts with the line {HEADER_LINE.decode().strip()}"
    return TranscriptFormatError(f"{where}:1: {what}", line=1)


@attrs.frozen(kw_only=True)
class Marker:
    """A marker line of a transcript: what a run recorded beside its messages.

    Attributes:
        kind: what it records (``"compaction"``, ``"deferral"``, ``"timings"``...); a
            reader skips the kinds it does not know.
        data: its content, a JSON object.
        at: how many messages come before it in the file: it was written after
            ``messages[at - 1]`` and before ``messages[at]``.
    """

    kind: str
    data: Mapping[str, Any]
    at: int = 0


COMPACTION: Final = "compaction"
"""The marker kind a ``ContextCompacted`` event is recorded as."""


def compaction_marker(event: ev.ContextCompacted) -> dict[str, Any]:
    """The data of the ``"compaction"`` marker line recording ``event``: its fields
    (``usage`` as an object of its four counts) and ``plan``, from which
    ``trio_agent.context.model_view`` rebuilds the view."""
    data: dict[str, Any] = to_jsonable(event, ev.ContextCompacted)
    data.pop("type", None)
    return data


def _is_marker(data: Any) -> bool:
    return isinstance(data, dict) and "marker" in data and "role" not in data


def _parse_marker(data: dict[str, Any], at: int, where: str, line: int | None) -> Marker:
    kind, content = data.get("marker"), data.get("data", {})
    problem = None
    if not isinstance(kind, str) or not kind:
        problem = "$.marker: expected a non-empty string"
    elif not isinstance(content, dict):
        problem = "$.data: expected a JSON object"
    elif set(data) - {"marker", "data"}:
        problem = f"unexpected keys {sorted(set(data) - {'marker', 'data'})} in a marker line"
    if problem is not None:
        place = f"{where}:{line}" if line is not None else f"{where}, last line"
        raise TranscriptFormatError(f"{place}: {problem}", line=line)
    assert isinstance(kind, str)
    return Marker(kind=kind, data=content, at=at)


def _parse_line(data: Any, where: str, line: int | None) -> Message | Marker:
    """A message line or a marker line (``at`` is set by the caller)."""
    if _is_marker(data):
        return _parse_marker(data, 0, where, line)
    return _parse_message(data, where, line)


def _parse_message(data: Any, where: str, line: int | None) -> Message:
    try:
        message: Message = from_jsonable(data, Message)
    except TranscriptFormatError as exc:
        at = f"{where}:{line}" if line is not None else f"{where}, last line"
        raise TranscriptFormatError(f"{at}: {exc}", path=exc.path, line=line) from None
    return message


# --- reading ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class LoadedTranscript:
    """What :func:`load_transcript` read.

    Attributes:
        messages: every whole message, in file order.
        markers: every marker line, in file order (each knows how many messages come
            before it).
        version: the format version of the header.
        torn_line: the 1-based line number of a torn last line that was dropped (a crash
            happened while it was written), else None.
        torn_reason: why that line could not be read.
    """

    messages: tuple[Message, ...]
    markers: tuple[Marker, ...] = ()
    version: int = VERSION
    torn_line: int | None = None
    torn_reason: str | None = None

    @property
    def waiting(self) -> frozenset[str]:
        """The ids of the calls that wait for a decision: the transcript ends in a
        deferral (its ``deferral`` marker names them) and they have no result yet. Pass
        them to ``check_transcript(..., waiting=...)`` and ``repair(..., waiting=...)``:
        such a transcript waits, it is not broken; ``resume`` answers them.

        Raises:
            TranscriptFormatError: the deferral marker is malformed.
        """
        return waiting_in(self.messages, self.markers)

    def markers_of(self, kind: str) -> tuple[Marker, ...]:
        """The markers of one kind, in file order."""
        return tuple(m for m in self.markers if m.kind == kind)

    @property
    def whole(self) -> bool:
        """True when nothing was dropped."""
        return self.torn_line is None

    def line_of(self, index: int) -> int:
        """The file line of ``messages[index]`` (the header is line 1; marker lines
        before the message count)."""
        return index + 2 + sum(1 for m in self.markers if m.at <= index)


def load_transcript(path: str | os.PathLike[str]) -> LoadedTranscript:
    """Read a JSONL transcript written by :class:`JsonlTranscript`. Blocks (file I/O).

    The file is read one line at a time, so the memory it takes is about that of the
    messages themselves (plus one line), not a copy of the whole file.

    Lines are numbered from 1, the header being line 1. The last line is kept when it
    reads as a message or a marker, with or without its final newline; when it is not UTF-8 JSON
    text it is *torn* (a crash cut it): it is dropped and reported in
    ``torn_line`` of the :class:`LoadedTranscript`.

    Raises:
        TranscriptFormatError: an empty file, a missing or unknown header or version, or
            a bad line anywhere but at the end (not UTF-8, malformed JSON, a blank line,
            or JSON that is neither a message nor a marker line — also as the last
            line, since a crash cannot produce well-formed JSON). ``.line`` is the
            line number and ``.path`` the field path inside that line (like
            ``$.content[0].type``).
        OSError: the file cannot be read.
    """
    where = os.fspath(path)
    with open(path, "rb") as f:
        try:
            version = TRANSCRIPT.read_first_line(f)
        except HeaderError as exc:
            raise _header_error(exc, where) from None
        lines = JsonLines(f, where)
        messages: list[Message] = []
        markers: list[Marker] = []
        for number, item in lines:
            if _is_marker(item):
                markers.append(_parse_marker(item, len(messages), where, number))
            else:
                messages.append(_parse_message(item, where, number))
    return LoadedTranscript(
        messages=tuple(messages),
        markers=tuple(markers),
        version=version,
        torn_line=lines.torn_line,
        torn_reason=lines.torn_reason,
    )


def _encode(messages: Iterable[Message]) -> bytes:
    return "".join([message_to_json(m) + "\n" for m in messages]).encode()


def _marker_line(kind: str, data: Mapping[str, Any]) -> bytes:
    if not isinstance(kind, str) or not kind:
        raise TypeError(f"a marker kind is a non-empty string, not {kind!r}")
    if not isinstance(data, Mapping):
        raise TypeError(f"a marker's data is a mapping, not {type(data).__name__}")
    check_json(data, "marker data")
    return (json_text({"marker": kind, "data": to_jsonable(dict(data))}) + "\n").encode()


def _encode_with_markers(messages: tuple[Message, ...], markers: Iterable[Marker]) -> bytes:
    ordered = sorted(markers, key=lambda m: m.at)  # stable: markers at one place keep order
    parts: list[bytes] = []
    done = 0
    for marker in ordered:
        if not 0 <= marker.at <= len(messages):
            raise ValueError(
                f"a marker at {marker.at} is outside the {len(messages)} messages written"
            )
        parts.append(_encode(messages[done : marker.at]))
        parts.append(_marker_line(marker.kind, marker.data))
        done = marker.at
    parts.append(_encode(messages[done:]))
    return b"".join(parts)


def carry_markers(
    old: Sequence[Message], new: Sequence[Message], markers: Iterable[Marker]
) -> tuple[Marker, ...]:
    """``markers`` of the transcript ``old``, placed in ``new``: ``old`` with messages
    inserted (as :func:`repair` inserts results). Each marker stays right after the
    message it followed, so messages inserted later come after it.

    Raises:
        ValueError: ``old`` is not ``new`` with messages inserted (the same objects, in
            the same order).
    """
    after: list[int] = []  # after[k]: 1 + the index in ``new`` of old[k - 1]
    j = 0
    for message in old:
        while j < len(new) and new[j] is not message:
            j += 1
        if j == len(new):
            raise ValueError("the new transcript does not hold every old message in order")
        j += 1
        after.append(j)
    return tuple(attrs.evolve(m, at=after[m.at - 1] if m.at else 0) for m in markers)


def write_transcript(
    path: str | os.PathLike[str],
    messages: Iterable[Message],
    *,
    markers: Iterable[Marker] = (),
    fsync: bool = True,
) -> None:
    """Write a whole transcript file, replacing ``path`` atomically. Blocks (file I/O).

    The file is written next to ``path`` under a temporary name, fsynced (unless
    ``fsync=False``) and renamed over ``path``: a crash leaves either the old file or the
    new one, never a mix. Use it to rewrite a transcript after :func:`repair` before
    appending to it again; pass the loaded ``markers`` to keep them (each is written
    before ``messages[marker.at]``, markers at one place in their given order).

    It takes the same lock as :class:`JsonlTranscript`, so it never replaces a file a
    writer still has open (whose later lines would go to the replaced file and be lost):
    while one does, it is refused and nothing is written.

    Raises:
        AgentUsageError: a ``JsonlTranscript`` (in this or another process) has ``path``
            open; close it first.
        OSError: the file cannot be written (the temporary file is removed).
        TypeError: an item is not a message, or a message or marker holds a value that
            is not JSON (in ``details``, say); nothing is written.
        ValueError: a marker's ``at`` is past the end of ``messages``; nothing is
            written.
    """
    target = Path(path)
    # A line that is not a message would make the file unloadable: checked first.
    payload = HEADER_LINE + _encode_with_markers(as_history(messages, "messages"), markers)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    # Locking needs a file to lock: a missing target is created empty, under the lock,
    # so that no writer can open it meanwhile.
    fd, created = open_locked(target, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        try:
            with open(tmp, "wb") as f:
                f.write(payload)
                f.flush()
                if fsync:
                    os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            if created and names(fd, target):
                with contextlib.suppress(OSError):
                    target.unlink()
            raise
    finally:
        os.close(fd)  # releases the lock
    if fsync:
        fsync_dir(target.parent)


# --- writing ---------------------------------------------------------------------------


@final
@attrs.define(eq=False)
class JsonlTranscript:
    """Append every finished message of a run to a JSONL file, crash-safely.

    Use it as an async context manager; it is the sink of a run::

        async with JsonlTranscript("run.jsonl") as transcript:
            result = await run_agent_loop(prompts, context, model, on_event=transcript)

    with :func:`open_agent_loop` (the sink writes each message before the consumer
    reads its event)::

        async with JsonlTranscript("run.jsonl") as transcript:
            async with open_agent_loop(prompts, context, model, on_event=transcript) as run:
                async for event in run.events:
                    ...

    or, from an ``Agent`` subscription, call :meth:`write_event` for each event you read.

    Entering opens the file: a new (or empty) file gets the header line; an existing
    transcript is appended to — its header is checked, not repeated, and a torn last
    line left by a crash is cut off (:attr:`dropped_bytes`); a file that entering
    created but could not write the header to (a full disk) is removed again before the
    error propagates. One ``JsonlTranscript``
    (in any process) may write a file at a time: the file is locked while open, and
    :func:`write_transcript` refuses to replace it meanwhile.
    Leaving the block closes the file (after a last fsync when ``fsync`` is ``"turn"``).

    Each ``MessageEnd`` becomes one line, in call order. The write (and fsync) runs in a
    worker thread (``trio.to_thread.run_sync``), so the trio loop keeps running; the
    sink returns once the line is written — and, with ``fsync=True``, on disk. A
    ``MessageEnd`` handed to the sink is written exactly once, whatever cancels: a cancel
    arriving before or during the write takes effect after it (a run counts a sink call
    that a cancel interrupted as delivered, and never makes it again).

    Attributes:
        path: the transcript file (a ``str`` is converted to a ``Path``).
        fsync: ``True`` (default): fsync after every line — survives a power loss.
            ``"turn"``: fsync once per turn (at ``TurnEnd`` and ``AgentEnd``) and on
            close — a batch of N results costs one fsync, and a power loss may lose the
            current turn. ``False``: never fsync — survives a process crash (the line is
            in the OS), not a machine crash. Every mode writes each line at once.
        timings: also record when each model request and each tool call happened, as
            ``"timings"`` marker lines (default False; the command line turns it on): a
            request's line goes out with its reply in the same write, a batch's at its
            ``TurnEnd`` (one more write per turn that ran calls; in ``"turn"`` mode
            together with that turn's fsync). Streamed deltas cost one check each: only
            a reply's first one is timed. A request's line holds ``{"run", "turn",
            "request": {"start", "first_token", "end"}}``, a batch's ``{"run", "turn",
            "calls": [{"id", "name", "start", "end", "outcome", "is_error",
            "waited"}...], "stats": {...}}`` (the batch's ``TurnStats``): times are
            seconds from the run's start on the trio clock, ``run`` the wall-clock time
            of that start (seconds since the epoch).
    """

    path: Path = attrs.field(converter=Path, on_setattr=attrs.setters.frozen)
    fsync: FsyncMode = attrs.field(default=True, validator=check_fsync, kw_only=True)
    timings: bool = attrs.field(default=False, kw_only=True, on_setattr=attrs.setters.frozen)
    _timer: TimingRecorder | None = attrs.field(
        default=attrs.Factory(lambda self: TimingRecorder() if self.timings else None, True),
        init=False,
    )
    _file: AppendFile | None = attrs.field(default=None, init=False)
    _state: Literal["new", "open", "closed"] = attrs.field(default="new", init=False)
    _lock: trio.StrictFIFOLock = attrs.field(factory=trio.StrictFIFOLock, init=False)
    dropped_bytes: int = attrs.field(default=0, init=False)
    """Bytes of a torn last line cut off when the file was opened (0 normally)."""

    @property
    def write_error(self) -> BaseException | None:
        """The ``OSError`` of a write (or fsync) that failed, if one did — the file was cut
        back to its last whole line and takes no more lines — else None. Tells a run
        that failed because this sink could not write (``AgentRunError`` whose cause is
        this error) from one that failed for a reason of its own."""
        return None if self._file is None else self._file.broken

    # --- opening and closing ----------------------------------------------------------

    async def __aenter__(self) -> JsonlTranscript:
        """Open the file (in a worker thread). A checkpoint.

        Raises:
            TranscriptFormatError: the file exists but is not a transcript of this
                format version, or its last line is JSON that is neither a message nor
                a marker line.
            AgentUsageError: another ``JsonlTranscript`` has the file open.
            OSError: the file cannot be opened or written.
            RuntimeError: entered twice.
        """
        if self._state != "new":
            raise RuntimeError("a JsonlTranscript can be entered only once")
        self._state = "open"
        try:
            async with self._lock:  # a write from another task waits for the file
                await trio.to_thread.run_sync(self._open_sync)
        except BaseException:
            self._state = "closed"
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the file; later writes raise ``trio.ClosedResourceError``. A checkpoint.

        Waits for a write in progress. Closing happens even when cancelled (shielded,
        like trio's own file objects), then ``Cancelled`` is raised. Closing twice does
        nothing.
        """
        if self._state == "closed":
            await trio.lowlevel.checkpoint()
            return
        self._state = "closed"
        with trio.CancelScope(shield=True):
            async with self._lock:
                await trio.to_thread.run_sync(self._close_sync)
        await trio.lowlevel.checkpoint_if_cancelled()

    def _open_sync(self) -> None:
        where = os.fspath(self.path)
        try:
            file, _ = AppendFile.open(
                self.path,
                TRANSCRIPT,
                lock=True,
                durable=self.fsync is not False,
                check_last=lambda data: _parse_line(data, where, None),
            )
        except HeaderError as exc:
            raise _header_error(exc, where) from None
        except UnreadableLine as exc:
            raise TranscriptFormatError(f"{where}, last line: {exc}") from None
        self._file = file
        self.dropped_bytes = file.dropped_bytes

    def _close_sync(self) -> None:
        # The closed file is kept: its ``broken`` stays readable (``write_error``).
        file = self._file
        if file is None:
            return
        try:
            if self.fsync == "turn" and file.broken is None:
                file.sync()
        finally:
            file.close()

    # --- writing ------------------------------------------------------------------------

    # Not a checkpoint for events it ignores: a run calls its sink for every streamed delta.
    async def write_event(self, event: ev.AgentEvent) -> None:  # noqa: ASYNC910
        """Record ``event``: a ``MessageEnd`` becomes one line, a ``RecordMarker`` one
        marker line (fsynced unless ``fsync=False``), a ``ContextCompacted`` one
        ``"compaction"`` marker line (its fields, with ``usage`` as an object); other
        events are ignored (except ``TurnEnd``/``AgentEnd``, which fsync in ``"turn"``
        mode), or with ``timings`` noted, and written as timing marker lines with a reply
        and at the end of a turn that ran calls.

        A checkpoint only when it writes or syncs: every other event returns at once, so
        that streaming deltas through the sink costs nothing. A run passes events one at
        a time; concurrent callers are written in the order they called.

        Raises:
            trio.ClosedResourceError: the transcript is not open.
            trio.BrokenResourceError: an earlier write failed; the file was cut back to
                its last whole line and takes no more lines.
            OSError: writing failed (the file is cut back to its last whole line).
            TypeError: the message holds a value that is not JSON (nothing written).
        """
        if self._state != "open":
            self._raise_not_open()
        kind = type(event)
        timer = self._timer
        if kind is ev.MessageUpdate:
            if timer is not None and timer.awaiting_first:
                assert isinstance(event, ev.MessageUpdate)
                timer.first_token(event.event)
            return
        if kind is ev.MessageEnd:
            assert isinstance(event, ev.MessageEnd)
            line = _encode((event.message,))
            if timer is not None:
                timing = timer.reply_ended(event.message)
                if timing is not None:
                    line += _marker_line(TIMINGS, timing)
            await self._write_whatever(line, sync=self.fsync is True)
            return
        if kind is ev.RecordMarker:
            assert isinstance(event, ev.RecordMarker)
            # What a resume relies on (a deferral; the decisions, on disk before an
            # approved call runs): written and synced (unless fsync=False) at once.
            line = _marker_line(event.kind, event.data)
            await self._write_whatever(line, sync=self.fsync is not False)
            return
        if kind is ev.ContextCompacted:
            assert isinstance(event, ev.ContextCompacted)
            await self.write_marker(COMPACTION, compaction_marker(event))
            return
        ending = kind is ev.TurnEnd or kind is ev.AgentEnd
        if timer is not None:
            if not ending:
                timer.see(event)
            else:
                stats = event.stats if isinstance(event, ev.TurnEnd) else None
                timing = timer.batch_ended(stats)
                if timing is not None:
                    line = _marker_line(TIMINGS, timing)
                    await self._write_whatever(line, sync=self.fsync is not False)
                    return
        if self.fsync == "turn" and ending:
            await self._write((), sync=True)

    __call__ = write_event

    async def write_messages(self, messages: Iterable[Message]) -> None:
        """Append ``messages`` as lines, with one write (and one fsync unless
        ``fsync=False``). A checkpoint. Raises as :meth:`write_event`, and ``TypeError``
        (nothing written) for an item that is not a message."""
        if self._state != "open":
            self._raise_not_open()
        await self._write(as_history(messages, "messages"), sync=self.fsync is not False)

    async def write_marker(self, kind: str, data: Mapping[str, Any]) -> None:
        """Append one marker line ``{"marker": kind, "data": data}`` after the messages
        written so far (fsynced unless ``fsync`` is ``False`` or ``"turn"``). A
        checkpoint; written exactly once whatever cancels, like a message line.

        Raises as :meth:`write_event`, and ``TypeError`` (nothing written) when ``kind``
        is not a non-empty string or ``data`` not a JSON object.
        """
        if self._state != "open":
            self._raise_not_open()
        await self._write_whatever(_marker_line(kind, data), sync=self.fsync is True)

    async def _write_whatever(self, line: bytes, *, sync: bool) -> None:
        # A run counts a sink call as delivered even when a cancel interrupts it (it never
        # makes it again), so the line is written whatever: a cancel takes effect once it
        # is.
        with trio.CancelScope(shield=True):
            await self._write_bytes(line, sync=sync)
        await trio.lowlevel.checkpoint_if_cancelled()

    async def _write(self, messages: tuple[Message, ...], *, sync: bool) -> None:
        await self._write_bytes(_encode(messages) if messages else b"", sync=sync)

    async def _write_bytes(self, data: bytes, *, sync: bool) -> None:
        async with self._lock:
            if self._state != "open":
                self._raise_not_open()
            if data or (sync and self._file is not None and self._file.dirty):
                await trio.to_thread.run_sync(self._write_sync, data, sync)

    def _raise_not_open(self) -> None:
        if self._state == "new":
            raise trio.ClosedResourceError(
                "the transcript is not open: use `async with JsonlTranscript(path) as t`"
            )
        raise trio.ClosedResourceError("the transcript is closed")

    def _write_sync(self, data: bytes, sync: bool) -> None:
        # Runs in a worker thread, one at a time (under the lock).
        file = self._file
        assert file is not None
        if file.broken is not None:
            raise trio.BrokenResourceError(
                f"an earlier write to {self.path} failed: {file.broken}"
            ) from file.broken
        file.append(data, sync=sync)
