"""The Agent's subscribers: every event to every subscriber, in order, none lost.

A run builds and delivers events only while someone subscribes; its ``on_event``
(:meth:`Fanout.on_event`) hands each one to every subscriber in turn (awaited, so a slow
subscriber slows the run down instead of losing events). ``TurnEnd`` goes to the
subscribers together with the run's next event (the next ``TurnStart``, or
``AgentEnd``): the polls that follow a turn run first, so a message queued while a
subscriber holds ``TurnEnd`` waits for the next run instead of racing the run's last
poll. A hand-over that a cancel interrupts stays *owed* to the subscribers that have not
taken it yet and goes first in the run's clean-up (bounded by
``LoopConfig.cleanup_timeout``); what that bound cuts off is dropped
(:meth:`Fanout.drop_owed`). An update event (``MessageUpdate``,
``ToolExecutionUpdate``) that a cancel interrupts is dropped, never owed.

A subscriber that leaves (its channel closed) is dropped, and the run goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

import attrs
import trio

from .._core import events as ev

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from types import TracebackType

__all__ = ["Fanout", "Subscriber", "Subscription"]

_UPDATES = (ev.MessageUpdate, ev.ToolExecutionUpdate)
_HELD = (ev.TurnEnd, ev.AgentEnd)
"""Events never handed over at once: ``TurnEnd`` waits for the next event, ``AgentEnd``
for the owner's state to be final."""


@attrs.define(eq=False)
class Subscriber:
    send: trio.MemorySendChannel[ev.AgentEvent]
    drop_updates: bool
    # An unbuffered channel that has just taken an event at once (or dropped an update,
    # being full): its reader has not run since (the run has not yielded), so the next
    # event would not be taken at once either — it goes straight to waiting in `send`,
    # without a try that fails.
    full: bool = False
    unbuffered: bool = True


@final
class Fanout:
    """The subscribers and the events still owed to them.

    Args:
        on_change: called (synchronously) whenever a subscriber leaves or joins.
        check_open: called when a subscription starts; raises if the owner is closed.
    """

    def __init__(self, *, on_change: Callable[[], None], check_open: Callable[[], None]) -> None:
        self.subscribers: list[Subscriber] = []
        self.owed: list[tuple[ev.AgentEvent, tuple[Subscriber, ...]]] = []
        self._on_change = on_change
        self._check_open = check_open

    def subscribe(self, buffer: int, drop_updates: bool) -> Subscription:
        """The async context manager of one subscription (see ``Agent.subscribe``)."""
        return Subscription(self, buffer, drop_updates)

    def on_event(
        self, finalize: Callable[[], None], event: ev.AgentEvent
    ) -> Awaitable[None] | None:
        """A run's ``on_event``; the run calls it only while someone subscribes.

        ``finalize`` is called just before ``AgentEnd`` goes out, after the events before
        it were handed over (so the owner's state is final when a subscriber sees
        ``AgentEnd``); with no subscriber, at once. Returns what the run awaits, or None
        when nothing is to be handed over now (``TurnEnd`` waits for the next event).
        """
        kind = type(event)
        subs = self.subscribers
        if not self.owed:
            if len(subs) == 1 and kind not in _HELD:
                # The usual case, kept short: one subscriber, nothing owed.
                sub = subs[0]
                if sub.full:
                    sub.full = False
                    if not (sub.drop_updates and kind in _UPDATES):
                        return self._send(sub, event)
                if self._hand_now(sub, event):
                    sub.full = sub.unbuffered
                    return None
                return self._send(sub, event)  # wait, without trying again first
            if not subs:
                if kind is ev.AgentEnd:
                    finalize()
                return None
            if kind not in _HELD:
                return self._publish_one(event, tuple(subs))
        self.owed.append((event, tuple(subs)))
        if kind is ev.TurnEnd:
            return None
        return self.publish(finalize)

    async def _send(self, sub: Subscriber, event: ev.AgentEvent) -> None:
        """Wait until ``sub`` takes ``event`` (its channel was found full); a cancel
        leaves it owed (an update is dropped), a subscriber that left is dropped."""
        try:
            await sub.send.send(event)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.unsubscribe(sub)
        except trio.Cancelled:
            if not isinstance(event, _UPDATES):
                self.owed.append((event, (sub,)))
            raise

    def _hand_now(self, sub: Subscriber, event: ev.AgentEvent) -> bool:
        """Hand ``event`` to ``sub`` if its channel takes it at once (a reader already
        waiting, or room in the buffer); True when ``sub`` is done with it — taken, an
        update dropped for a ``drop_updates`` subscriber, or the subscriber gone."""
        try:
            sub.send.send_nowait(event)
        except trio.WouldBlock:
            return sub.drop_updates and isinstance(event, _UPDATES)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.unsubscribe(sub)
        return True

    async def _give(self, sub: Subscriber, event: ev.AgentEvent) -> None:
        """Hand ``event`` to ``sub``, waiting until it is taken (see :meth:`_hand_now`).
        A subscriber that leaves while we wait is unsubscribed: the run goes on.
        ``Cancelled`` propagates, with nothing handed over.

        An event the channel takes at once is handed over without a scheduling point:
        the run's own checkpoints are enough, and a run with a fast subscriber does not
        pay a trip through the scheduler per event. Otherwise this waits in ``send``.
        """
        if self._hand_now(sub, event):
            return
        try:
            await sub.send.send(event)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.unsubscribe(sub)

    async def _publish_one(self, event: ev.AgentEvent, subs: tuple[Subscriber, ...]) -> None:
        """Hand ``event`` to ``subs`` (nothing else owed); a cancel leaves it owed."""
        for i, sub in enumerate(subs):
            try:
                await self._give(sub, event)
            except trio.Cancelled:
                if not isinstance(event, _UPDATES):
                    self.owed.append((event, subs[i:]))
                raise

    async def publish(self, finalize: Callable[[], None]) -> None:
        """Hand every owed event to the subscribers it is owed to, oldest first.

        The run counts an event as delivered once ``on_event`` was called for it, even
        if cancelled part-way; so the owed list is kept here: an entry stays owed to
        the subscribers that have not taken it yet (a cancelled ``send`` delivered
        nothing), and the next call — the run's clean-up delivering its closing events
        — hands it over first. An update event that a cancel interrupts is dropped.
        ``finalize`` is called when ``AgentEnd`` comes up, before it is handed over.
        """
        owed = self.owed
        while owed:
            event, subs = owed[0]
            if type(event) is ev.AgentEnd:
                finalize()
            while subs:
                sub = subs[0]
                try:
                    await self._give(sub, event)
                except trio.Cancelled:
                    if isinstance(event, _UPDATES):
                        owed.pop(0)
                    else:
                        owed[0] = (event, subs)
                    raise
                subs = subs[1:]
            owed.pop(0)

    def drop_owed(self) -> None:
        """Forget what is still owed (a run's bounded clean-up ran out of time): it never
        goes to the next run's subscribers."""
        self.owed.clear()

    def unsubscribe(self, sub: Subscriber) -> None:
        """Drop ``sub`` and close its channel (a run waiting for it goes on)."""
        try:
            self.subscribers.remove(sub)
        except ValueError:
            pass
        sub.send.close()
        self._on_change()

    def end(self) -> None:
        """End every subscription."""
        for sub in tuple(self.subscribers):
            self.unsubscribe(sub)


@final
class Subscription:
    """The async context manager ``Agent.subscribe`` returns."""

    def __init__(self, fanout: Fanout, buffer: int, drop_updates: bool) -> None:
        self._fanout = fanout
        self._buffer = buffer
        self._drop_updates = drop_updates
        self._sub: Subscriber | None = None

    async def __aenter__(self) -> trio.MemoryReceiveChannel[ev.AgentEvent]:
        await trio.lowlevel.checkpoint()
        fanout = self._fanout
        fanout._check_open()
        send, receive = trio.open_memory_channel[ev.AgentEvent](self._buffer)
        self._sub = Subscriber(
            send=send, drop_updates=self._drop_updates, unbuffered=self._buffer == 0
        )
        fanout.subscribers.append(self._sub)
        fanout._on_change()
        return receive

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._sub is not None
        # Closing our sending side wakes a run blocked sending to us (it drops us and
        # goes on) and ends the iteration of any task reading the channel.
        self._fanout.unsubscribe(self._sub)
