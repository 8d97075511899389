"""``ReplayModel``: a cassette played back as a model, with faults injected on demand.

Theory of operation: each request's record is played by the one in-memory stream
(``_run._streams.MemoryStream``) over the record's events up to its *cut* — the fault's
event, else the recorded end — and then, in place of what follows, the fault or the
recorded ending. With ``timing="none"`` events come as the in-memory stream sends them
(a full checkpoint before the first, a cancellation check before each later one); with
``"clock"`` each waits for its recorded offset instead. Past the last record the stream
is one ``Error`` saying so.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal, TypeAlias

import attrs
import trio

from .._core import _events as ev
from .._core._blocks import END_EVENTS
from .._core._errors import TrioAgentError
from .._core._messages import AssistantMessage
from .._core._util import one_of
from .._run._stream import StreamAccumulator
from .._run._streams import MemoryStream
from ._cassette import Cassette, CassetteRecord, load_cassette, request_differences, request_digest

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Iterable
    from typing import Self

    from .._core._model import ModelRequest
    from .._run._streams import EventHolds

__all__ = [
    "CassetteMismatch",
    "Fault",
    "FaultKind",
    "InjectedFault",
    "RecordedError",
    "ReplayModel",
]

Match: TypeAlias = Literal["strict", "sequence"]
Timing: TypeAlias = Literal["clock", "none"]
FaultKind: TypeAlias = Literal["raise", "error", "stall", "cut"]
"""What a :class:`Fault` does in place of its event:

- ``raise``: the stream raises :class:`InjectedFault` (a provider that crashes);
- ``error``: the stream sends an ``Error`` event, keeping the content streamed so far
  (a provider that reports a failure), then ends;
- ``stall``: the stream sends nothing more and never ends — only the consumer's cancel
  (``LoopConfig.stream_idle_timeout``, an abort, a deadline) ends it;
- ``cut``: the stream ends there, without ``Done`` or ``Error`` (a dropped connection).
"""


class CassetteMismatch(TrioAgentError):
    """In strict mode, a request differs from the recorded one.

    The message names the request (1-based) and each differing field, like
    ``request 2 differs from the cassette: messages[3].content[0].text: recorded 'x',
    got 'y'``.

    Attributes:
        request_index: the 0-based index of the request.
        differences: one line per differing field (at most five).
    """

    def __init__(self, request_index: int, differences: Iterable[str]) -> None:
        self.request_index = request_index
        self.differences = tuple(differences)
        super().__init__(
            f"request {request_index + 1} differs from the cassette: " + "; ".join(self.differences)
        )


class InjectedFault(Exception):
    """The exception a ``raise`` :class:`Fault` makes the replayed stream raise."""


class RecordedError(Exception):
    """Base of the exceptions a replay raises where the recorded model raised.

    Each is a subclass named after the recorded exception's class, with its message, so
    the loop reports it in the same words (``the model stream failed: ReadError: …``).
    """


_recorded_classes: dict[str, type[RecordedError]] = {}


def _recorded_error(name: str | None, message: str | None) -> RecordedError:
    name = re.sub(r"\W", "_", name or "") or "RecordedError"
    if name[0].isdigit():
        name = "_" + name
    cls = _recorded_classes.get(name)
    if cls is None:
        cls = type(name, (RecordedError,), {"__module__": __name__})
        _recorded_classes[name] = cls
    return cls(message or "")


@attrs.frozen(kw_only=True)
class Fault:
    """Break request ``request``'s stream at its event ``event`` (both 0-based).

    Events ``0 .. event-1`` are replayed as recorded; event ``event`` is replaced by the
    fault (see :data:`FaultKind`). An ``event`` past the recorded events applies where
    the recorded stream ended. A negative index or an unknown kind is a ``ValueError``.

    Attributes:
        request: the 0-based index of the request whose stream breaks.
        event: the 0-based index of the event the fault replaces.
        kind: what happens there (see ``FaultKind``).
    """

    request: int = attrs.field(validator=attrs.validators.ge(0))
    event: int = attrs.field(validator=attrs.validators.ge(0))
    kind: FaultKind = attrs.field(validator=one_of("raise", "error", "stall", "cut"))

    def describe(self) -> str:
        """The fault in words: ``"raise at event 3 of request 1"``."""
        return f"{self.kind} at event {self.event} of request {self.request}"


class ReplayModel:
    """Replays a cassette as a model: request *i* gets the *i*-th recorded stream.

    Args:
        cassette: a :class:`Cassette` or the path of a cassette file (read at once —
            blocking file I/O; raises :class:`CassetteFormatError`).
        match: ``"strict"`` (default): each request must match the recorded one
            (:func:`request_digest`: message timestamps and tool-result ``details`` do
            not count); one that differs makes its stream raise
            :class:`CassetteMismatch` on entry, naming each differing field — the loop
            turns that into an ``error`` reply. ``"sequence"``: streams are replayed in
            order whatever was asked.
        timing: ``"clock"`` (default): each event is sent at its recorded offset from
            the moment the stream was opened, on trio's clock (under
            ``trio.testing.MockClock(autojump_threshold=0)`` a replay takes no real
            time); ``"none"``: as fast as possible (one checkpoint per stream, then a
            cancel check per event, like ``ScriptedModel``).
        faults: :class:`Fault` s to inject (at most one per request).
        on_cancel_point: called with the request index when a stream that was
            cancelled or left while recording reaches the point where that happened.
            If it returns a reason (a string), the stream ends there as the loop's
            ``abort(reason)`` would have ended it: an ``Error`` event with the partial
            reply, stop reason ``aborted``; if it returns ``None``, the stream waits.

    How a record ends on replay: ``done``/``error`` — after its terminal event the
    stream ends; ``ended`` — it ends without one; ``raised`` — it raises a
    :class:`RecordedError` subclass with the recorded class name and message;
    ``cancelled``/``left`` — it waits, never ending on its own, as the original did
    until its consumer left; the same abort, deadline or idle timeout ends it again
    (or ``on_cancel_point`` ends it as an abort).
    Past the last record, a stream is a single ``Error`` event saying so.

    Iterating is a checkpoint per event; leaving the ``async with`` at any time is safe.
    No task is started.

    Attributes:
        cassette: the records replayed.
        match: ``"strict"`` or ``"sequence"``, as given.
        timing: ``"clock"`` or ``"none"``, as given.
        on_cancel_point: the callable given, or None.
        requests: every request received, in order.
        mismatches: every :class:`CassetteMismatch` raised, in order.
        open_streams: streams entered and not yet left.
    """

    def __init__(
        self,
        cassette: Cassette | str | os.PathLike[str],
        *,
        match: Match = "strict",
        timing: Timing = "clock",
        faults: Iterable[Fault] = (),
        on_cancel_point: Callable[[int], str | None] | None = None,
    ) -> None:
        if match not in ("strict", "sequence"):
            raise ValueError(f"match must be 'strict' or 'sequence', not {match!r}")
        if timing not in ("clock", "none"):
            raise ValueError(f"timing must be 'clock' or 'none', not {timing!r}")
        self.cassette = cassette if isinstance(cassette, Cassette) else load_cassette(cassette)
        self.match = match
        self.timing = timing
        self.on_cancel_point = on_cancel_point
        self._faults: dict[int, Fault] = {}
        for fault in faults:
            self.inject(fault)
        self.requests: list[ModelRequest] = []
        self.mismatches: list[CassetteMismatch] = []
        self.open_streams = 0
        self._event_holds: EventHolds | None = None  # faults are played by the stream

    def inject(self, fault: Fault) -> None:
        """Add a fault (replacing any other fault on the same request)."""
        self._faults[fault.request] = fault

    def stream(self, request: ModelRequest) -> _ReplayStream:
        """The next recorded stream, as the answer to ``request`` (the ``Model`` protocol).

        Raises:
            CassetteMismatch: on entry, with ``match="strict"``, when ``request`` differs
                from the recorded one.
        """
        step = len(self.requests)
        self.requests.append(request)
        records = self.cassette.records
        record = records[step] if step < len(records) else None
        mismatch = None
        if record is not None and self.match == "strict":
            if request_digest(request) != record.digest:
                differences = request_differences(record.request, request)
                if differences:
                    mismatch = CassetteMismatch(step, differences)
                    self.mismatches.append(mismatch)
        return _ReplayStream(self, step, record, mismatch, self._faults.get(step))


def _out_of_records(step: int, count: int) -> ev.Error:
    return ev.Error(
        message=AssistantMessage(
            content=(),
            stop_reason="error",
            error_message=(
                f"ReplayModel has no record left for request {step + 1} (the cassette has {count})"
            ),
        )
    )


def _final_message(record: CassetteRecord) -> AssistantMessage | None:
    """The message of the record's last event (the first ``Done`` or ``Error``), if any."""
    for item in record.events:
        if type(item.event) in END_EVENTS:
            return item.event.message  # type: ignore[union-attr]
    return None


def _partial(record: CassetteRecord, count: int) -> StreamAccumulator:
    """An accumulator fed the record's first ``count`` events (a terminal one ignored)."""
    final = _final_message(record)
    acc = StreamAccumulator(
        model=final.model if final else "", provider=final.provider if final else ""
    )
    for item in record.events[:count]:
        acc.feed(item.event)
    acc.final = None
    return acc


class _ReplayStream(MemoryStream[ev.AssistantEvent]):
    """One recorded stream played back: its events up to the ``cut`` — the fault's
    event, else the recorded end — then the fault or the recorded ending.

    With ``timing="none"`` the events are played as the in-memory stream plays them;
    with ``"clock"`` each one waits for its recorded offset instead.
    """

    __slots__ = ("_cut", "_fault", "_finished", "_mismatch", "_model", "_record", "_t0")

    def __init__(
        self,
        model: ReplayModel,
        step: int,
        record: CassetteRecord | None,
        mismatch: CassetteMismatch | None,
        fault: Fault | None,
    ) -> None:
        events: list[ev.AssistantEvent]
        if record is None:
            # Past the last record: one Error saying so, whatever fault was asked for.
            events = [_out_of_records(step, len(model.cassette.records))]
            cut = 1
            fault = None
        else:
            cut = len(record.events) if fault is None else min(fault.event, len(record.events))
            events = [item.event for item in record.events[:cut]]
        super().__init__(events, model, step)
        self._model = model
        self._record = record
        self._mismatch = mismatch
        self._fault = fault
        self._cut = cut
        self._t0 = 0.0
        self._finished = False

    async def __aenter__(self) -> Self:
        await trio.lowlevel.checkpoint()
        if self._mismatch is not None:
            raise self._mismatch
        self._t0 = trio.current_time()
        return await super().__aenter__()

    def _offset(self, i: int) -> float:
        """When event ``i`` (the cut's ending for ``i == cut``) was sent."""
        record = self._record
        if record is None:
            return 0.0
        return record.events[i].at if i < len(record.events) else record.end.at

    async def __anext__(self) -> ev.AssistantEvent:
        if self._finished:
            raise StopAsyncIteration
        i = self._i
        record = self._record
        if i == self._cut and self._fault is None:
            # A recorded Done/Error (or no record at all): the stream ends right after
            # its last event, as the recorded one did.
            if record is None or record.end.kind in ("done", "error"):
                self._finished = True
                raise StopAsyncIteration
        if self._model.timing == "clock":
            await trio.sleep_until(self._t0 + self._offset(i))
            if i < self._cut:
                self._i = i + 1
                return self._events[i]
        else:
            try:
                return await super().__anext__()
            except StopAsyncIteration:
                pass  # the cut, reached after the same checkpoint an event gets
        assert record is not None
        fault = self._fault
        if fault is not None:
            if fault.kind == "stall":
                # Nothing more, ever: only the consumer's cancel ends this stream.
                await trio.sleep_forever()
            return self._inject(fault, record)
        end = record.end
        self._finished = True
        if end.kind == "raised":
            raise _recorded_error(end.error_type, end.error_message)
        if end.kind == "ended":
            raise StopAsyncIteration
        # cancelled / left: the original consumer went away here; so must this one.
        reason = None
        if self._model.on_cancel_point is not None:
            reason = self._model.on_cancel_point(self._step)
        if reason is not None:
            # End as the loop's abort would have: the partial reply, stop reason
            # ``aborted``, unfinished calls dropped and named.
            return ev.Error(message=_partial(record, self._i).fail(reason, "aborted"))
        await trio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    def _inject(self, fault: Fault, record: CassetteRecord) -> ev.AssistantEvent:
        self._finished = True
        where = f"injected fault: {fault.describe()}"
        if fault.kind == "raise":
            raise InjectedFault(where)
        if fault.kind == "cut":
            raise StopAsyncIteration
        if fault.kind == "error":
            return ev.Error(message=_partial(record, self._i).fail(where))
        raise AssertionError(f"unexpected fault kind {fault.kind!r}")  # pragma: no cover
