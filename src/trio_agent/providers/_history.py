"""Shaping a transcript before it is sent to a provider (shared by both providers).

Both APIs reject a history in which a tool call has no result, a result answers no call,
or an id breaks their id rules; the loop's transcripts are paired, but a user may pass
any history. :func:`prepare` gives each provider a sequence it will accept:

- Assistant messages that ended in ``error`` or ``aborted`` are left out, with the
  results that answer their calls: they are incomplete turns (half a thinking block,
  calls that never ran), and the model should go on from the last complete state. This
  is what pi does (``transform-messages.ts``).
- A call left without a result before the next user or assistant message gets a
  synthetic error result, and a result that answers no open call is left out.
- ``CustomMessage`` entries are left out (``convert_to_llm`` decides what to send).
- Ids of calls made by another provider are passed through ``normalize_id`` (the same
  mapping for the call and its result), so a transcript can move between providers.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

import attrs

from .._core import AssistantMessage, Message, Text, ToolCall, ToolResultMessage, UserMessage

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["NO_RESULT", "merge_turn", "normalize_id", "prepare"]

NO_RESULT = "No result provided"

History = list[UserMessage | AssistantMessage | ToolResultMessage]


def prepare(
    messages: Sequence[Message],
    *,
    provider: str,
    normalize_id: Callable[[str], str] | None = None,
) -> History:
    """The messages to send, in order (see the module docstring for the rules)."""
    out: History = []
    dropped: set[str] = set()
    ids: dict[str, str] = {}
    open_calls: dict[str, ToolCall] = {}

    def close_open_calls() -> None:
        for call in open_calls.values():
            out.append(
                ToolResultMessage(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    content=(Text(text=NO_RESULT),),
                    is_error=True,
                )
            )
        open_calls.clear()

    for message in messages:
        if type(message) is AssistantMessage:
            close_open_calls()
            if message.stop_reason in ("error", "aborted"):
                dropped.update(c.id for c in message.tool_calls)
                continue
            if normalize_id is not None and message.provider != provider:
                message = _renumber(message, normalize_id, ids)
            out.append(message)
            for call in message.tool_calls:
                open_calls.setdefault(call.id, call)
        elif type(message) is ToolResultMessage:
            if message.tool_call_id in dropped:
                continue
            call_id = ids.get(message.tool_call_id, message.tool_call_id)
            if open_calls.pop(call_id, None) is None:
                continue
            if call_id != message.tool_call_id:
                message = attrs.evolve(message, tool_call_id=call_id)
            out.append(message)
        elif type(message) is UserMessage:
            close_open_calls()
            out.append(message)
    close_open_calls()
    return out


def normalize_id(call_id: str, *, max_length: int, pattern: str | None = None) -> str:
    """``call_id`` made to fit an API's id rules, stable and collision-resistant.

    Characters outside ``pattern`` (a regex character class like ``[^a-zA-Z0-9_-]``)
    become ``_``; an id that had to change, or is longer than ``max_length``, gets a
    short hash of the original so that two different ids stay different.
    """
    new = re.sub(pattern, "_", call_id) if pattern else call_id
    if new == call_id and len(new) <= max_length:
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8", errors="replace")).hexdigest()[:10]
    return f"{new[: max_length - len(digest) - 1]}_{digest}"


def _renumber(
    message: AssistantMessage, normalize_id: Callable[[str], str], ids: dict[str, str]
) -> AssistantMessage:
    content = []
    changed = False
    for block in message.content:
        if type(block) is ToolCall:
            new_id = normalize_id(block.id)
            if new_id != block.id:
                ids[block.id] = new_id
                block = attrs.evolve(block, id=new_id)
                changed = True
        content.append(block)
    return attrs.evolve(message, content=tuple(content)) if changed else message


def merge_turn(out: list[dict[str, Any]], role: str, field: str, items: list[Any]) -> None:
    """Append a turn of ``role`` holding ``items`` (under ``field``) to ``out``, merged
    into the last turn when that one has the same role (the APIs that want user and
    model turns to alternate take consecutive ones as one). Nothing for no items."""
    if not items:
        return
    if out and out[-1]["role"] == role:
        out[-1][field].extend(items)
    else:
        out.append({"role": role, field: items})
