"""The rule for a reply that ends early, shared by the loop and the providers.

Both the loop's stream accumulator (``_stream``) and the providers' reply builder
(``providers/_reply``) keep a partial reply the same way: finished blocks as they are,
unfinished text and thinking as far as they got, and tool calls whose arguments never
completed dropped — inventing arguments would put a call the model never finished into
the transcript — with the error message naming each dropped call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._messages import Text, Thinking, ToolCall

__all__ = ["UnfinishedCall", "keep_partial"]


@attrs.frozen
class UnfinishedCall:
    """A tool call whose argument JSON never completed: it is dropped, not kept."""

    name: str
    call_id: str


def keep_partial(
    blocks: Iterable[Text | Thinking | ToolCall | UnfinishedCall], reason: str
) -> tuple[tuple[Text | Thinking | ToolCall, ...], str]:
    """The content to keep from a reply that ended early, and its error message.

    ``blocks`` are the reply's blocks in content order, each either kept as given or an
    :class:`UnfinishedCall`. Returns the kept blocks and ``reason``, extended with the
    names and ids of the dropped calls when there are any. Pure; never raises.
    """
    content: list[Text | Thinking | ToolCall] = []
    dropped: list[str] = []
    for block in blocks:
        if isinstance(block, UnfinishedCall):
            dropped.append(f"{block.name or '?'} ({block.call_id or 'no id'})")
        else:
            content.append(block)
    if dropped:
        reason = f"{reason}; unfinished tool call(s) dropped: {', '.join(dropped)}"
    return tuple(content), reason
