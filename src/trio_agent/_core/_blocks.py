"""A reply's blocks: the one builder of text, thinking and tool-call blocks (sans-IO).

Theory of operation: a reply streams as blocks — text, thinking, tool calls — each sent
as fragments. Both the loop's stream accumulator and the providers' reply builder keep
each block still streaming as a :class:`Block` (its fragments so far) in the reply's
content list, and put the block's final part in its place once it is finished. Three
rules live here, once:

- **What a block shows while it streams** (:meth:`Block.partial`): text and thinking as
  far as they got (a UTF-16 surrogate pair whose halves arrived in separate fragments
  joined back into its character); a tool call with its id and name and no arguments
  yet: its argument text is not parsed before the call is finished.
- **A tool call's arguments** (:func:`parse_arguments`): its argument text must be a
  JSON object (empty text means ``{}``); a text that is not one is never turned into
  arguments — the call is not finished. Nothing is invented in its place. One
  exception, asked for by the builder (``Block.finish(keep_malformed=True)``): the
  final-answer call of a structured output is kept with its text as
  ``ToolCall.raw_arguments`` and empty arguments, so that the loop can answer it with
  the JSON problem (:func:`argument_problem`) and ask the model again.
- **What a reply that ends early keeps** (:func:`keep_partial`): finished blocks as they
  are, unfinished text and thinking as far as they got, and tool calls whose arguments
  never completed dropped — inventing arguments would put a call the model never
  finished into the transcript — with the error message naming each dropped call.

And one definition of the stream's last event (:data:`END_EVENTS`): the first ``Done``
or ``Error``; whatever a stream sends after it is ignored.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from . import _events as ev
from ._messages import Text, Thinking, ToolCall
from ._serde import join_surrogate_pairs

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "CALL",
    "END_EVENTS",
    "TEXT",
    "THINKING",
    "Block",
    "Part",
    "argument_problem",
    "keep_partial",
    "parse_arguments",
]

TEXT: Final = 0
THINKING: Final = 1
CALL: Final = 2
"""The kinds of block (``Block.kind``)."""

Part = Text | Thinking | ToolCall
"""A finished block of a reply's content."""

END_EVENTS: Final[frozenset[type]] = frozenset((ev.Done, ev.Error))
"""The types of the stream's last event: the first ``Done`` or ``Error`` ends the reply
and carries its final message; anything a stream sends after it is ignored."""


class Block:
    """A block still streaming: its fragments so far. Not a value: the reply's content
    list holds it until the block is finished, then its final part takes its place (the
    builder is freed — a reply of many tool calls keeps no builder per call).

    Attributes:
        kind: :data:`TEXT`, :data:`THINKING` or :data:`CALL`.
        pos: where the block sits in the reply's content (the ``index`` of its events
            when a provider numbers them).
        parts: the fragments received, in order.
        held: a high surrogate held back by :meth:`add` until its low half arrives.
        signature: a thinking block's signature fragments (a text block's opaque
            provider token).
        redacted: a redacted thinking block (its opaque data is its signature).
        call_id: a tool call's id.
        name: a tool call's name.
    """

    __slots__ = ("call_id", "held", "kind", "name", "parts", "pos", "redacted", "signature")

    def __init__(self, kind: int, pos: int) -> None:
        self.kind = kind
        self.pos = pos
        self.parts: list[str] = []
        self.held = ""
        self.signature: list[str] = []
        self.redacted = False
        self.call_id = ""
        self.name = ""

    def add(self, fragment: str) -> str:
        """Append ``fragment`` as it should be shown and kept; returns it (maybe "").

        A high surrogate held back from the previous fragment goes in front (joined with
        a low half into its character), and a high surrogate at the end is held back in
        turn, so that no fragment carries half a character. (The loop's accumulator
        appends the model's deltas as they are instead: its events are passed on
        unchanged, and :meth:`text` rejoins split pairs when read.)
        """
        if self.held:
            fragment = join_surrogate_pairs(self.held + fragment[:1]) + fragment[1:]
            self.held = ""
        last = fragment[-1:]
        if "\ud800" <= last <= "\udbff":
            self.held = last
            fragment = fragment[:-1]
        if fragment:
            self.parts.append(fragment)
        return fragment

    def text(self, count: int | None = None) -> str:
        """The block's text (argument text for a call) from its first ``count`` fragments
        (all when None, a held-back half included), split surrogate pairs joined."""
        parts = self.parts if count is None else self.parts[:count]
        return join_surrogate_pairs("".join(parts) + self.held)

    def partial(self, count: int | None = None) -> Part:
        """The block as it stood with ``count`` fragments (all when None), for display:
        a tool call shows no arguments before it is finished."""
        kind = self.kind
        if kind == TEXT:
            return Text(text=self.text(count))
        if kind == THINKING:
            # A signature arrives last: one still streaming is not valid (redacted data
            # is whole from the start).
            return Thinking(
                thinking=self.text(count),
                signature=self._signature() if self.redacted else None,
                redacted=self.redacted,
            )
        return ToolCall(id=self.call_id, name=self.name, arguments={})

    def finish(self, *, keep_malformed: bool = False) -> Part:
        """The block's final part, built from its fragments.

        ``keep_malformed``: a tool call whose argument text is not a JSON object is
        finished anyway, its text kept as ``raw_arguments`` and its arguments empty
        (the final-answer call of a structured output, which the loop answers with the
        JSON problem).

        Raises:
            ValueError: a tool call's argument text is not a JSON object (see
                :func:`parse_arguments`) and ``keep_malformed`` is false; the block
                stays unfinished.
        """
        kind = self.kind
        if kind == TEXT:
            return Text(text=self.text(), signature=self._signature())
        if kind == THINKING:
            return Thinking(
                thinking=self.text(), signature=self._signature(), redacted=self.redacted
            )
        raw = self.text()
        try:
            arguments = parse_arguments(raw, self.describe())
        except ValueError:
            if not keep_malformed:
                raise
            return ToolCall(id=self.call_id, name=self.name, arguments={}, raw_arguments=raw)
        return ToolCall(id=self.call_id, name=self.name, arguments=arguments)

    def _signature(self) -> str | None:
        return "".join(self.signature) or None

    def describe(self) -> str:
        """A tool call as named in error messages: ``name (id)``."""
        return f"{self.name or '?'} ({self.call_id or 'no id'})"


def parse_arguments(raw: str, what: str) -> dict[str, Any]:
    """A finished tool call's arguments: its argument text ``raw`` as a JSON object
    (empty text means ``{}``). Pure.

    Raises:
        ValueError: the text is not JSON, or not a JSON object; the message names the
            call (``what``: ``name (id)``) and quotes the start of the text.
    """
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"tool call {what} has {_malformed(exc, raw)}") from None
    if not isinstance(value, dict):
        raise ValueError(f"tool call {what} has {_not_object(raw)}")
    return value


def argument_problem(raw: str) -> str:
    """What is wrong with the argument text ``raw`` of a call that was kept with it
    (``ToolCall.raw_arguments``): ``malformed argument JSON (<the parser's words>):
    '<the start of the text>'``, or that it is not a JSON object. Pure."""
    try:
        json.loads(raw)
    except ValueError as exc:
        return _malformed(exc, raw)
    return _not_object(raw)


def _malformed(exc: ValueError, raw: str) -> str:
    return f"malformed argument JSON ({exc}): {raw[:200]!r}"


def _not_object(raw: str) -> str:
    return f"arguments that are not a JSON object: {raw[:200]!r}"


def keep_partial(content: Iterable[Part | Block], reason: str) -> tuple[tuple[Part, ...], str]:
    """The content to keep from a reply that ended early, and its error message.

    ``content`` is the reply's content in order: finished parts, and a :class:`Block`
    for each block still streaming. Returns the kept parts and ``reason``, extended with
    the names and ids of the dropped calls when there are any. Never raises.
    """
    kept: list[Part] = []
    dropped: list[str] = []
    for item in content:
        if not isinstance(item, Block):
            kept.append(item)
        elif item.kind == CALL:
            dropped.append(item.describe())
        else:
            kept.append(item.partial())
    if dropped:
        reason = f"{reason}; unfinished tool call(s) dropped: {', '.join(dropped)}"
    return tuple(kept), reason
