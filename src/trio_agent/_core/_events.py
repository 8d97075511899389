"""Events: what a model stream says (assistant events) and what a run says (loop events),
and how a run ended (``AgentRunResult``).

Both are closed unions of frozen attrs classes with a ``type`` wire tag. Events are
immutable snapshots: a consumer that keeps one never sees it change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeAlias

import attrs
from typing_extensions import TypeVar

from ._deferral import Deferral, DeferredCall
from ._messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    Usage,
    total_cost,
)

__all__ = [
    "AgentEnd",
    "AgentEvent",
    "AgentRunResult",
    "AgentStart",
    "AssistantEvent",
    "CallTiming",
    "ContextCompacted",
    "Done",
    "EndReason",
    "Error",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "NoOutput",
    "OutputUpdate",
    "RecordMarker",
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
    """The reply begins: the first event of a model's stream.

    A stream whose first event is a block event counts as having started anyway.

    Attributes:
        type: ``"start"``, the tag in JSON.
    """

    type: ClassVar[Literal["start"]] = "start"


@attrs.frozen(kw_only=True)
class TextStart:
    """A text block opens at position ``index`` of the reply.

    Attributes:
        type: ``"text_start"``, the tag in JSON.
        index: the block's position in the reply's ``content`` (0-based).
    """

    type: ClassVar[Literal["text_start"]] = "text_start"
    index: int


@attrs.frozen(kw_only=True)
class TextDelta:
    """A piece of text for the text block at ``index``; for live display.

    Attributes:
        type: ``"text_delta"``, the tag in JSON.
        index: the block's position in the reply's ``content`` (0-based).
        delta: the text that follows what the block holds so far.
    """

    type: ClassVar[Literal["text_delta"]] = "text_delta"
    index: int
    delta: str


@attrs.frozen(kw_only=True)
class TextEnd:
    """The text block at ``index`` is complete.

    Attributes:
        type: ``"text_end"``, the tag in JSON.
        index: the block's position in the reply's ``content`` (0-based).
        text: the whole text of the block.
    """

    type: ClassVar[Literal["text_end"]] = "text_end"
    index: int
    text: str


@attrs.frozen(kw_only=True)
class ThinkingStart:
    """A thinking (reasoning) block opens at position ``index`` of the reply.

    Attributes:
        type: ``"thinking_start"``, the tag in JSON.
        index: the block's position in the reply's ``content`` (0-based).
    """

    type: ClassVar[Literal["thinking_start"]] = "thinking_start"
    index: int


@attrs.frozen(kw_only=True)
class ThinkingDelta:
    """A piece of reasoning for the thinking block at ``index``; for live display.

    Attributes:
        type: ``"thinking_delta"``, the tag in JSON.
        index: the block's position in the reply's ``content`` (0-based).
        delta: the reasoning text that follows what the block holds so far.
    """

    type: ClassVar[Literal["thinking_delta"]] = "thinking_delta"
    index: int
    delta: str


@attrs.frozen(kw_only=True)
class ThinkingEnd:
    """The thinking block at ``index`` is complete.

    Attributes:
        type: ``"thinking_end"``, the tag in JSON.
        index: the block's position in the reply's ``content`` (0-based).
        thinking: the whole reasoning text of the block.
        signature: the provider's opaque signature of the block, sent back with it on
            later requests; None when the provider gives none.
    """

    type: ClassVar[Literal["thinking_end"]] = "thinking_end"
    index: int
    thinking: str
    signature: str | None = None


@attrs.frozen(kw_only=True)
class ToolCallStart:
    """A tool call opens at position ``index`` of the reply; its arguments follow.

    Attributes:
        type: ``"toolcall_start"``, the tag in JSON.
        index: the block's position in the reply's ``content`` (0-based).
        id: the call id the model gave (the loop may rename a reused one before the
            reply enters the transcript).
        name: the name of the tool the model calls.
    """

    type: ClassVar[Literal["toolcall_start"]] = "toolcall_start"
    index: int
    id: str
    name: str


@attrs.frozen(kw_only=True)
class ToolCallDelta:
    """A raw fragment of the argument JSON of the tool call at ``index``.

    The fragments joined are the call's arguments as JSON text; a fragment alone is
    usually not valid JSON.

    Attributes:
        type: ``"toolcall_delta"``, the tag in JSON.
        index: the block's position in the reply's ``content`` (0-based).
        delta: the next piece of the argument JSON.
    """

    type: ClassVar[Literal["toolcall_delta"]] = "toolcall_delta"
    index: int
    delta: str


@attrs.frozen(kw_only=True)
class ToolCallEnd:
    """The tool call at ``index`` is complete, its arguments parsed.

    Attributes:
        type: ``"toolcall_end"``, the tag in JSON.
        index: the block's position in the reply's ``content`` (0-based).
        tool_call: the finished call, as it appears in the reply.
    """

    type: ClassVar[Literal["toolcall_end"]] = "toolcall_end"
    index: int
    tool_call: ToolCall


@attrs.frozen(kw_only=True)
class Done:
    """The reply ended normally: the last event of the stream.

    ``message`` is the truth; the block events before it are for live display.

    Attributes:
        type: ``"done"``, the tag in JSON.
        message: the finished reply, with its stop reason and token usage.
    """

    type: ClassVar[Literal["done"]] = "done"
    message: AssistantMessage


@attrs.frozen(kw_only=True)
class Error:
    """The reply failed or was aborted; ``message`` keeps the partial content.

    Only finished blocks and text belong in it: a tool call whose arguments never
    finished streaming is left out and named in ``error_message`` (``...; unfinished
    tool call(s) dropped: <name> (<id>)``), as the loop does for a reply it cuts short.

    Attributes:
        type: ``"error"``, the tag in JSON.
        message: the partial reply, with stop reason ``error`` or ``aborted`` and
            ``error_message`` saying what failed.
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
"""What a model's stream yields: ``Start``, block events, then one ``Done`` or ``Error``.

Block events carry the block's ``index`` in the reply; the terminal event's message is
the truth. A stream that ends without a terminal event is taken as an ``error`` reply.
"""

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
    "deferred",
    "context_overflow",
    "output_invalid",
]
"""Why a run ended, as ``AgentEnd.reason`` and ``AgentRunResult.reason`` give it.

- ``stop``: the model answered without calls and nothing was queued.
- ``length``: the reply was cut at the model's token limit.
- ``error``: the model or its transport failed (the reply's ``error_message`` says
  how), or a hook or event sink raised (then ``AgentRunError`` is raised too).
- ``aborted``: ``abort()``, or a cancel from outside the run.
- ``max_steps``: ``LoopConfig.max_steps`` requests were made.
- ``stopped``: ``LoopConfig.should_stop_after_turn`` returned true.
- ``terminated``: every result of the last batch asked to end the run.
- ``usage_limit``: the next request would go over ``LoopConfig.max_input_tokens`` or
  ``max_output_tokens``.
- ``timeout``: the run took ``LoopConfig.run_timeout`` seconds (a fleet's
  ``task_timeout`` ends its tasks this way); cleaned up as an abort.
- ``deferred``: calls wait for a decision (``AgentRunResult.deferred``); they have no
  result yet, and ``resume`` answers them before any further request.
- ``context_overflow``: the provider refused a request as longer than the model's
  context window, and either no context policy (``LoopConfig.context``) was set or the
  request it compacted once more was refused again; ``error_message`` says so.
- ``output_invalid``: the run asked for a structured output (``output_type``) and the
  model's answer was still invalid after ``StructuredOutput.retries`` retries; the
  result's ``error_message`` names the last failure.

Whatever the reason but ``deferred``, every tool call in the transcript has its result;
a ``deferred`` run's waiting calls have none until they are answered.
"""

ToolOutcome: TypeAlias = Literal[
    "ok", "error", "not_found", "invalid_arguments", "blocked", "timed_out", "aborted", "skipped"
]
"""How one tool call ended, as ``ToolExecutionEnd.outcome`` gives it.

- ``ok``: the tool ran and returned (its result may still be an error it returned).
- ``error``: the tool raised, or a per-call hook failed.
- ``not_found``: no tool of that name.
- ``invalid_arguments``: the arguments failed conversion or JSON-Schema validation.
- ``blocked``: ``before_tool_call`` blocked it.
- ``timed_out``: it ran past its timeout.
- ``aborted``: the run was aborted while it waited or ran.
- ``skipped``: the reply was cut short, or ``interrupt()`` stopped the batch.

Every outcome but ``ok`` has ``is_error=True``.
"""


class _Snapshot(Protocol):
    """A partial assistant message made in O(1), built into a message when read."""

    def materialize(self) -> AssistantMessage: ...


@attrs.frozen(kw_only=True)
class AgentStart:
    """A run begins: always its first event, exactly once.

    Attributes:
        type: ``"agent_start"``, the tag in JSON.
    """

    type: ClassVar[Literal["agent_start"]] = "agent_start"


@attrs.frozen(kw_only=True)
class TurnStart:
    """A turn begins: its pending messages are appended next, then one model request.

    A turn is one model request and the batch of tool calls its reply asks for.

    Attributes:
        type: ``"turn_start"``, the tag in JSON.
        index: the turn's number in the run, from 0.
    """

    type: ClassVar[Literal["turn_start"]] = "turn_start"
    index: int


@attrs.frozen(kw_only=True)
class MessageStart:
    """A message begins: a user, custom or tool-result message about to enter the
    transcript, or the model's reply about to stream.

    Each is followed by the message's ``MessageEnd``; a reply's ``MessageUpdate`` events
    come in between.

    Attributes:
        type: ``"message_start"``, the tag in JSON.
        message: the message; for the model's reply, an empty assistant message.
    """

    type: ClassVar[Literal["message_start"]] = "message_start"
    message: Message


@attrs.frozen(kw_only=True, eq=False)
class MessageUpdate:
    """One assistant stream event, with the partial message as it stood after it.

    ``message`` is built on first access from an O(1) snapshot, so streaming N deltas
    costs O(total size) however many updates are kept.

    Attributes:
        type: ``"message_update"``, the tag in JSON.
        event: the assistant event the model streamed (a ``TextDelta``, a
            ``ToolCallEnd``...).
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
class OutputUpdate:
    """The structured output as it streams, for a form that fills in: the value the
    answer's JSON holds so far, parsed best effort.

    Sent in a run given ``output_type``, after the ``MessageUpdate`` of each piece of
    the answer (the final-answer call's arguments in tool mode, the reply's text in the
    other modes) that changes what can be read of it. The value is raw JSON data, not
    validated and not the output's type: open strings as far as they go, open arrays
    and objects closed, an incomplete trailing part left out. The ``output`` of the
    run's result is the only validated value. Like ``MessageUpdate``, it may be dropped
    by a subscriber that drops updates.

    Attributes:
        type: ``"output_update"``, the tag in JSON.
        partial: the answer so far (a dict for an object answer; for a type whose
            schema is wrapped, such as a list, the list).
    """

    type: ClassVar[Literal["output_update"]] = "output_update"
    partial: Any


@attrs.frozen(kw_only=True)
class MessageEnd:
    """A message is finished and has entered the transcript.

    The ``MessageEnd`` events of a run, in order, are exactly its result's
    ``messages``.

    Attributes:
        type: ``"message_end"``, the tag in JSON.
        message: the finished message, as the transcript holds it (a reply that ended
            early keeps what it had, with stop reason ``aborted`` or ``error``).
    """

    type: ClassVar[Literal["message_end"]] = "message_end"
    message: Message


@attrs.frozen(kw_only=True)
class ToolExecutionStart:
    """A call enters the batch, before it is looked up or its arguments checked.

    Every call of a reply gets one, in declaration order, also a call that is then
    refused (unknown tool, invalid arguments, blocked) or skipped; its
    ``ToolExecutionEnd`` follows later.

    Attributes:
        type: ``"tool_execution_start"``, the tag in JSON.
        call_id: the call's id (the one in the transcript).
        tool_name: the name the model called.
        args: the raw arguments the model sent, before conversion and validation.
    """

    type: ClassVar[Literal["tool_execution_start"]] = "tool_execution_start"
    call_id: str
    tool_name: str
    args: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class ToolExecutionUpdate:
    """Progress of a running call: what its tool passed to ``ToolContext.report_progress``.

    A call's updates come in the order they were reported, after its
    ``ToolExecutionStart`` and never after its ``ToolExecutionEnd``.

    Attributes:
        type: ``"tool_execution_update"``, the tag in JSON.
        call_id: the call's id.
        tool_name: the name of the tool.
        partial: the value the tool reported, as it gave it.
    """

    type: ClassVar[Literal["tool_execution_update"]] = "tool_execution_update"
    call_id: str
    tool_name: str
    partial: Any


@attrs.frozen(kw_only=True)
class ToolExecutionEnd:
    """A call has its result: exactly one per ``ToolExecutionStart``.

    In a parallel batch these come in completion order; the result messages enter the
    transcript afterwards, in declaration order. A call cancelled by an abort or an
    interrupt gets one too, with outcome ``aborted`` or ``skipped``.

    Attributes:
        type: ``"tool_execution_end"``, the tag in JSON.
        call_id: the call's id.
        tool_name: the name the model called.
        result: the call's result message, as it will enter the transcript.
        is_error: whether the result is an error (true for every outcome but ``ok``,
            and for an ``ok`` call whose tool returned an error result).
        outcome: how the call ended (see ``ToolOutcome``).
        duration: seconds the tool's ``execute`` ran, on the trio clock (monotonic;
            exact under a test's virtual clock): from its start until it returned,
            raised, timed out or was cut by an abort or interrupt — ``before_tool_call``,
            ``after_tool_call`` and any wait for a concurrency slot excluded. None when
            ``execute`` never started (the call was refused, blocked or skipped).
    """

    type: ClassVar[Literal["tool_execution_end"]] = "tool_execution_end"
    call_id: str
    tool_name: str
    result: ToolResultMessage
    is_error: bool
    outcome: ToolOutcome
    duration: float | None = None


@attrs.frozen(kw_only=True)
class CallTiming:
    """When one call of a batch ran, on the trio clock (seconds).

    Attributes:
        call_id: the call's id.
        tool_name: the name of the tool.
        start: when the call began running (after any wait for a slot).
        end: when it finished.
    """

    call_id: str
    tool_name: str
    start: float
    end: float
    waited: float = 0.0
    """Time spent waiting for a ``max_concurrency`` slot before ``start``."""

    @property
    def duration(self) -> float:
        """``end - start``: how long the call ran, in seconds."""
        return self.end - self.start


@attrs.frozen(kw_only=True)
class TurnStats:
    """Statistics of one tool batch (all times in seconds, on the trio clock).

    Attributes:
        wall_time: from the batch's start to its end.
        peak_concurrency: the most calls running at once.
        calls: one ``CallTiming`` per call that ran to its end, in declaration order
            (calls refused before running, or cancelled, have none).
    """

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
    """A turn ended: its reply is in and every call of its batch has its result.

    Attributes:
        type: ``"turn_end"``, the tag in JSON.
        message: the turn's reply; None only if the turn was aborted before its request.
        tool_results: the batch's results, in declaration order (empty when the reply
            asked for no call).
        stats: the batch's statistics (zeros when no batch ran).
    """

    type: ClassVar[Literal["turn_end"]] = "turn_end"
    message: AssistantMessage | None
    tool_results: tuple[ToolResultMessage, ...] = ()
    stats: TurnStats = attrs.field(factory=TurnStats)


@attrs.frozen(kw_only=True)
class AgentEnd:
    """The run ended: always the last event, exactly once, however the run ended.

    It is emitted also when the run fails (reason ``error``, then ``AgentRunError`` is
    raised) or is cancelled from outside (reason ``aborted``, delivered if the consumer
    takes it within ``LoopConfig.cleanup_timeout``). When it is emitted every tool call in
    the transcript has its result.

    Attributes:
        type: ``"agent_end"``, the tag in JSON.
        reason: why the run ended (see ``EndReason``).
        messages: the messages the run added to the transcript, in order.
    """

    type: ClassVar[Literal["agent_end"]] = "agent_end"
    reason: EndReason
    messages: tuple[Message, ...] = ()


@attrs.frozen(kw_only=True)
class RecordMarker:
    """What a run asks a transcript writer to record beside its messages: a
    ``JsonlTranscript`` sink writes it as a marker line (``kind``, ``data``) before it
    returns; other consumers may ignore it. A run that ends ``deferred`` emits a
    ``deferral`` marker right before its ``AgentEnd``; a resumed run emits a
    ``decisions`` marker before any approved call runs.

    Attributes:
        type: ``"record_marker"``, the tag in JSON.
        kind: what it records.
        data: its content, a JSON object.
    """

    type: ClassVar[Literal["record_marker"]] = "record_marker"
    kind: str
    data: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class ContextCompacted:
    """The run's context policy (``LoopConfig.context``) compacted what the next request
    shows the model. The transcript itself is unchanged: only the request is shorter.

    Emitted inside a turn, after its pending messages and before its request (after a
    summary request, when the policy made one). A ``JsonlTranscript`` records it as a
    ``"compaction"`` marker line holding ``plan`` and the counts, from which the view
    can be rebuilt on load.

    Attributes:
        type: ``"context_compacted"``, the tag in JSON.
        policy: the policy that compacted (``"keep_recent"``, ``"elide_tool_outputs"``,
            ``"summarize"``, or several joined by ``+``).
        reason: ``"threshold"`` (the history passed the policy's limit) or
            ``"overflow"`` (the provider refused the last request as too long).
        tokens_before: the estimated prompt tokens of the whole history.
        tokens_after: the estimated prompt tokens of the compacted view.
        messages_before: the messages of the whole history.
        messages_after: the messages of the compacted view.
        usage: the tokens of the policy's own model request (a summary); zeros when it
            made none. Not counted in the run's usage: no message of the transcript
            holds them.
        plan: how the view is built from the history, as JSON data (see
            ``trio_agent.context.Plan``).
    """

    type: ClassVar[Literal["context_compacted"]] = "context_compacted"
    policy: str
    reason: Literal["threshold", "overflow"] = "threshold"
    tokens_before: int = 0
    tokens_after: int = 0
    messages_before: int = 0
    messages_after: int = 0
    usage: Usage = attrs.field(factory=Usage)
    plan: Mapping[str, Any] = attrs.field(factory=dict)


AgentEvent: TypeAlias = (
    AgentStart
    | TurnStart
    | MessageStart
    | MessageUpdate
    | MessageEnd
    | OutputUpdate
    | ToolExecutionStart
    | ToolExecutionUpdate
    | ToolExecutionEnd
    | TurnEnd
    | AgentEnd
    | RecordMarker
    | ContextCompacted
)
"""What a run reports: one of the loop event classes, each with its ``type`` tag.

A run emits ``AgentStart`` first and ``AgentEnd`` last, exactly once each; see the
events page of the guide for the full order.
"""


T = TypeVar("T", default=Any)


class NoOutput:
    """What a result holds in place of the output of a run that asked for one and
    ended without a valid one: reading ``output`` raises :meth:`error` (the one
    instance is ``_output.NO_OUTPUT``, whose error is an ``OutputError``)."""

    def error(self, result: AgentRunResult[Any]) -> Exception:
        """The error reading ``result.output`` raises."""
        raise NotImplementedError


@attrs.frozen(kw_only=True)
class AgentRunResult(Generic[T]):
    """How a run ended.

    ``AgentRunResult[T]``: a run given ``output_type=T`` (a class, or a
    ``StructuredOutput[T]``) returns one whose :attr:`output` is a ``T``; without
    ``output_type`` the output is None.

    Attributes:
        reason: why it ended.
        messages: the messages this run added, in transcript order.
        steps: model requests made.
        transcript: the working message list the run ended with (the context's messages,
            or what ``prepare_next_turn`` swapped in, plus everything appended since).
        undelivered: prompts, and messages a steering/follow-up poll returned, that never
            entered the transcript because the run ended first (the Agent puts polled ones
            back at the front of its queue).
        turns: the batch statistics of each turn, in order.
        error_message: the model's error, when the run ended on an ``error`` reply.
        usage: the token counts of this run's replies, summed (cache tokens included).
        deferral: when the run ended ``deferred``, its calls that wait and the results
            held back until they are answered (see ``resume``); else None.
        output: see :attr:`output` (given as ``output=`` when built).
    """

    reason: EndReason
    messages: tuple[Message, ...]
    steps: int
    transcript: tuple[Message, ...]
    undelivered: tuple[Message, ...] = ()
    turns: tuple[TurnStats, ...] = ()
    error_message: str | None = None
    usage: Usage = attrs.field(factory=Usage)
    deferral: Deferral | None = None
    _output: Any = attrs.field(default=None, alias="output")

    @property
    def deferred(self) -> tuple[DeferredCall, ...]:
        """The calls that wait for a decision (empty unless the run ended
        ``deferred``)."""
        return () if self.deferral is None else self.deferral.calls

    @property
    def cost(self) -> float | None:
        """What this run's replies cost in USD, each priced by its own model and
        provider (see ``Usage.cost``); None if one of them cannot be priced (a model
        the ``genai-prices`` table does not know, or the package is not installed).
        Computed on each access."""
        return total_cost(self.messages)

    @property
    def output(self) -> T:
        """The run's structured output: the validated value of its ``output_type``
        (None for a run without one). Not a checkpoint.

        Raises:
            OutputError: the run asked for an output and ended without a valid one
                (reason ``output_invalid``, or it ended first: aborted, an error,
                ``max_steps``...); the message says why.
        """
        value = self._output
        if isinstance(value, NoOutput):
            raise value.error(self)
        return value  # type: ignore[no-any-return]
