"""Event delivery for one run: the ``on_event`` sink, then the channel.

Theory of operation: events are delivered one at a time, to the ``on_event`` sink, then
on the channel (``send``). A cancel that interrupts a delivery puts what is left of it —
and every later event of the same emit — on a ``redo`` list, delivered first next time
(update events excepted). An ``on_event`` call counts as made once it has been called,
even if cancelled part-way (the sink may already hold the event: redoing it would
deliver it twice); a cancelled ``send`` delivered nothing and is retried. The closing
events of a run go on the same list and are delivered by :meth:`EventDelivery.close`,
bounded by ``cleanup_timeout`` after an abort or an outer cancel.

An ``on_event`` that raises is carried out as :class:`SinkFailure` (a ``BaseException``,
so the stream code's ``except Exception`` cannot take it for a model failure); the runner
unwraps it. A channel whose consumer went away is dropped and ``consumer_gone`` called.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import trio

from .._core import AgentRunError
from .._core import events as ev

if TYPE_CHECKING:
    from .._core import AgentRunResult

__all__ = ["EventDelivery", "OnEvent", "SinkFailure"]

OnEvent = Callable[[ev.AgentEvent], Awaitable[None] | None]
_DROPPABLE = (ev.MessageUpdate, ev.ToolExecutionUpdate)


class SinkFailure(BaseException):
    """The event sink raised; carried as a BaseException so that the stream code's
    ``except Exception`` (a provider failing) cannot mistake it for a model error."""

    def __init__(self, original: Exception) -> None:
        super().__init__(original)
        self.original = original


class EventDelivery:
    """Where one run's events go, and what is still owed (see the module docstring)."""

    __slots__ = (
        "closing_scope",
        "consumer_gone",
        "listening",
        "on_event",
        "redo",
        "send",
        "send_dead",
        "sink_dead",
    )

    def __init__(
        self,
        on_event: OnEvent | None,
        send: trio.MemorySendChannel[ev.AgentEvent] | None,
        consumer_gone: Callable[[], None] | None,
    ) -> None:
        self.on_event = on_event
        self.send = send
        self.consumer_gone = consumer_gone
        # Whether events are built and delivered at all (see ``listen``).
        self.listening = on_event is not None or send is not None
        self.sink_dead = False  # on_event raised: it gets nothing more
        self.send_dead = False  # the consumer closed the channel
        # Events whose delivery was interrupted; True once on_event was called for it
        # (only the channel send is left).
        self.redo: list[tuple[ev.AgentEvent, bool]] = []
        # The scope of the closing delivery, while it runs (an abort bounds it).
        self.closing_scope: trio.CancelScope | None = None

    def listen(self, listening: bool) -> None:
        """Build and deliver events from now on, or stop."""
        self.listening = listening and (self.on_event is not None or self.send is not None)

    async def emit(self, *events: ev.AgentEvent) -> None:
        """Deliver events in order; what a cancel interrupts goes on the redo list.

        Several tasks may emit at once (the calls of a batch): how far a delivery got is
        kept in local variables, never on this object. Raises :class:`SinkFailure` when
        ``on_event`` raises; ``Cancelled`` when cancelled (what is left is owed).
        """
        if not self.listening:
            return
        items: Sequence[ev.AgentEvent] = events
        called: Sequence[bool] = ()  # per redo entry: its on_event call was made
        if self.redo:
            items = [e for e, _ in self.redo] + list(events)
            called = [c for _, c in self.redo]
            self.redo = []
        redone = len(called)
        on_event = None if self.sink_dead else self.on_event
        send = self.send
        i = 0
        try:
            for event in items:
                if on_event is not None and (i >= redone or not called[i]):
                    try:
                        result = on_event(event)
                        if result is not None:
                            await result
                    except Exception as exc:
                        raise SinkFailure(exc) from exc
                if send is not None and not self.send_dead and not self._hand(event):
                    await self._send(event)
                i += 1
        except BaseException:
            self._owe(items, called, i)
            raise

    def _hand(self, event: ev.AgentEvent) -> bool:
        """Hand ``event`` to the channel if it takes it at once (a consumer already
        waiting, or room in the buffer): no scheduling point per event. False when it
        has to wait (:meth:`_send`)."""
        assert self.send is not None
        try:
            self.send.send_nowait(event)
        except trio.WouldBlock:
            return False
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._gone()
        return True

    async def _send(self, event: ev.AgentEvent) -> None:
        """Wait until the channel takes ``event``."""
        assert self.send is not None
        try:
            await self.send.send(event)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._gone()

    def _gone(self) -> None:
        """The consumer closed the channel: it gets nothing more."""
        if not self.send_dead:
            self.send_dead = True
            if self.consumer_gone is not None:
                self.consumer_gone()

    def _owe(self, items: Sequence[ev.AgentEvent], called: Sequence[bool], i: int) -> None:
        """The delivery of ``items[i]`` was interrupted: keep what is left for later
        (``called``: which of the first items had their ``on_event`` call made).

        The interrupted event's ``on_event`` call was made (it counts as delivered), so
        it is kept only if its channel ``send`` is still owed; update events are not
        kept.
        """
        event = items[i]
        if self.send is not None and not self.send_dead and not isinstance(event, _DROPPABLE):
            self.redo.append((event, True))
        self.redo.extend(
            (e, j < len(called) and called[j])
            for j, e in enumerate(items[i + 1 :], i + 1)
            if not isinstance(e, _DROPPABLE)
        )

    def owe(self, events: Sequence[ev.AgentEvent]) -> None:
        """Queue ``events`` (the closing ones) for the next delivery, if anyone listens."""
        if self.listening:
            self.redo.extend((e, False) for e in events)

    async def flush(self) -> None:
        """Deliver what is owed (a checkpoint only if something is)."""
        if self.redo:
            await self.emit()

    async def close(
        self, result: AgentRunResult, *, bound: float, cancelled: bool, aborted: bool
    ) -> None:
        """Deliver the closing events.

        After an abort (``aborted``), within ``bound`` seconds; after an outer cancel
        (``cancelled``), within ``bound`` under a shield — a stuck consumer cannot keep
        the run from ending, and a consumer that takes events in time gets them all.
        Otherwise with no bound (the consumer's backpressure), unless a cancel or an
        abort arrives meanwhile (see ``closing_scope``), which bounds what is left the
        same way. Re-raises a cancel after the bounded delivery.

        Raises:
            AgentRunError: ``on_event`` raised while the run was closing (reported on its
                own: the run's own failure, if any, is what the caller hears about).
        """
        try:
            await self._close(result, bound=bound, cancelled=cancelled, aborted=aborted)
        finally:
            # Nothing is sent after this; the callback refers back to the run, and
            # dropping it lets the run be freed at once rather than by the garbage
            # collector.
            self.consumer_gone = None

    async def _close(
        self, result: AgentRunResult, *, bound: float, cancelled: bool, aborted: bool
    ) -> None:
        if not self.redo:
            return
        try:
            try:
                with trio.CancelScope(shield=cancelled) as scope:
                    self.closing_scope = scope
                    if cancelled or aborted:
                        scope.deadline = trio.current_time() + bound
                    await self.flush()
                self.closing_scope = None
            except trio.Cancelled:
                self.closing_scope = None
                with trio.move_on_after(bound, shield=True):
                    await self.flush()
                raise
        except SinkFailure as exc:
            self.sink_dead = True
            raise AgentRunError(
                f"the event sink failed: {type(exc.original).__name__}: {exc.original}",
                result,
            ) from exc.original
