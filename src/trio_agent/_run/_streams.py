"""Model streams made in memory, and model streams wrapped: one of each, for every user.

Theory of operation: a model's stream is an async context manager whose value is an
async iterable of assistant events. Two shapes recur around the loop, each written here
once:

- :class:`StreamWrapper` — a stream around another model's stream, forwarding enter,
  each event and exit unchanged, with a hook at each: the observer's request
  observation, replay's recorder and the demo's pacing are such wrappers. The wrapper
  says once what the stream's last event is (the first ``Done`` or ``Error``, see
  ``END_EVENTS``) and calls the end hook exactly once, whatever ended the stream.
- :class:`MemoryStream` — a list of events played as a stream, as cheap as a stream can
  be: the first event is a full checkpoint (it yields, like a first network read), each
  later one only checks for cancellation, and no task is started. The test kit's
  ``ScriptedModel``, replay's ``ReplayModel`` and the benchmarks' floor play their events
  through it; the model that made it counts its open streams (``open_streams``) and may
  hold any of its events (a pause, an injected failure).

Neither starts a task or shields anything: leaving the ``async with`` runs the wrapped
stream's own exit, exactly as it would run unwrapped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Generic, Protocol, TypeAlias, TypeVar

from trio.lowlevel import checkpoint, checkpoint_if_cancelled

from .._core._blocks import END_EVENTS

if TYPE_CHECKING:
    from collections.abc import AsyncIterable, AsyncIterator, Sequence
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType
    from typing import Self

    from .._core import _events as ev

__all__ = ["EventHolds", "MemoryStream", "StreamOwner", "StreamWrapper"]

_T = TypeVar("_T")

EventHolds: TypeAlias = dict[tuple[int, int], Callable[[], Awaitable[None]]]
"""What to await before an event of a stream, by (request, event) — both 0-based."""


class StreamOwner(Protocol):
    """The model a :class:`MemoryStream` belongs to."""

    open_streams: int
    """Its streams entered and not yet left."""

    _event_holds: EventHolds | None
    """What its streams await before given events (read at each event, so a hold added
    while a stream plays still applies); None: nothing."""


class MemoryStream(Generic[_T]):
    """``events`` played as a model's stream: an async context manager that is its own
    async iterator. No task is started.

    Iterating: before event ``i`` the stream awaits its owner's hold for ``(step, i)``,
    if there is one, then checkpoints — a full checkpoint
    before the first event (it yields, like a first network read), only a check for
    cancellation before each later one — then sends the event; past the last event it
    checkpoints the same way and ends. An in-memory stream must stay far cheaper than
    the loop it drives, or benchmarks measure the fake.

    Entering and leaving are not checkpoints; they count the stream in its owner's
    ``open_streams``. Leaving early is safe at any time.

    Args:
        events: the events, sent as they are (the sequence is not copied; its length
            is read once, when the stream is made).
        owner: the model that made the stream, or None (nothing counted or held).
        step: the request this stream answers (0-based), for the owner's holds.
    """

    __slots__ = ("_events", "_i", "_n", "_owner", "_step")

    def __init__(
        self, events: Sequence[_T], owner: StreamOwner | None = None, step: int = 0
    ) -> None:
        self._events = events
        self._n = len(events)
        self._owner = owner
        self._step = step
        self._i = 0

    async def __aenter__(self) -> Self:
        if self._owner is not None:
            self._owner.open_streams += 1
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._owner is not None:
            self._owner.open_streams -= 1

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> _T:
        # Written for the fewest bytecodes: the benchmarks' floor reads its replies
        # through this method, and the test kit's model plays every scripted reply.
        i = self._i
        if self._owner is not None and self._owner._event_holds is not None:
            hold = self._owner._event_holds.get((self._step, i))
            if hold is not None:
                await hold()
        if i:
            await checkpoint_if_cancelled()
        else:
            await checkpoint()
        if i < self._n:
            self._i = i + 1
            return self._events[i]
        raise StopAsyncIteration


class StreamWrapper:
    """A model's stream around another one: enter, each event and exit are forwarded
    unchanged, with a hook at each (all synchronous; each does nothing here).

    Hooks, for subclasses:

    - :meth:`_open` — first thing in ``__aenter__``: returns the stream to wrap.
    - :meth:`_event` — each event, before it is handed on.
    - :meth:`_last` — after :meth:`_event`, for the stream's last event (the first
      ``Done`` or ``Error``; later ones are handed on without it). ``last`` holds it.
    - :meth:`_raised` — each exception seen: the wrapped stream's enter, iteration
      (``StopAsyncIteration`` when it ran out) or exit raised it, or the body of the
      ``async with`` left with it.
    - :meth:`_end` — exactly once: when entering the wrapped stream failed, else after
      its exit; with what propagates out of the stream (None: nothing).

    What a hook raises propagates from the call that ran it.

    Attributes:
        inner: the wrapped stream (what :meth:`_open` returned, once entered).
        last: the stream's last event, once it arrived.
    """

    __slots__ = ("_events", "inner", "last")

    def __init__(
        self, inner: AbstractAsyncContextManager[AsyncIterable[ev.AssistantEvent]] | None = None
    ) -> None:
        self.inner = inner
        self.last: ev.Done | ev.Error | None = None
        self._events: AsyncIterator[ev.AssistantEvent] | None = None

    def _open(self) -> AbstractAsyncContextManager[AsyncIterable[ev.AssistantEvent]]:
        assert self.inner is not None
        return self.inner

    def _event(self, event: ev.AssistantEvent) -> None:
        pass

    def _last(self, event: ev.Done | ev.Error) -> None:
        pass

    def _raised(self, exc: BaseException) -> None:
        pass

    def _end(self, error: BaseException | None) -> None:
        pass

    async def __aenter__(self) -> Self:
        inner = self._open()
        self.inner = inner
        try:
            events = await inner.__aenter__()
        except BaseException as exc:
            self._raised(exc)
            self._end(exc)
            raise
        self._events = aiter(events)
        return self

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> ev.AssistantEvent:
        assert self._events is not None
        try:
            event = await anext(self._events)
        except BaseException as exc:
            self._raised(exc)
            raise
        self._event(event)
        if self.last is None and type(event) in END_EVENTS:
            self.last = event  # type: ignore[assignment]
            self._last(event)  # type: ignore[arg-type]
        return event

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        if exc is not None:
            self._raised(exc)
        error = exc
        try:
            assert self.inner is not None
            # A wrapper: the wrapped stream's own exit runs exactly as it would
            # unwrapped (it bounds and shields its clean-up as it sees fit).
            return await self.inner.__aexit__(exc_type, exc, tb)  # noqa: ASYNC102
        except BaseException as raised:
            self._raised(raised)
            error = raised
            raise
        finally:
            self._end(error)
