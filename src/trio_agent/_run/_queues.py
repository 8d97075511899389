"""The Agent's two message queues (steering and follow-up): take, and put back.

The loop reads the queues through two *synchronous* poll hooks. A synchronous poll has no
checkpoint, so a message leaves its queue in the same step as it enters the loop's list
of pending messages: no cancel can fall in between. The agent remembers every message it
hands out during a run (:meth:`MessageQueues.take` records it); when the run ends, each
one that did not reach the transcript (the run ended between the poll and the next
request — an abort, ``max_steps``, a failed hook, a cancel) goes back to the *front* of
its queue, in order (:meth:`MessageQueues.put_back`). So a queued message is delivered
exactly once, in FIFO order, or is still queued.

A run's last poll and its end are not one step: the run hands its last ``TurnEnd`` to the
subscribers only after its last polls (with its ``AgentEnd``), and a message queued
while a subscriber takes them cannot reach that run any more. It is
not lost and not stranded: it stays queued and the *next* run delivers it first —
``prompt(x)`` sends the queued steering messages ahead of ``x`` (follow-ups keep their
place: they go when the model would otherwise stop), and ``continue_()`` from an assistant
tail sends queued steering, else follow-ups. ``has_queued_messages`` tells whether
anything waits; ``while agent.has_queued_messages: await agent.continue_()`` answers
late messages at once (from a non-empty transcript).

``steer(m, interrupt=True)`` puts ``m`` at the front of the steering queue and
interrupts the run, which cuts the running batch or reply; the run then reaches its
steering poll and delivers ``m``. If neither a batch nor a reply runs at that moment
(the request is being prepared, or the reply has just ended and its batch not begun), the
run keeps the interrupt until its next steering poll: a batch that starts first is
cancelled, and a request about to go out takes ``m`` first (the interrupt's states are
the turn machine's, ``_core._turn``). The queues hold no interrupt state.

:class:`MessageQueues` is the bookkeeping only (the Agent decides when to take and put
back): nothing in it is a checkpoint.
"""

from __future__ import annotations

from collections import Counter, deque
from typing import TYPE_CHECKING, Literal, TypeAlias

import attrs

from .._core._messages import MESSAGE_TYPES, Message, UserMessage, describe_value
from .._core._serde import check_message

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["MODES", "Kind", "MessageQueues", "QueueMode", "as_message"]

QueueMode: TypeAlias = Literal["one_at_a_time", "all"]
"""How many queued messages one poll delivers: the oldest one, or all of them."""

MODES = ("one_at_a_time", "all")
Kind: TypeAlias = Literal["steering", "follow_up"]


def as_message(message: object) -> Message:
    """``message`` as a message: a ``str`` becomes a user message.

    Raises:
        TypeError: neither a message nor a ``str``, or a message holding a value a
            transcript cannot store (see ``_serde.check_message``).
    """
    if isinstance(message, str):
        return UserMessage.text(message)
    if isinstance(message, MESSAGE_TYPES):
        check_message(message, "the message")
        return message
    raise TypeError(f"expected a message or a str, got {describe_value(message)}")


@attrs.define(eq=False)
class MessageQueues:
    """The steering and follow-up queues, oldest first.

    Attributes:
        steering: messages for the model to read as soon as possible.
        follow_ups: messages for when the model would otherwise stop.
    """

    steering: deque[Message] = attrs.field(factory=deque)
    follow_ups: deque[Message] = attrs.field(factory=deque)

    def take(self, taken: list[tuple[Kind, Message]], kind: Kind, mode: QueueMode) -> list[Message]:
        """Remove and return the oldest message of the ``kind`` queue (all of them with
        ``mode="all"``), recording each in ``taken`` for :meth:`put_back`."""
        queue = self.steering if kind == "steering" else self.follow_ups
        if not queue:
            return []
        if mode == "all":
            out = list(queue)
            queue.clear()
        else:
            out = [queue.popleft()]
        taken.extend((kind, m) for m in out)
        return out

    def put_back(self, taken: list[tuple[Kind, Message]], delivered: Sequence[Message]) -> None:
        """Return every message of ``taken`` that is not in ``delivered`` to the front of
        its queue, in order; ``taken`` is emptied."""
        # Delivered messages are a prefix of the taken ones (the loop appends pending
        # messages in the order the polls returned them); identity, not equality, since
        # a user may queue two equal messages.
        if not taken:
            return
        counts = Counter(id(m) for m in delivered)
        back: dict[Kind, list[Message]] = {"steering": [], "follow_up": []}
        for kind, message in taken:
            if counts[id(message)] > 0:
                counts[id(message)] -= 1
            else:
                back[kind].append(message)
        self.steering.extendleft(reversed(back["steering"]))
        self.follow_ups.extendleft(reversed(back["follow_up"]))
        taken.clear()

    def clear(self) -> tuple[tuple[Message, ...], tuple[Message, ...]]:
        """Empty both queues; returns what they held: ``(steering, follow_ups)``."""
        out = (tuple(self.steering), tuple(self.follow_ups))
        self.steering.clear()
        self.follow_ups.clear()
        return out
