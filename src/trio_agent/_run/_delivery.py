"""Event delivery: every event to every target, exactly once, in order.

Theory of operation
-------------------
One :class:`EventDelivery` hands events to its *targets*, each event to each target in
turn. A target is an ``on_event`` sink (:class:`Sink`) or a memory channel
(:class:`Channel`): a run's ``on_event`` then its ``open_agent_loop`` channel, or an
Agent's subscribers. The targets differ in one thing only, *when an event counts as
delivered*:

- a sink, once it was called: a call that a cancel interrupts part-way counts (the sink
  may already hold the event, calling it again could deliver it twice);
- a channel, once it took the event: a ``send`` that a cancel interrupts delivered
  nothing.

Whatever interrupts a delivery (a cancel, an abort, a sink raising), what is left of it
is *owed*: the interrupted event to the targets that have not got it, and every later
event of the same delivery to every target (:meth:`EventDelivery._owe_rest`, the one
exactly-once rule). An update event (``MessageUpdate``, ``ToolExecutionUpdate``) is
never owed: one that a cancel interrupts is dropped. What is owed goes first, before
anything emitted later; the run's closing events are owed too, and its clean-up
delivers them (:meth:`EventDelivery.close`, bounded by ``LoopConfig.cleanup_timeout``
after an abort or an outer cancel). Several tasks may emit at once (the calls of a
batch): how far a delivery got is kept in local variables, never on this object.

The usual case — nothing owed — hands each event to each target with no allocation: a
channel that takes an event at once (a reader already waiting, or room in the buffer)
costs no scheduling point; one that must wait is waited for (a slow reader slows the
run). A channel whose reader went away, and a sink that raised, get nothing more.

An Agent's delivery also *holds* two events (``hold=True``): ``TurnEnd`` goes out
together with the run's next event — the polls that follow a turn run first, so a
message queued while a subscriber holds ``TurnEnd`` waits for the next run instead of
racing the run's last poll — and ``AgentEnd`` goes out once the events before it were
handed over and ``finalize`` made the owner's state final. Its targets join and leave
(:meth:`EventDelivery.subscribe`); what a run's bounded clean-up could not hand over is
dropped at the run's end (:meth:`EventDelivery.drop_owed`), never sent to the next run's
subscribers.

An ``on_event`` that raises is carried out as :class:`SinkFailure` (a ``BaseException``,
so the stream code's ``except Exception`` cannot take it for a model failure); the run
unwraps it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, ClassVar, final

import trio

from .._core import AgentRunError
from .._core import events as ev

if TYPE_CHECKING:
    from types import TracebackType

    from .._core import AgentRunResult

__all__ = ["Channel", "EventDelivery", "OnEvent", "Sink", "SinkFailure", "Subscription"]

OnEvent = Callable[[ev.AgentEvent], Awaitable[None] | None]
_UPDATES = (ev.MessageUpdate, ev.ToolExecutionUpdate, ev.OutputUpdate)
"""Events a cancel may drop: never owed."""
_HELD = (ev.TurnEnd, ev.AgentEnd)
"""Events a holding delivery never hands over at once (see the module docstring)."""

_Owed = tuple[ev.AgentEvent, tuple["Target", ...]]
"""An event, and the targets it is still owed to."""


class SinkFailure(BaseException):
    """The event sink raised; carried as a BaseException so that the stream code's
    ``except Exception`` (a provider failing) cannot mistake it for a model error."""

    def __init__(self, original: Exception) -> None:
        super().__init__(original)
        self.original = original


class Target:
    """Where events go. ``offer(event)`` starts handing one over: None when that is
    done, else what to await until it is. ``gone``: the target gets nothing more (set
    by the time that awaitable returns)."""

    __slots__ = ("gone",)

    counts_when_called: ClassVar[bool]
    """An interrupted :attr:`offer` delivered the event (a sink's call was made)."""
    offer: Callable[[ev.AgentEvent], Awaitable[None] | None]

    def __init__(self) -> None:
        self.gone = False

    def leave(self) -> None:
        """Take nothing more."""
        self.gone = True


def _ignore(event: ev.AgentEvent) -> None:
    """A sink that is gone."""


@final
class Sink(Target):
    """An ``on_event`` callable: the event counts as delivered once it was called.

    Its ``offer`` *is* the callable (no call of ours in between), until it leaves.
    """

    __slots__ = ("offer",)
    counts_when_called = True

    def __init__(self, on_event: OnEvent) -> None:
        super().__init__()
        self.offer = on_event

    def leave(self) -> None:
        self.gone = True
        self.offer = _ignore


@final
class Channel(Target):
    """A memory channel: the event counts as delivered once the channel took it.

    Args:
        send: the channel.
        drop_updates: an update event the channel cannot take at once is dropped
            instead of waited for.
    """

    __slots__ = ("drop_updates", "full", "send", "unbuffered")
    counts_when_called = False

    def __init__(self, send: trio.MemorySendChannel[ev.AgentEvent], drop_updates: bool) -> None:
        super().__init__()
        self.send = send
        self.drop_updates = drop_updates
        self.unbuffered = send.statistics().max_buffer_size == 0
        # An unbuffered channel that has just taken an event at once (or dropped an
        # update, being full): its reader has not run since (the run has not yielded),
        # so the next event would not be taken at once either — it goes straight to
        # waiting in `send`, without a try that fails.
        self.full = False

    def offer(self, event: ev.AgentEvent) -> Awaitable[None] | None:
        if self.full:
            self.full = False
            if not (self.drop_updates and type(event) in _UPDATES):
                return self._wait(event)
        try:
            self.send.send_nowait(event)
        except trio.WouldBlock:
            if not (self.drop_updates and type(event) in _UPDATES):
                return self._wait(event)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return self._left()
        self.full = self.unbuffered
        return None

    async def _left(self) -> None:
        """The reader went away: nothing to wait for (the delivery drops this target)."""
        self.gone = True

    async def _wait(self, event: ev.AgentEvent) -> None:
        """Wait until the channel takes ``event`` (or its reader goes away)."""
        try:
            await self.send.send(event)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.gone = True


class EventDelivery:
    """Where events go, and what is still owed (see the module docstring).

    Args:
        on_event: a sink that gets every event first, or None.
        send: a channel that gets every event after the sink, or None.
        consumer_gone: called (synchronously) when a channel's reader goes away.
        hold: hold ``TurnEnd`` until the next event and ``AgentEnd`` until
            :attr:`finalize` ran (an Agent's delivery; its targets are added by
            :meth:`subscribe`).

    Attributes:
        listening: whether events are built and delivered at all: some target is still
            there.
        owed: the events still owed, oldest first, each with the targets it is owed to.
        finalize: called once, just before ``AgentEnd`` goes out (a holding delivery).
        closing_scope: the scope of the closing delivery, while it runs (an abort
            bounds it).
    """

    __slots__ = (
        "_hold",
        "_targets",
        "closing_scope",
        "consumer_gone",
        "finalize",
        "listening",
        "owed",
    )

    def __init__(
        self,
        on_event: OnEvent | None = None,
        send: trio.MemorySendChannel[ev.AgentEvent] | None = None,
        consumer_gone: Callable[[], None] | None = None,
        *,
        hold: bool = False,
    ) -> None:
        targets: list[Target] = [] if on_event is None else [Sink(on_event)]
        if send is not None:
            targets.append(Channel(send, drop_updates=False))
        # Replaced, never changed in place: a delivery under way keeps its own.
        self._targets: tuple[Target, ...] = tuple(targets)
        self._hold = hold
        self.listening = bool(targets)
        self.consumer_gone = consumer_gone
        self.owed: list[_Owed] = []
        self.finalize: Callable[[], None] | None = None
        self.closing_scope: trio.CancelScope | None = None

    # --- targets ----------------------------------------------------------------------

    def subscribe(
        self, buffer: int, drop_updates: bool, check_open: Callable[[], None]
    ) -> Subscription:
        """The async context manager of one channel target (see ``Agent.subscribe``);
        ``check_open`` raises when the owner takes no new subscriber."""
        return Subscription(self, buffer, drop_updates, check_open)

    def add(self, target: Target) -> None:
        """Deliver every later event to ``target`` too."""
        self._targets = (*self._targets, target)
        self.listening = True

    def remove(self, target: Target) -> None:
        """Deliver nothing more to ``target``; a channel is closed (a delivery waiting
        for it goes on, and its reader's iteration ends)."""
        target.leave()
        self._drop(target)

    def _drop(self, target: Target) -> None:
        """``target`` is gone: forget it (a channel's reader went away, or it left)."""
        if target not in self._targets:
            return
        self._targets = tuple(t for t in self._targets if t is not target)
        self.listening = bool(self._targets)
        if type(target) is Channel:
            target.send.close()
            if self.consumer_gone is not None:
                self.consumer_gone()

    def end(self) -> None:
        """Remove every target."""
        for target in self._targets:
            self.remove(target)

    # --- delivering -------------------------------------------------------------------

    async def emit(self, *events: ev.AgentEvent, to: tuple[Target, ...] | None = None) -> None:
        """Deliver ``events`` to every target, in order, after what is owed.

        A checkpoint only when a target makes the delivery wait (a full channel, a
        sink's awaitable) or something owed is delivered. What a cancel interrupts is
        owed (see the module docstring). Raises :class:`SinkFailure` when ``on_event``
        raises; ``Cancelled`` when cancelled.

        Args:
            events: the events, oldest first.
            to: hand ``events`` to these targets only, and now (what is owed being
                delivered); by default to every target, after what is owed.
        """
        if not self.listening:
            return  # no target is left: any that ``to`` names is gone too
        if to is None:
            if self.owed or (self._hold and events and type(events[-1]) in _HELD):
                await self._pay(events)
                return
            to = self._targets
        # The one delivery loop: each event to each target before the next event. The
        # usual case (nothing owed) runs it straight from the emit, with no allocation.
        i = 0  # the event under way
        target = to[0] if to else None  # the target under way
        try:
            for event in events:
                for target in to:
                    try:
                        waiting = target.offer(event)
                        if waiting is not None:
                            await waiting
                            if target.gone:
                                self._drop(target)
                    except Exception as exc:
                        self._fail(target)
                        raise SinkFailure(exc) from exc
                i += 1
        except BaseException:
            self._owe_rest(events, to, i, 0 if target is None else to.index(target))
            raise

    def _fail(self, target: Target) -> None:
        """Handing an event to ``target`` raised: it gets nothing more."""
        target.leave()
        self._drop(target)

    def _owe_rest(
        self, events: Sequence[ev.AgentEvent], targets: tuple[Target, ...], i: int, j: int
    ) -> None:
        """The delivery of ``events`` to ``targets`` was interrupted at event ``i``,
        target ``j``: owe what is left of it. The interrupted event stays owed to the
        targets after ``j``, and to ``j`` itself unless the event counts as delivered to
        it; every later event to every target. Update events are not owed."""
        owed = self.owed
        if i < len(events):
            event = events[i]
            if type(event) not in _UPDATES:
                if j < len(targets) and targets[j].counts_when_called:
                    j += 1
                if j < len(targets):
                    owed.append((event, targets[j:]))
            owed.extend((e, targets) for e in events[i + 1 :] if type(e) not in _UPDATES)

    async def _pay(self, events: Sequence[ev.AgentEvent]) -> None:
        """Deliver what is owed, then ``events``. A holding delivery keeps a last
        ``TurnEnd`` owed (it goes with the next event), and hands a last ``AgentEnd``
        over only after :attr:`finalize` ran."""
        items = self.owed
        self.owed = []
        if events:
            current = self._targets
            items.extend((e, current) for e in events)
        last: _Owed | None = None
        if self._hold and items and type(items[-1][0]) in _HELD:
            last = items.pop()
        k = 0
        try:
            while k < len(items):
                # A run of events owed to the same targets goes in one delivery.
                targets = items[k][1]
                m = k + 1
                while m < len(items) and items[m][1] is targets:
                    m += 1
                group = [e for e, _ in items[k:m]]
                k = m
                await self.emit(*group, to=targets)
        except BaseException:
            self.owed.extend(item for item in items[k:] if type(item[0]) not in _UPDATES)
            if last is not None:
                self.owed.append(last)
            raise
        if last is None:
            return
        event, targets = last
        if type(event) is ev.TurnEnd:
            self.owed.append(last)  # held until the next event
            return
        finalize = self.finalize
        if finalize is not None:
            self.finalize = None
            finalize()
        await self.emit(event, to=targets)

    def owe(self, events: Sequence[ev.AgentEvent]) -> None:
        """Owe ``events`` (the closing ones) to every target, if anyone listens."""
        if self.listening:
            targets = self._targets
            self.owed.extend((e, targets) for e in events)

    def drop_owed(self) -> None:
        """Forget what is still owed (a run's bounded clean-up ran out of time) and the
        run's :attr:`finalize`: nothing of it goes to the next run's targets."""
        self.owed = []
        self.finalize = None

    async def flush(self) -> None:
        """Deliver what is owed (a checkpoint only if something is)."""
        if self.owed and self.listening:
            await self._pay(())

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
        if not self.owed:
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
            raise AgentRunError(
                f"the event sink failed: {type(exc.original).__name__}: {exc.original}",
                result,
            ) from exc.original


@final
class Subscription:
    """The async context manager of one channel target of an :class:`EventDelivery`:
    entering opens a channel of ``buffer`` events and adds it; leaving removes it."""

    __slots__ = ("_buffer", "_check_open", "_delivery", "_drop_updates", "_target")

    def __init__(
        self,
        delivery: EventDelivery,
        buffer: int,
        drop_updates: bool,
        check_open: Callable[[], None],
    ) -> None:
        self._delivery = delivery
        self._buffer = buffer
        self._drop_updates = drop_updates
        self._check_open = check_open
        self._target: Channel | None = None

    async def __aenter__(self) -> trio.MemoryReceiveChannel[ev.AgentEvent]:
        await trio.lowlevel.checkpoint()
        self._check_open()
        send, receive = trio.open_memory_channel[ev.AgentEvent](self._buffer)
        self._target = Channel(send, self._drop_updates)
        self._delivery.add(self._target)
        return receive

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._target is not None
        # Closing our sending side wakes a delivery waiting for us (it drops us and goes
        # on) and ends the iteration of any task reading the channel.
        self._delivery.remove(self._target)
