"""Events: what a model stream says (assistant events) and what a run says (loop events).

Both are closed unions of frozen attrs classes with a ``type`` wire tag. Events are
immutable snapshots: a consumer that keeps one never sees it change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal, Protocol, TypeAlias

import attrs

from ._messages import AssistantMessage, Message, ToolCall, ToolResultMessage

__all__ = [
    "AgentEnd",
    "AgentEvent",
    "AgentStart",
    "AssistantEvent",
    "CallTiming",
    "Done",
    "EndReason",
    "Error",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "Start",
    "TextDelta",
    "TextEnd",
    "TextStart",
    "ThinkingDelta",
    "ThinkingEnd",
    "ThinkingStart",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "ToolOutcome",
    "TurnEnd",
    "TurnStart",
    "TurnStats",
]

# --- the assistant stream (pi's protocol) -------------------------------------------


@attrs.frozen(kw_only=True)
class Start:
    """The reply begins."""

    type: ClassVar[Literal["start"]] = "start"


@attrs.frozen(kw_only=True)
class TextStart:
    type: ClassVar[Literal["text_start"]] = "text_start"
    index: int


@attrs.frozen(kw_only=True)
class TextDelta:
    type: ClassVar[Literal["text_delta"]] = "text_delta"
    index: int
    delta: str


@attrs.frozen(kw_only=True)
class TextEnd:
    type: ClassVar[Literal["text_end"]] = "text_end"
    index: int
    text: str


@attrs.frozen(kw_only=True)
class ThinkingStart:
    type: ClassVar[Literal["thinking_start"]] = "thinking_start"
    index: int


@attrs.frozen(kw_only=True)
class ThinkingDelta:
    type: ClassVar[Literal["thinking_delta"]] = "thinking_delta"
    index: int
    delta: str


@attrs.frozen(kw_only=True)
class ThinkingEnd:
    type: ClassVar[Literal["thinking_end"]] = "thinking_end"
    index: int
    thinking: str
    signature: str | None = None


@attrs.frozen(kw_only=True)
class ToolCallStart:
    type: ClassVar[Literal["toolcall_start"]] = "toolcall_start"
    index: int
    id: str
    name: str


@attrs.frozen(kw_only=True)
class ToolCallDelta:
    """A raw fragment of the call's argument JSON."""

    type: ClassVar[Literal["toolcall_delta"]] = "toolcall_delta"
    index: int
    delta: str


@attrs.frozen(kw_only=True)
class ToolCallEnd:
    type: ClassVar[Literal["toolcall_end"]] = "toolcall_end"
    index: int
    tool_call: ToolCall


@attrs.frozen(kw_only=True)
class Done:
    """The reply ended; ``message`` is the truth (block events are for live display)."""

    type: ClassVar[Literal["done"]] = "done"
    message: AssistantMessage


@attrs.frozen(kw_only=True)
class Error:
    """The reply failed or was aborted; ``message`` keeps the partial content.

    Only finished blocks and text belong in it: a tool call whose arguments never
    finished streaming is left out and named in ``error_message`` (``...; unfinished
    tool call(s) dropped: <name> (<id>)``), as the loop does for a reply it cuts short.
    """

    type: ClassVar[Literal["error"]] = "error"
    message: AssistantMessage


AssistantEvent: TypeAlias = (
    Start
    | TextStart
    | TextDelta
    | TextEnd
    | ThinkingStart
    | ThinkingDelta
    | ThinkingEnd
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | Done
    | Error
)

# --- loop events ---------------------------------------------------------------------

EndReason: TypeAlias = Literal[
    "stop",
    "length",
    "error",
    "aborted",
    "max_steps",
    "stopped",
    "terminated",
    "usage_limit",
    "timeout",
]
"""Why a run ended (``usage_limit``: ``LoopConfig.max_input_tokens`` or
``max_output_tokens`` would be exceeded by the next request; ``timeout``: the run took
``LoopConfig.run_timeout`` seconds — a fleet's ``task_timeout`` ends its tasks this way)."""

ToolOutcome: TypeAlias = Literal[
    "ok", "error", "not_found", "invalid_arguments", "blocked", "timed_out", "aborted", "skipped"
]
"""How one tool call ended; every outcome but ``ok`` has ``is_error=True``."""


class _Snapshot(Protocol):
    """A partial assistant message made in O(1), built into a message when read."""

    def materialize(self) -> AssistantMessage: ...


@attrs.frozen(kw_only=True)
class AgentStart:
    type: ClassVar[Literal["agent_start"]] = "agent_start"


@attrs.frozen(kw_only=True)
class TurnStart:
    type: ClassVar[Literal["turn_start"]] = "turn_start"
    index: int


@attrs.frozen(kw_only=True)
class MessageStart:
    type: ClassVar[Literal["message_start"]] = "message_start"
    message: Message


@attrs.frozen(kw_only=True, eq=False)
class MessageUpdate:
    """One assistant stream event, with the partial message as it stood after it.

    ``message`` is built on first access from an O(1) snapshot, so streaming N deltas
    costs O(total size) however many updates are kept.
    """

    type: ClassVar[Literal["message_update"]] = "message_update"
    _message: AssistantMessage | _Snapshot = attrs.field(alias="message", repr=False)
    event: AssistantEvent

    @property
    def message(self) -> AssistantMessage:
        """The partial assistant message after ``event``."""
        m = self._message
        if type(m) is AssistantMessage:
            return m
        built = m.materialize()  # type: ignore[union-attr]
        object.__setattr__(self, "_message", built)
        return built

    def __eq__(self, other: object) -> bool:
        if type(other) is not MessageUpdate:
            return NotImplemented
        return self.event == other.event and self.message == other.message

    def __hash__(self) -> int:
        return hash(self.event)


@attrs.frozen(kw_only=True)
class MessageEnd:
    type: ClassVar[Literal["message_end"]] = "message_end"
    message: Message


@attrs.frozen(kw_only=True)
class ToolExecutionStart:
    """A call enters the batch; ``args`` are the raw arguments the model sent."""

    type: ClassVar[Literal["tool_execution_start"]] = "tool_execution_start"
    call_id: str
    tool_name: str
    args: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class ToolExecutionUpdate:
    type: ClassVar[Literal["tool_execution_update"]] = "tool_execution_update"
    call_id: str
    tool_name: str
    partial: Any


@attrs.frozen(kw_only=True)
class ToolExecutionEnd:
    type: ClassVar[Literal["tool_execution_end"]] = "tool_execution_end"
    call_id: str
    tool_name: str
    result: ToolResultMessage
    is_error: bool
    outcome: ToolOutcome


@attrs.frozen(kw_only=True)
class CallTiming:
    """When one call of a batch ran, on the trio clock (seconds)."""

    call_id: str
    tool_name: str
    start: float
    end: float
    waited: float = 0.0
    """Time spent waiting for a ``max_concurrency`` slot before ``start``."""

    @property
    def duration(self) -> float:
        return self.end - self.start


@attrs.frozen(kw_only=True)
class TurnStats:
    """Statistics of one tool batch (all times in seconds, on the trio clock)."""

    wall_time: float = 0.0
    critical_path: float = 0.0
    """The longest single call."""
    total_call_time: float = 0.0
    """Sum of the calls' durations."""
    peak_concurrency: int = 0
    waited_on_limit: float = 0.0
    """Total time calls waited for a ``max_concurrency`` slot."""
    calls: tuple[CallTiming, ...] = ()


NO_STATS = TurnStats()
"""The statistics of a turn that ran no batch (one shared, immutable instance)."""


@attrs.frozen(kw_only=True)
class TurnEnd:
    """A turn ended. ``message`` is None only if the turn was aborted before its request."""

    type: ClassVar[Literal["turn_end"]] = "turn_end"
    message: AssistantMessage | None
    tool_results: tuple[ToolResultMessage, ...] = ()
    stats: TurnStats = attrs.field(factory=TurnStats)


@attrs.frozen(kw_only=True)
class AgentEnd:
    """The run ended: always the last event, exactly once."""

    type: ClassVar[Literal["agent_end"]] = "agent_end"
    reason: EndReason
    messages: tuple[Message, ...] = ()


AgentEvent: TypeAlias = (
    AgentStart
    | TurnStart
    | MessageStart
    | MessageUpdate
    | MessageEnd
    | ToolExecutionStart
    | ToolExecutionUpdate
    | ToolExecutionEnd
    | TurnEnd
    | AgentEnd
)
