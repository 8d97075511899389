"""``RecordingModel``: wrap any model and write what it was asked and answered.

Theory of operation: each stream is the model's own, wrapped in the one stream wrapper
(``_run._streams.StreamWrapper``): every event is handed on unchanged and logged with
its offset, and the stream's record is written exactly once — at the stream's last event
(the wrapper's definition: the first ``Done`` or ``Error``), before that event is handed
on, else when the wrapper ends, whatever ended it. How the stream ended is the first
sign seen: that last event (``done``/``error``), the stream running out (``ended``), an
exception (``raised``), a cancellation (``cancelled``), else the consumer leaving
(``left``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from .._core import _events as ev
from .._run._streams import StreamWrapper
from ._cassette import (
    CassetteRecord,
    EndKind,
    RecordedEvent,
    StreamEnd,
    request_digest,
    write_records,
)

if TYPE_CHECKING:
    import os
    from collections.abc import AsyncIterable, Callable
    from contextlib import AbstractAsyncContextManager
    from typing import Self

    from .._core._model import Model, ModelRequest

__all__ = ["RecordingModel"]


class RecordingModel:
    """A model that passes every request to ``model`` and records it in a cassette.

    Each stream is passed through untouched (same events, same timing, same
    exceptions); when it ends, one record is written to the JSONL cassette at ``path``:
    the request and its digest, every event with its offset (trio clock) from the
    moment the stream was opened, and how it ended (see :data:`EndKind`). The file is
    created, or emptied, with its header line when the first stream is opened; records
    follow in the order the streams end, each carrying the index of its request.
    Replay it with :class:`ReplayModel`.

    Entering a stream is a checkpoint. A cassette that cannot be written makes the
    stream raise ``OSError`` on entry (the loop reports it as the model's error, and the
    run ends with reason ``error``). A record that cannot be written (a full disk) is cut
    back off the file, so the cassette keeps whole records only, and raises
    ``OSError``: for a reply that ends with ``Done`` or ``Error`` it is written when
    that event arrives, before it is handed on, so the reply itself fails (the run ends
    with ``error``, never with a ``stop`` whose record is missing); for any other ending
    it raises from the stream's exit. Every later stream then raises on entry, so no
    gap in the cassette goes unnoticed.

    Each write is one short synchronous append (no fsync): at the reply's ``Done`` or
    ``Error``, else in ``__aexit__``, so a record is written whatever ended the stream,
    a cancellation included (events a malformed stream sends after its ``Done`` or
    ``Error`` are not recorded: no consumer reads them). A process killed in the middle
    of a write leaves a torn last line, which :func:`load_cassette` leaves out and
    reports. Secrets in ``options.extra`` are redacted (see the cassette format); the
    request holds no API key.

    Args:
        model: the model to record (a provider, or any :class:`~trio_agent.Model`).
        path: the cassette file.

    Attributes:
        model: the model being recorded.
        path: the cassette file.
        records: the records written so far, in the order they were written.
    """

    def __init__(self, model: Model, path: str | os.PathLike[str]) -> None:
        self.model = model
        self.path = Path(path)
        self.records: list[CassetteRecord] = []
        self._next = 0
        self._started = False
        self._broken: Exception | None = None

    def stream(self, request: ModelRequest) -> _RecordingStream:
        """Stream ``model``'s reply to ``request`` unchanged, recording it (the ``Model``
        protocol); the record is written when the stream is left.

        Raises:
            OSError: on entry, when the cassette cannot be written.
        """
        index = self._next
        self._next += 1
        return _RecordingStream(self, index, request)

    def _check(self) -> None:
        """Start the cassette on the first stream; refuse every stream once a write failed.

        A record that could not be written failed its own stream; every later request
        fails too, so the cassette has no silent gap.
        """
        if self._broken is not None:
            raise OSError(f"the cassette {self.path} cannot be written: {self._broken}")
        if not self._started:
            self._write(None)

    def _write(self, build: Callable[[], CassetteRecord] | None) -> None:
        """Write the header (first time) and the record ``build()`` makes (if any)."""
        try:
            records = () if build is None else (build(),)
            write_records(self.path, records, truncate=not self._started)
        except Exception as exc:  # a full disk, or a request that is not JSON data
            self._broken = exc
            raise
        self._started = True
        self.records.extend(records)


class _RecordingStream(StreamWrapper):
    """One stream of the recorded model, passed through; its record is written once:
    at its last event (``Done``/``Error``), else when it closes."""

    __slots__ = ("_ending", "_error", "_index", "_log", "_owner", "_recorded", "_request", "_t0")

    def __init__(self, owner: RecordingModel, index: int, request: ModelRequest) -> None:
        super().__init__()
        self._owner = owner
        self._index = index
        self._request = request
        self._log: list[RecordedEvent] = []
        self._t0 = 0.0
        self._ending: EndKind | None = None  # how the stream ended (the first sign wins)
        self._recorded = False
        self._error: BaseException | None = None

    async def __aenter__(self) -> Self:
        await trio.lowlevel.checkpoint()
        return await super().__aenter__()

    def _open(self) -> AbstractAsyncContextManager[AsyncIterable[ev.AssistantEvent]]:
        self._owner._check()
        self._t0 = trio.current_time()
        return self._owner.model.stream(self._request)

    def _raised(self, exc: BaseException) -> None:
        if self._ending is not None:
            return
        if isinstance(exc, StopAsyncIteration):
            self._ending = "ended"
        elif isinstance(exc, Exception):
            self._ending, self._error = "raised", exc
        else:
            # Cancelled (abort, deadline, idle timeout), KeyboardInterrupt…
            self._ending = "cancelled"

    def _event(self, event: ev.AssistantEvent) -> None:
        self._log.append(RecordedEvent(at=trio.current_time() - self._t0, event=event))

    def _last(self, event: ev.Done | ev.Error) -> None:
        if self._ending is None:
            self._ending = "done" if type(event) is ev.Done else "error"
            # Written before the consumer sees the reply's end: a record that cannot be
            # written fails the reply (the loop ends the run with an error) instead of
            # an error from the exit that a consumer holding a finished reply ignores.
            self._record()

    def _end(self, error: BaseException | None) -> None:
        self._record()

    def _record(self) -> None:
        if self._recorded:
            return
        self._recorded = True
        now = trio.current_time() - self._t0
        kind: EndKind = self._ending or "left"
        error: dict[str, Any] = {}
        if kind == "raised" and self._error is not None:
            error = {"error_type": type(self._error).__name__, "error_message": str(self._error)}
        self._owner._write(
            lambda: CassetteRecord(
                index=self._index,
                digest=request_digest(self._request),
                request=self._request,
                events=tuple(self._log),
                end=StreamEnd(kind=kind, at=now, **error),
            )
        )
