"""Turning a model's event stream into one assistant message (sans-IO).

Theory of operation: ``StreamAccumulator.feed`` takes events one at a time. The reply's
content is a list holding each finished block's final part and, for each block still
streaming, its builder (:class:`~trio_agent._core._blocks.Block`, the one builder the
providers use too). A block event is only queued when fed, and applied to its builder
when something needs the partial content — a snapshot, a failure: a reply that ends
with its ``Done`` event while nobody watches (the final message is ``Done``'s) never
builds its blocks. Once a snapshot was taken, block events are applied as they are fed
(someone watches: each is snapshotted next). Each block event yields a snapshot that
records only *how far* the accumulation had gone (the number of blocks, and the fragment
count of each block still open) — O(1) to make for the usual one-open-block stream — and
builds the partial message only when someone reads it. Text is joined once per read, so
N deltas cost O(total size), never O(N²). Joining also rejoins a UTF-16 surrogate pair
whose halves arrived in separate deltas. A tool call still streaming shows its id and
name and no arguments: they arrive with its ``ToolCallEnd``.

The final message is the ``Done``/``Error`` event's message: block events are for live
display. Malformed streams are tolerated where nothing is lost (block events before
``Start``; a second terminal event, which is ignored) and become an ``error`` message
otherwise — also a terminal event carrying something that is not an ``AssistantMessage``, and a stop
reason outside ``StopReason`` (an ``error`` reply naming it, its content kept).
"""

from __future__ import annotations

import time
from typing import Any, get_args

import attrs

from .._core import _events as ev
from .._core._blocks import CALL, END_EVENTS, TEXT, THINKING, Block, Part, keep_partial
from .._core._messages import AssistantMessage, StopReason, Text, Thinking

__all__ = ["StreamAccumulator"]

_START, _DELTA, _END = 0, 1, 2
_BLOCK_STEPS: dict[type, tuple[int, int]] = {
    ev.TextStart: (TEXT, _START),
    ev.TextDelta: (TEXT, _DELTA),
    ev.TextEnd: (TEXT, _END),
    ev.ThinkingStart: (THINKING, _START),
    ev.ThinkingDelta: (THINKING, _DELTA),
    ev.ThinkingEnd: (THINKING, _END),
    ev.ToolCallStart: (CALL, _START),
    ev.ToolCallDelta: (CALL, _DELTA),
    ev.ToolCallEnd: (CALL, _END),
}
"""What each block event does: to which kind of block, and how (one lookup per event)."""
_STOP_REASONS = frozenset(get_args(StopReason))


class _Snapshot:
    __slots__ = ("_acc", "_n", "_open")

    def __init__(self, acc: StreamAccumulator) -> None:
        self._acc = acc
        self._n = len(acc.blocks)
        self._open = tuple((b, len(b.parts)) for b in acc.open_blocks)

    def materialize(self) -> AssistantMessage:
        # The blocks open at the snapshot may have closed since (their final part took
        # their place): each is shown as it stood, from its own fragments.
        content: list[Part | Block] = list(self._acc.blocks[: self._n])
        for block, count in self._open:
            content[block.pos] = block.partial(count)
        return self._acc.message(tuple(p for p in content if not isinstance(p, Block)), "stop")


class StreamAccumulator:
    """Accumulates one model reply. Not thread-safe; one per request.

    Attributes:
        started: the stream has begun (any event was fed).
        start_emitted: the reply's ``MessageStart`` event went out. Set by whoever
            delivers the events (the accumulator builds none), so that the reply is
            announced exactly once, however its stream ends.
        final: the finished message, once a terminal event or :meth:`fail` set it.
    """

    def __init__(self, *, model: str = "", provider: str = "") -> None:
        # The reply's content so far: each block's final part once it closed, its
        # builder while it streams.
        self.blocks: list[Part | Block] = []
        self.open_blocks: list[Block] = []
        self._by_index: dict[int, Block] = {}
        # Block events fed and not applied yet (see the module docstring); once a
        # snapshot was taken (someone watches), events are applied as they come.
        self._later: list[ev.AssistantEvent] = []
        self._eager = False
        self.started = False
        self.start_emitted = False
        self.final: AssistantMessage | None = None
        self._model = model
        self._provider = provider
        self._timestamp = time.time()

    def message(
        self,
        content: tuple[Part, ...],
        stop_reason: StopReason,
        error_message: str | None = None,
    ) -> AssistantMessage:
        return AssistantMessage(
            content=content,
            stop_reason=stop_reason,
            model=self._model,
            provider=self._provider,
            error_message=error_message,
            timestamp=self._timestamp,
        )

    def snapshot(self) -> _Snapshot:
        """An O(1) snapshot of the partial message (built when read)."""
        if self._later:
            self._catch_up()
        self._eager = True
        return _Snapshot(self)

    def _catch_up(self) -> None:
        """Apply the block events fed since the last time."""
        later, self._later = self._later, []
        for event in later:
            self._apply(event, _BLOCK_STEPS[type(event)])

    def empty(self) -> AssistantMessage:
        return self.message((), "stop")

    def _open(self, index: int, kind: int) -> Block:
        block = Block(kind, len(self.blocks))
        self._by_index[index] = block
        self.blocks.append(block)
        self.open_blocks.append(block)
        return block

    def feed(self, event: ev.AssistantEvent) -> bool:
        """Take one event; True when it is a block event to show as a ``MessageUpdate``.

        After a terminal event (``Done``/``Error``) ``final`` is set; later events are
        ignored (the first terminal event stands).
        """
        if self.final is not None:
            return False
        step = _BLOCK_STEPS.get(type(event))
        if step is None:
            return self._edge(event)
        self.started = True
        if self._eager:
            self._apply(event, step)
        else:
            self._later.append(event)
        return True

    def _apply(self, event: ev.AssistantEvent, step: tuple[int, int]) -> None:
        """Apply one block event to its builder (``step``: its ``_BLOCK_STEPS`` entry)."""
        kind, action = step
        e: Any = event
        if action == _END:
            # The final part takes the builder's place (the builder is freed).
            if kind == CALL:
                final: Part = e.tool_call
            elif kind == TEXT:
                final = Text(text=e.text)
            else:
                final = Thinking(thinking=e.thinking, signature=e.signature)
            ended = self._by_index.pop(e.index, None)
            if ended is None:
                self.blocks.append(final)  # ended without a start
            else:
                self.blocks[ended.pos] = final
                open_blocks = self.open_blocks
                if open_blocks[-1] is ended:
                    open_blocks.pop()
                else:
                    open_blocks.remove(ended)
            return
        # A start or a delta: its block's builder (opened by whichever comes first).
        block = self._by_index.get(e.index)
        if block is None:
            block = self._open(e.index, kind)
        if action == _DELTA:
            block.parts.append(e.delta)  # as sent: split surrogate pairs are joined when read
        elif kind == CALL:
            block.call_id = e.id
            block.name = e.name

    def _edge(self, event: ev.AssistantEvent) -> bool:
        """:meth:`feed` for the events that are not block events."""
        t = type(event)
        if t is ev.Start:
            self.started = True
            return False
        if t is ev.Done:
            self.started = True
            msg = self._terminal(event.message, "Done")  # type: ignore[union-attr]
            if msg is not None:
                self.final = msg
            return False
        if t not in END_EVENTS:  # (Done was taken above: this is an Error)
            raise TypeError(f"not an assistant event: {event!r}")
        self.started = True
        msg = self._terminal(event.message, "Error")  # type: ignore[union-attr]
        if msg is None:
            return False
        if msg.stop_reason not in ("error", "aborted") or not msg.error_message:
            msg = attrs.evolve(
                msg,
                stop_reason=msg.stop_reason if msg.stop_reason == "aborted" else "error",
                error_message=msg.error_message or "the model reported an error",
            )
        self.final = msg
        return False

    def _terminal(self, message: object, kind: str) -> AssistantMessage | None:
        """The final message a ``Done``/``Error`` event carries, checked.

        Something that is not an :class:`AssistantMessage` makes the stream malformed:
        the reply fails (``final`` set, partial content kept) and None is returned. A
        stop reason the loop does not know (``"content_filter"``...) makes the message
        an ``error`` reply that says so, its content kept.
        """
        if type(message) is not AssistantMessage:
            self.fail(
                f"malformed model stream: the {kind} event carried a "
                f"{type(message).__name__}, not an AssistantMessage"
            )
            return None
        if message.stop_reason not in _STOP_REASONS:
            why = f"the model stopped with an unknown stop reason {message.stop_reason!r}"
            if message.error_message:
                why = f"{why}: {message.error_message}"
            return attrs.evolve(message, stop_reason="error", error_message=why)
        return message

    def fail(self, reason: str, stop_reason: StopReason = "error") -> AssistantMessage:
        """End the reply early, keeping the partial content (see :func:`keep_partial`:
        unfinished tool calls are dropped and named in the error message)."""
        if self._later:
            self._catch_up()
        content, reason = keep_partial(self.blocks, reason)
        self.final = self.message(content, stop_reason, reason)
        return self.final

    def finish(self) -> AssistantMessage:
        """The final message once the stream is over (an error if it never terminated)."""
        if self.final is not None:
            return self.final
        return self.fail("the model stream ended without a Done or Error event")
