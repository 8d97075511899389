"""The call ids of a run's transcript, and the rule that renames a reused one (sans-IO).

Some servers restart their tool-call ids every turn (``call_0`` again). Before a reply
enters the transcript, :meth:`CallIds.fresh` gives each of its calls whose id the
transcript already holds a fresh one, deterministically, so that every call runs once and
its result pairs with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from ._messages import AssistantMessage, Message, ToolCall

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["CallIds"]


class CallIds:
    """Every call id of a transcript, kept up to date as replies are renamed into it.

    Attributes:
        taken: the ids of every call in the transcript (and of every reply passed
            through :meth:`fresh` since).
        next_suffix: for a renamed id, the suffix to try first next time it is reused
            (None until the first rename: most runs never need it).
    """

    __slots__ = ("next_suffix", "taken")

    def __init__(self, messages: Iterable[Message]) -> None:
        self.taken: set[str] = {
            b.id
            for m in messages
            if type(m) is AssistantMessage
            for b in m.content
            if type(b) is ToolCall
        }
        self.next_suffix: dict[str, int] | None = None

    def fresh(self, message: AssistantMessage) -> AssistantMessage:
        """``message`` with every call id already taken renamed; its ids are then taken.

        A taken id becomes ``<id>~<n>``, the smallest ``n`` from 2 up that is used neither
        in the transcript nor in this reply, the same for each of its uses in the reply.
        A deterministic rename, so the run's calls and results pair up. Ids repeated
        within the one reply but not taken are left alone (the loop refuses that reply as
        a whole). A message without calls is returned as it is.
        """
        calls = message.tool_calls
        if not calls:
            return message
        taken = self.taken
        ids = [c.id for c in calls]
        if not taken.isdisjoint(ids):
            renames = {i: i for i in ids if i in taken}
            in_reply = set(ids)
            if self.next_suffix is None:
                self.next_suffix = {}
            for old in renames:
                n = self.next_suffix.get(old, 2)
                while (new := f"{old}~{n}") in taken or new in in_reply:
                    n += 1
                self.next_suffix[old] = n + 1
                renames[old] = new
                in_reply.add(new)
            message = attrs.evolve(
                message,
                content=tuple(
                    attrs.evolve(b, id=renames[b.id])
                    if type(b) is ToolCall and b.id in renames
                    else b
                    for b in message.content
                ),
            )
            ids = [c.id for c in message.tool_calls]
        taken.update(ids)
        return message
