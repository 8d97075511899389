"""Building one assistant reply from a provider's stream (sans-IO).

A provider decoder says what arrived ("text for block k", "a tool call starts at block
k", "block k is finished") and :class:`ReplyBuilder` answers with the assistant events
to emit and, at the end, the final :class:`AssistantMessage`. Blocks are addressed by the
provider's own key (Anthropic's block index, or ``("call", i)`` for OpenAI's tool-call
index); the builder numbers them in the order they open, which is the content order of
the final message and the ``index`` of their events.

On failure the builder keeps the partial content the way the loop does: finished blocks,
and text or thinking still open as it stood. A tool call whose arguments never finished
is dropped (and named in the error message): it was never really made.

A character outside the Basic Multilingual Plane (an emoji) may arrive as the two halves
of its UTF-16 pair in separate frames (``"\\ud83d"`` then ``"\\ude00"``), each decoding to
a lone surrogate. A fragment ending in a high surrogate keeps it back until the next
fragment of the block, and the two are joined into the real character: every delta and
the final message hold 😀, never its halves. A half that stays alone is kept as is.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .._core import (
    AssistantMessage,
    StopReason,
    Text,
    Thinking,
    ToolCall,
    UnfinishedCall,
    Usage,
    join_surrogate_pairs,
    keep_partial,
)
from .._core import events as ev

if TYPE_CHECKING:
    from collections.abc import Hashable, Iterator

__all__ = ["ReplyBuilder", "StreamFault"]

_TEXT, _THINKING, _CALL = "text", "thinking", "call"


class StreamFault(Exception):
    """The reply cannot go on; ``str(fault)`` is the message for ``error_message``."""


class _Block:
    __slots__ = (
        "call_id",
        "final",
        "held",
        "index",
        "kind",
        "name",
        "parts",
        "redacted",
        "signature",
    )

    def __init__(self, kind: str, index: int) -> None:
        self.kind = kind
        self.index = index
        self.parts: list[str] = []
        # A high surrogate that ended the last fragment, waiting for its low half.
        self.held = ""
        self.signature: list[str] = []
        self.redacted = False
        self.call_id = ""
        self.name = ""
        self.final: Text | Thinking | ToolCall | None = None

    def take(self, fragment: str) -> str:
        """``fragment`` as it should be shown and kept: a high surrogate held back from
        the previous fragment goes in front (joined with a low half into its character),
        and a high surrogate at the end is held back in turn."""
        if self.held:
            fragment = join_surrogate_pairs(self.held + fragment[:1]) + fragment[1:]
            self.held = ""
        last = fragment[-1:]
        if "\ud800" <= last <= "\udbff":
            self.held = last
            fragment = fragment[:-1]
        return fragment

    def text(self) -> str:
        """Everything received, a held-back half included."""
        return "".join(self.parts) + self.held


def parse_arguments(raw: str, what: str) -> dict[str, Any]:
    """A tool call's argument JSON as a dict (empty text means ``{}``).

    Raises:
        StreamFault: the text is not JSON, or not a JSON object.
    """
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise StreamFault(
            f"tool call {what} has malformed argument JSON ({exc}): {raw[:200]!r}"
        ) from None
    if not isinstance(value, dict):
        raise StreamFault(
            f"tool call {what} has arguments that are not a JSON object: {raw[:200]!r}"
        )
    return value


class ReplyBuilder:
    """Accumulates one reply and produces its assistant events. One per request."""

    def __init__(self, *, model: str, provider: str) -> None:
        self.model = model
        self.provider = provider
        self.usage = Usage()
        self._blocks: list[_Block] = []
        self._open: dict[Hashable, _Block] = {}

    # --- opening and feeding blocks ---------------------------------------------------

    def is_open(self, key: Hashable) -> bool:
        return key in self._open

    def _start(self, key: Hashable, kind: str) -> _Block:
        block = _Block(kind, len(self._blocks))
        self._blocks.append(block)
        self._open[key] = block
        return block

    def _get(self, key: Hashable, kind: str, out: list[ev.AssistantEvent]) -> _Block:
        block = self._open.get(key)
        if block is not None and block.kind == kind:
            return block
        if block is not None:
            out.extend(self.close(key))
        block = self._start(key, kind)
        if kind == _TEXT:
            out.append(ev.TextStart(index=block.index))
        else:
            out.append(ev.ThinkingStart(index=block.index))
        return block

    def text(self, key: Hashable, delta: str) -> list[ev.AssistantEvent]:
        """Text for block ``key`` (opened on first use)."""
        return self._delta(key, _TEXT, delta)

    def thinking(self, key: Hashable, delta: str) -> list[ev.AssistantEvent]:
        """Reasoning text for block ``key`` (opened on first use)."""
        return self._delta(key, _THINKING, delta)

    def _delta(self, key: Hashable, kind: str, delta: str) -> list[ev.AssistantEvent]:
        out: list[ev.AssistantEvent] = []
        block = self._get(key, kind, out)
        delta = block.take(delta)
        if delta:
            block.parts.append(delta)
            if kind == _TEXT:
                out.append(ev.TextDelta(index=block.index, delta=delta))
            else:
                out.append(ev.ThinkingDelta(index=block.index, delta=delta))
        return out

    def signature(self, key: Hashable, fragment: str) -> list[ev.AssistantEvent]:
        """A fragment of the signature of thinking block ``key`` (opened on first use)."""
        out: list[ev.AssistantEvent] = []
        self._get(key, _THINKING, out).signature.append(fragment)
        return out

    def redacted_thinking(self, key: Hashable, data: str) -> list[ev.AssistantEvent]:
        """A redacted thinking block: opaque ``data``, kept as its signature."""
        out: list[ev.AssistantEvent] = []
        block = self._get(key, _THINKING, out)
        block.redacted = True
        block.signature = [data]
        return out

    def call_start(self, key: Hashable, call_id: str, name: str) -> list[ev.AssistantEvent]:
        """A tool call opens as block ``key``."""
        out: list[ev.AssistantEvent] = []
        if key in self._open:
            out.extend(self.close(key))
        block = self._start(key, _CALL)
        block.call_id = call_id
        block.name = name
        out.append(ev.ToolCallStart(index=block.index, id=call_id, name=name))
        return out

    def call_update(self, key: Hashable, *, call_id: str = "", name: str = "") -> None:
        """Fill in an id or name that arrived after the call opened."""
        block = self._open[key]
        if call_id:
            block.call_id = call_id
        if name:
            block.name = name

    def call_id(self, key: Hashable) -> str:
        return self._open[key].call_id

    def call_delta(self, key: Hashable, fragment: str) -> list[ev.AssistantEvent]:
        """A fragment of the argument JSON of open call ``key``."""
        block = self._open[key]
        fragment = block.take(fragment)
        if not fragment:
            return []
        block.parts.append(fragment)
        return [ev.ToolCallDelta(index=block.index, delta=fragment)]

    # --- closing ------------------------------------------------------------------

    def close(self, key: Hashable) -> list[ev.AssistantEvent]:
        """Finish block ``key`` (nothing if it is not open).

        Raises:
            StreamFault: a tool call's arguments are not a JSON object.
        """
        block = self._open.pop(key, None)
        if block is None:
            return []
        i = block.index
        out: list[ev.AssistantEvent] = []
        if block.held and block.kind != _CALL:
            # A high surrogate whose low half never came: shown and kept alone.
            held, block.held = block.held, ""
            block.parts.append(held)
            delta = ev.TextDelta if block.kind == _TEXT else ev.ThinkingDelta
            out.append(delta(index=i, delta=held))
        if block.kind == _TEXT:
            text = Text(text="".join(block.parts))
            block.final = text
            out.append(ev.TextEnd(index=i, text=text.text))
            return out
        if block.kind == _THINKING:
            thinking = Thinking(
                thinking="".join(block.parts),
                signature="".join(block.signature) or None,
                redacted=block.redacted,
            )
            block.final = thinking
            out.append(
                ev.ThinkingEnd(index=i, thinking=thinking.thinking, signature=thinking.signature)
            )
            return out
        what = f"{block.name or '?'} ({block.call_id or 'no id'})"
        try:
            args = parse_arguments(block.text(), what)
        except StreamFault:
            # Put it back so a failure report names it as unfinished.
            self._open[key] = block
            raise
        call = ToolCall(id=block.call_id, name=block.name, arguments=args)
        block.final = call
        return [ev.ToolCallEnd(index=i, tool_call=call)]

    def close_all(self) -> list[ev.AssistantEvent]:
        """Finish every open block, in content order."""
        out: list[ev.AssistantEvent] = []
        for key, _ in sorted(self._open.items(), key=lambda item: item[1].index):
            out.extend(self.close(key))
        return out

    @property
    def has_calls(self) -> bool:
        return any(b.kind == _CALL for b in self._blocks)

    # --- the final message --------------------------------------------------------

    def _message(
        self,
        content: list[Text | Thinking | ToolCall],
        stop_reason: StopReason,
        error_message: str | None = None,
    ) -> AssistantMessage:
        return AssistantMessage(
            content=tuple(content),
            stop_reason=stop_reason,
            usage=self.usage,
            model=self.model,
            provider=self.provider,
            error_message=error_message,
        )

    def finish(
        self, stop_reason: StopReason, error_message: str | None = None
    ) -> ev.Done | ev.Error:
        """The terminal event for a reply that ended as the provider said.

        Every block must be closed. ``error`` stop reasons (a content filter, a refusal)
        give an ``Error`` with the full content kept.
        """
        assert not self._open, "close_all() before finish()"
        content = [b.final for b in self._blocks if b.final is not None]
        if stop_reason in ("error", "aborted"):
            return ev.Error(
                message=self._message(
                    content, stop_reason, error_message or "the provider reported an error"
                )
            )
        return ev.Done(message=self._message(content, stop_reason))

    def fail(self, reason: str, stop_reason: StopReason = "error") -> ev.Error:
        """An ``Error`` keeping the partial content (see :func:`keep_partial`: unfinished
        tool calls are dropped and named in the error message)."""
        content, reason = keep_partial(self._blocks_so_far(), reason)
        return ev.Error(message=self._message(list(content), stop_reason, reason))

    def _blocks_so_far(self) -> Iterator[Text | Thinking | ToolCall | UnfinishedCall]:
        for block in self._blocks:
            if block.final is not None:
                yield block.final
            elif block.kind == _TEXT:
                yield Text(text=block.text())
            elif block.kind == _THINKING:
                # A signature arrives last; an unfinished one is not valid (redacted
                # data is whole from the start).
                yield Thinking(
                    thinking=block.text(),
                    signature="".join(block.signature) or None if block.redacted else None,
                    redacted=block.redacted,
                )
            else:
                yield UnfinishedCall(name=block.name, call_id=block.call_id)
