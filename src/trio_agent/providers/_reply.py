"""Building one assistant reply from a provider's stream (sans-IO).

A provider decoder says what arrived ("text for block k", "a tool call starts at block
k", "block k is finished") and :class:`ReplyBuilder` answers with the assistant events
to emit and, at the end, the final :class:`AssistantMessage`. Blocks are addressed by the
provider's own key (Anthropic's block index, or ``("call", i)`` for OpenAI's tool-call
index); the builder numbers them in the order they open, which is the content order of
the final message and the ``index`` of their events.

Each block still streaming is a :class:`~trio_agent._core._blocks.Block`, the builder
the loop's stream accumulator uses too, and the rules are its: a tool call's argument
text must be a JSON object, else the call is not finished (the reply fails with an
``Error`` naming it); on failure the partial content is kept the way the loop keeps it —
finished blocks, and text or thinking still open as it stood; a tool call whose
arguments never finished is dropped (and named in the error message): it was never
really made.

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
    CALL,
    TEXT,
    THINKING,
    AssistantMessage,
    Block,
    Part,
    StopReason,
    Text,
    Thinking,
    Tokens,
    ToolCall,
    Usage,
    keep_partial,
)
from .._core import events as ev

if TYPE_CHECKING:
    from collections.abc import Hashable, Mapping

__all__ = ["ReplyBuilder", "StreamFault", "json_frame", "str_field"]


class StreamFault(Exception):
    """The reply cannot go on; ``str(fault)`` is the message for ``error_message``."""


def json_frame(data: str) -> dict[str, Any]:
    """A stream frame's ``data``, which must be a JSON object.

    Raises:
        StreamFault: it is not JSON, or not an object (the message quotes its start).
    """
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise StreamFault(f"malformed JSON in a stream frame ({exc}): {data[:200]!r}") from None
    if not isinstance(value, dict):
        raise StreamFault(f"unexpected stream frame (not a JSON object): {data[:200]!r}")
    return value


def str_field(mapping: Mapping[str, Any], key: str) -> str:
    """``mapping[key]`` as a string ("" when absent or null).

    Raises:
        StreamFault: it is there but not a string.
    """
    value = mapping.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise StreamFault(f"malformed stream event: {key!r} is not a string")
    return value


class ReplyBuilder:
    """Accumulates one reply and produces its assistant events. One per request."""

    def __init__(self, *, model: str, provider: str, final_answer: str | None = None) -> None:
        self.model = model
        self.provider = provider
        self.final_answer = final_answer
        """The final-answer tool's name when the request asks for a structured output in
        tool mode: a call to it whose arguments are not a JSON object is kept (its text
        as ``raw_arguments``) so that the loop can send the problem back."""
        self.usage = Usage()
        self.tokens: Tokens | None = None
        """The reply's tokens, set by a decoder asked to capture them; kept on the
        message only when the reply finishes (``Done``)."""
        # The reply's content: each finished block's final part, the builder of each
        # block still open.
        self._content: list[Part | Block] = []
        self._open: dict[Hashable, Block] = {}

    # --- opening and feeding blocks ---------------------------------------------------

    def is_open(self, key: Hashable) -> bool:
        return key in self._open

    def _start(self, key: Hashable, kind: int) -> Block:
        block = Block(kind, len(self._content))
        self._content.append(block)
        self._open[key] = block
        return block

    def _get(self, key: Hashable, kind: int, out: list[ev.AssistantEvent]) -> Block:
        block = self._open.get(key)
        if block is not None and block.kind == kind:
            return block
        if block is not None:
            out.extend(self.close(key))
        block = self._start(key, kind)
        if kind == TEXT:
            out.append(ev.TextStart(index=block.pos))
        else:
            out.append(ev.ThinkingStart(index=block.pos))
        return block

    def text(self, key: Hashable, delta: str) -> list[ev.AssistantEvent]:
        """Text for block ``key`` (opened on first use)."""
        return self._delta(key, TEXT, delta)

    def thinking(self, key: Hashable, delta: str) -> list[ev.AssistantEvent]:
        """Reasoning text for block ``key`` (opened on first use)."""
        return self._delta(key, THINKING, delta)

    def _delta(self, key: Hashable, kind: int, delta: str) -> list[ev.AssistantEvent]:
        out: list[ev.AssistantEvent] = []
        block = self._get(key, kind, out)
        delta = block.add(delta)
        if delta:
            if kind == TEXT:
                out.append(ev.TextDelta(index=block.pos, delta=delta))
            else:
                out.append(ev.ThinkingDelta(index=block.pos, delta=delta))
        return out

    def signature(self, key: Hashable, fragment: str) -> list[ev.AssistantEvent]:
        """A fragment of the signature of thinking block ``key`` (opened on first use)."""
        out: list[ev.AssistantEvent] = []
        self._get(key, THINKING, out).signature.append(fragment)
        return out

    def set_signature(self, key: Hashable, token: str) -> None:
        """Set (replace) the opaque provider token of open text or thinking block
        ``key``: its ``signature``, sent back with it."""
        block = self._open[key]
        block.signature = [token]

    def redacted_thinking(self, key: Hashable, data: str) -> list[ev.AssistantEvent]:
        """A redacted thinking block: opaque ``data``, kept as its signature."""
        out: list[ev.AssistantEvent] = []
        block = self._get(key, THINKING, out)
        block.redacted = True
        block.signature = [data]
        return out

    def call_start(self, key: Hashable, call_id: str, name: str) -> list[ev.AssistantEvent]:
        """A tool call opens as block ``key``."""
        out: list[ev.AssistantEvent] = []
        if key in self._open:
            out.extend(self.close(key))
        block = self._start(key, CALL)
        block.call_id = call_id
        block.name = name
        out.append(ev.ToolCallStart(index=block.pos, id=call_id, name=name))
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
        fragment = block.add(fragment)
        if not fragment:
            return []
        return [ev.ToolCallDelta(index=block.pos, delta=fragment)]

    # --- closing ------------------------------------------------------------------

    def close(self, key: Hashable) -> list[ev.AssistantEvent]:
        """Finish block ``key`` (nothing if it is not open).

        Raises:
            StreamFault: a tool call's arguments are not a JSON object (the call stays
                open, so that a failure report names it as unfinished) — except the
                final-answer call's, kept with its text (``ToolCall.raw_arguments``).
        """
        block = self._open.pop(key, None)
        if block is None:
            return []
        i = block.pos
        out: list[ev.AssistantEvent] = []
        if block.held and block.kind != CALL:
            # A high surrogate whose low half never came: shown and kept alone.
            held, block.held = block.held, ""
            block.parts.append(held)
            delta = ev.TextDelta if block.kind == TEXT else ev.ThinkingDelta
            out.append(delta(index=i, delta=held))
        try:
            final = block.finish(
                keep_malformed=block.kind == CALL and block.name == self.final_answer
            )
        except ValueError as exc:
            self._open[key] = block
            raise StreamFault(str(exc)) from None
        self._content[i] = final
        if type(final) is Text:
            out.append(ev.TextEnd(index=i, text=final.text))
        elif type(final) is Thinking:
            out.append(ev.ThinkingEnd(index=i, thinking=final.thinking, signature=final.signature))
        else:
            assert type(final) is ToolCall
            out.append(ev.ToolCallEnd(index=i, tool_call=final))
        return out

    def close_all(self) -> list[ev.AssistantEvent]:
        """Finish every open block, in content order."""
        out: list[ev.AssistantEvent] = []
        for key, _ in sorted(self._open.items(), key=lambda item: item[1].pos):
            out.extend(self.close(key))
        return out

    @property
    def has_calls(self) -> bool:
        return any(
            type(b) is ToolCall or (isinstance(b, Block) and b.kind == CALL) for b in self._content
        )

    # --- the final message --------------------------------------------------------

    def _message(
        self,
        content: tuple[Part, ...],
        stop_reason: StopReason,
        error_message: str | None = None,
        tokens: Tokens | None = None,
    ) -> AssistantMessage:
        return AssistantMessage(
            content=content,
            stop_reason=stop_reason,
            usage=self.usage,
            model=self.model,
            provider=self.provider,
            error_message=error_message,
            tokens=tokens,
        )

    def finish(
        self, stop_reason: StopReason, error_message: str | None = None
    ) -> ev.Done | ev.Error:
        """The terminal event for a reply that ended as the provider said.

        Every block must be closed. ``error`` stop reasons (a content filter, a refusal)
        give an ``Error`` with the full content kept.
        """
        assert not self._open, "close_all() before finish()"
        content = tuple(p for p in self._content if not isinstance(p, Block))
        if stop_reason in ("error", "aborted"):
            return ev.Error(
                message=self._message(
                    content, stop_reason, error_message or "the provider reported an error"
                )
            )
        return ev.Done(message=self._message(content, stop_reason, tokens=self.tokens))

    def fail(self, reason: str, stop_reason: StopReason = "error") -> ev.Error:
        """An ``Error`` keeping the partial content (see :func:`keep_partial`: unfinished
        tool calls are dropped and named in the error message)."""
        content, reason = keep_partial(self._content, reason)
        return ev.Error(message=self._message(content, stop_reason, reason))
