"""Scripts, the values: a whole scenario for one run of the loop, as plain data.

Theory of operation
-------------------
A script is plain data — frozen attrs values, no callables — so Hypothesis can generate
and shrink it, and a failing one prints as a scenario (``describe()``, also its ``repr``)
rather than as nested objects. It says:

* what the model replies, turn by turn (:class:`ReplyScript`: stop reason, text, tool
  calls, how long the stream stays in flight, a stream that breaks);
* what each tool call does (:class:`CallScript`: which tool — or an unknown name —,
  valid or invalid arguments, latency, progress updates, success, failure, a hang that
  only a timeout ends, a request to terminate; what ``before_tool_call`` and
  ``after_tool_call`` do to it). The behaviour travels *in the call's arguments*, so the
  scripted tools are stateless and the transcript says what happened;
* what happens around the run: steering and follow-up messages arriving at given times
  (:class:`Arrival`), an abort or interrupts at an event or a time
  (:class:`AbortScript`, :class:`InterruptScript`), an outer deadline, a run-level hook
  that raises (:class:`HookFailure`), the ``LoopConfig`` limits.

The test kit's modules, bottom-up (each imports only from those before it):
``_script_values`` (this module: the parts, and :class:`Scenario`, every field of a
script), ``_script_run`` (:class:`ScriptRun`, what one run did, and its checks),
``_script_rig`` (:class:`ScriptRig`, the live objects, and the driver of one run), and
``_script`` (the public :class:`Script`: a ``Scenario`` that can ``build()`` its rig and
``run()``; its docstring lists every field). The driver needs the values and the
values' ``run()`` needs the driver, so the methods live in the class one layer up
instead of an import cycle.

Nothing here imports Hypothesis.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import attrs

from .._core import (
    AssistantMessage,
    CustomMessage,
    Message,
    StopReason,
    Text,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ._scripted import events_for

if TYPE_CHECKING:
    from .._core import events as ev

__all__ = [
    "CALL_SCHEMA",
    "SERIAL_TOOL",
    "WORK_TOOL",
    "AbortScript",
    "Arrival",
    "Behaviour",
    "CallHook",
    "CallScript",
    "HookFailure",
    "InterruptScript",
    "QueueMode",
    "QueueName",
    "ReplyScript",
    "RunHook",
    "Scenario",
    "StreamFault",
    "paired_history",
    "seconds",
]

Behaviour: TypeAlias = Literal["ok", "fail", "hang", "terminate"]
CallHook: TypeAlias = Literal[
    "block", "block_terminate", "before_raises", "after_raises", "after_marks_error"
]
RunHook: TypeAlias = Literal[
    "transform_context",
    "steering_poll",
    "follow_up_poll",
    "prepare_next_turn",
    "should_stop_after_turn",
    "prepare_request",
]
StreamFault: TypeAlias = Literal["truncated", "raises"]
QueueName: TypeAlias = Literal["steer", "follow_up"]
QueueMode: TypeAlias = Literal["one_at_a_time", "all"]

WORK_TOOL = "work"
"""The scripted tool that runs in parallel with its siblings."""
SERIAL_TOOL = "serial"
"""The scripted tool with ``execution_mode="sequential"``: its batches run one at a time."""

CALL_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "latency": {"type": "number", "minimum": 0},
        "progress": {"type": "integer", "minimum": 0},
        "behaviour": {"enum": ["ok", "fail", "hang", "terminate"]},
    },
    "required": ["latency", "progress", "behaviour"],
    "additionalProperties": False,
}
"""The arguments of both scripted tools: what the call does."""

_INVALID_ARGUMENTS: Mapping[str, Any] = {"latency": "soon", "progress": -1}
"""Arguments no lenient conversion can save: a word for a number, a negative count, and
``behaviour`` missing."""


def _tuple(value: Any) -> tuple[Any, ...]:
    return value if type(value) is tuple else tuple(value)


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else f"{text[:limit]}…"


def seconds(t: float) -> str:
    return f"{t:g}s"


# --- the parts of a script --------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CallScript:
    """One tool call the model declares, and what the tool then does.

    Attributes:
        id: the call id.
        tool: ``"work"``, ``"serial"`` (a sequential tool), the name of one of the
            script's own ``tools`` (then ``args`` says what the call sends), or any other
            name (unknown: the call gets a ``not_found`` result).
        valid_arguments: False sends arguments that fail the schema (for a call to one
            of the script's own tools: what ``args`` was drawn as).
        args: the arguments sent to one of the script's own tools (the user's tools:
            their body decides what happens, so ``latency``, ``progress`` and
            ``behaviour`` do not apply); None for the scripted tools, whose arguments
            are built from those three fields.
        latency: virtual seconds the tool works before it answers.
        progress: progress updates reported, evenly spread over ``latency``.
        behaviour: ``ok`` answers; ``fail`` raises; ``hang`` never answers (only a
            timeout, an abort or a deadline ends it); ``terminate`` answers asking the
            loop to stop after the batch.
        hook: what the per-call hooks do to it: ``before_tool_call`` blocks it
            (``block``; ``block_terminate`` also asks the loop to stop) or raises
            (``before_raises``); ``after_tool_call`` raises (``after_raises``) or turns
            the result into an error (``after_marks_error``).
    """

    id: str
    tool: str = WORK_TOOL
    valid_arguments: bool = True
    latency: float = 0.0
    progress: int = 0
    behaviour: Behaviour = "ok"
    hook: CallHook | None = None
    args: Mapping[str, Any] | None = None

    @property
    def known_tool(self) -> bool:
        """The call names a tool the script provides (scripted, or the user's own)."""
        return self.args is not None or self.tool in (WORK_TOOL, SERIAL_TOOL)

    def arguments(self) -> dict[str, Any]:
        """The JSON arguments the model sends (a scripted tool reads its behaviour from
        them)."""
        if self.args is not None:
            return dict(self.args)
        if not self.valid_arguments:
            return dict(_INVALID_ARGUMENTS)
        return {"latency": self.latency, "progress": self.progress, "behaviour": self.behaviour}

    def tool_call(self) -> ToolCall:
        """The ``ToolCall`` the model declares for this call."""
        return ToolCall(id=self.id, name=self.tool, arguments=self.arguments())

    def describe(self) -> str:
        """The call in one readable line, as a failing example prints it."""
        head = f"call {self.id} {self.tool}"
        if not self.known_tool:
            return f"{head} (unknown tool)"
        if self.args is not None:
            which = "valid" if self.valid_arguments else "invalid"
            line = f"{head} with {which} arguments {_clip(json.dumps(self.args))}"
            return line + (f" [{_HOOK_TEXT[self.hook]}]" if self.hook is not None else "")
        if not self.valid_arguments:
            return f"{head} with invalid arguments"
        detail = [f"latency {seconds(self.latency)}"]
        if self.progress:
            detail.append(f"{self.progress} progress update{'s' * (self.progress > 1)}")
        verb = {"ok": "answers", "fail": "raises", "hang": "hangs", "terminate": "terminates"}
        line = f"{head}: {', '.join(detail)}, then {verb[self.behaviour]}"
        if self.hook is not None:
            line += f" [{_HOOK_TEXT[self.hook]}]"
        return line


_HOOK_TEXT: Mapping[str, str] = {
    "block": "before_tool_call blocks it",
    "block_terminate": "before_tool_call blocks it and asks to terminate",
    "before_raises": "before_tool_call raises",
    "after_raises": "after_tool_call raises",
    "after_marks_error": "after_tool_call marks it an error",
}


@attrs.frozen(kw_only=True)
class HookFailure:
    """A run-level hook that raises on its ``at``-th call (0-based): the run must end
    with ``AgentRunError``, its transcript paired.

    Attributes:
        hook: which hook raises: ``transform_context``, ``steering_poll``,
            ``follow_up_poll``, ``prepare_next_turn``, ``should_stop_after_turn`` or
            ``prepare_request``.
        at: on which of its calls (0-based).
    """

    hook: RunHook
    at: int = 0

    def describe(self) -> str:
        """The failure in one readable line."""
        return f"{self.hook} raises on call {self.at}"


@attrs.frozen(kw_only=True)
class ReplyScript:
    """One reply of the model.

    Attributes:
        stop_reason: the reply's stop reason.
        calls: the tool calls it declares, in order (ids may repeat: a model bug).
        text: a text block before the calls ("" for none).
        latency: virtual seconds the stream stays in flight after its first event.
        fault: ``truncated`` — the stream ends without ``Done``/``Error``; ``raises`` —
            the provider raises in the middle of the stream.
    """

    stop_reason: StopReason
    calls: tuple[CallScript, ...] = attrs.field(default=(), converter=_tuple)
    text: str = ""
    latency: float = 0.0
    fault: StreamFault | None = None

    def message(self, *, step: int = 0) -> AssistantMessage:
        """The reply as the model means it (before any stream fault)."""
        content: list[Text | ToolCall] = [Text(text=self.text)] if self.text else []
        content.extend(c.tool_call() for c in self.calls)
        failed = self.stop_reason in ("error", "aborted")
        return AssistantMessage(
            content=tuple(content),
            stop_reason=self.stop_reason,
            error_message=f"scripted {self.stop_reason}" if failed else None,
            usage=Usage(input_tokens=10 * (step + 1), output_tokens=10),
            model="scripted",
            timestamp=float(step),
        )

    def events(self, *, step: int = 0, chunk_size: int | None = None) -> list[ev.AssistantEvent]:
        """The stream the model sends for this reply (a truncated one stops short)."""
        events = events_for(self.message(step=step), chunk_size=chunk_size)
        if self.fault == "truncated":
            return events[:-1]
        return events

    def describe(self, step: int) -> list[str]:
        """The reply (request number ``step``) and its calls, as readable lines."""
        head: list[str] = [self.stop_reason]
        if self.text:
            head.append(f"text {self.text!r}")
        if self.latency:
            head.append(f"streams for {seconds(self.latency)}")
        if self.fault == "truncated":
            head.append("stream ends without Done")
        elif self.fault == "raises":
            head.append("provider raises mid-stream")
        if not self.calls:
            head.append("no calls")
        lines = [f"reply {step}: {', '.join(head)}"]
        seen: set[str] = set()
        for call in self.calls:
            line = call.describe() if call.id not in seen else f"call {call.id} again"
            if call.id in seen:
                line += "  <- duplicate id"
            seen.add(call.id)
            lines.append(f"  {line}")
        return lines


@attrs.frozen(kw_only=True)
class Arrival:
    """A message the application queues while the run goes on.

    Attributes:
        at: virtual seconds after the run starts (0: already queued at the start).
        queue: ``steer`` (read by the steering poll) or ``follow_up``.
        text: the user message's text (unique within a script).
    """

    at: float
    queue: QueueName
    text: str

    def describe(self) -> str:
        """The arrival in one readable line."""
        what = "steering" if self.queue == "steer" else "follow-up"
        return f"at t={seconds(self.at)}: {what} message {self.text!r} queued"


@attrs.frozen(kw_only=True)
class AbortScript:
    """When the run is aborted: at an event (the consumer aborts when it receives event
    number ``after_event``, 0-based) or at a time; ``grace`` lets running tools finish.

    Exactly one of ``after_event`` and ``at_time`` is set (else ``ValueError``).

    Attributes:
        after_event: abort when the consumer receives this event (0-based).
        at_time: abort at this many virtual seconds after the start.
        grace: ``abort(grace=...)``: seconds running tools may still finish.
        reason: ``abort(reason)``: the text of the aborted results.
    """

    after_event: int | None = None
    at_time: float | None = None
    grace: float | None = None
    reason: str | None = None

    def __attrs_post_init__(self) -> None:
        if (self.after_event is None) == (self.at_time is None):
            raise ValueError("an AbortScript needs exactly one of after_event and at_time")

    def describe(self) -> str:
        """The abort in one readable line."""
        if self.after_event is not None:
            when = f"when the consumer receives event {self.after_event}"
        else:
            assert self.at_time is not None
            when = f"at t={seconds(self.at_time)}"
        grace = f", grace {seconds(self.grace)}" if self.grace is not None else ""
        return f"abort {when}{grace}"


@attrs.frozen(kw_only=True)
class InterruptScript:
    """When ``run.interrupt()`` is called (what ``steer(..., interrupt=True)`` does): at
    an event (0-based, as received by the consumer) or at a time. The run goes on.

    Exactly one of ``after_event`` and ``at_time`` is set (else ``ValueError``).

    Attributes:
        after_event: interrupt when the consumer receives this event (0-based).
        at_time: interrupt at this many virtual seconds after the start.
    """

    after_event: int | None = None
    at_time: float | None = None

    def __attrs_post_init__(self) -> None:
        if (self.after_event is None) == (self.at_time is None):
            raise ValueError("an InterruptScript needs exactly one of after_event and at_time")

    def describe(self) -> str:
        """The interrupt in one readable line."""
        if self.after_event is not None:
            return f"interrupt when the consumer receives event {self.after_event}"
        assert self.at_time is not None
        return f"interrupt at t={seconds(self.at_time)}"


def _brief(message: Message) -> str:
    if type(message) is AssistantMessage:
        ids = [c.id for c in message.tool_calls]
        return f"assistant[calls {', '.join(ids)}]" if ids else "assistant"
    if type(message) is ToolResultMessage:
        return f"tool_result {message.tool_call_id}"
    if type(message) is CustomMessage:
        return f"custom {message.kind}"
    return message.role


@attrs.frozen(kw_only=True, repr=False)
class Scenario:
    """Every field of a whole scenario for one run: the data of the public ``Script``
    (whose docstring lists the fields), without its ``build()`` and ``run()``."""

    replies: tuple[ReplyScript, ...] = attrs.field(default=(), converter=_tuple)
    prompt: str | None = "go"
    history: tuple[Message, ...] = attrs.field(default=(), converter=_tuple)
    max_steps: int = 32
    tool_timeout: float | None = None
    tool_execution: Literal["parallel", "sequential"] = "parallel"
    max_concurrency: int | None = None
    continue_after_length: bool = False
    max_output_tokens: int | None = None
    run_timeout: float | None = None
    arrivals: tuple[Arrival, ...] = attrs.field(default=(), converter=_tuple)
    steering_mode: QueueMode = "one_at_a_time"
    follow_up_mode: QueueMode = "one_at_a_time"
    abort: AbortScript | None = None
    interrupts: tuple[InterruptScript, ...] = attrs.field(default=(), converter=_tuple)
    deadline: float | None = None
    stop_after_turn: int | None = None
    hook_failure: HookFailure | None = None
    chunk_size: int | None = None
    driver: Literal["channel", "callback"] = "channel"
    tools: tuple[Tool, ...] = attrs.field(default=(), converter=_tuple)

    def __attrs_post_init__(self) -> None:
        names = [t.name for t in self.tools]
        clash = sorted({n for n in names if names.count(n) > 1 or n in (WORK_TOOL, SERIAL_TOOL)})
        if clash:
            raise ValueError(
                f"tool name(s) {clash} used twice, or by the scripted tools "
                f"{WORK_TOOL!r} and {SERIAL_TOOL!r}: give each tool its own name"
            )
        if self.driver == "callback" and (
            self.abort is not None or self.interrupts or self.deadline is not None
        ):
            raise ValueError(
                "the callback driver has no handle to abort or interrupt, and no deadline"
            )

    def describe(self) -> str:
        """The scenario in a few readable lines."""
        lines = ["Script:"]
        start = f"prompt {self.prompt!r}" if self.prompt is not None else "no prompt"
        if self.history:
            start += f" after history [{', '.join(_brief(m) for m in self.history)}]"
        lines.append(f"  {start}")
        config = []
        defaults = _SCENARIO_DEFAULTS
        for name in (
            "max_steps",
            "tool_timeout",
            "max_concurrency",
            "max_output_tokens",
            "run_timeout",
            "chunk_size",
        ):
            value = getattr(self, name)
            if value != getattr(defaults, name):
                config.append(
                    f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}"
                )
        if self.tool_execution != "parallel":
            config.append("sequential tools")
        if self.continue_after_length:
            config.append("continue_after_length")
        if self.steering_mode != "one_at_a_time":
            config.append("steering_mode=all")
        if self.follow_up_mode != "one_at_a_time":
            config.append("follow_up_mode=all")
        if self.driver == "callback":
            config.append("run_agent_loop with on_event")
        if self.tools:
            config.append(f"own tools {', '.join(t.name for t in self.tools)}")
        if config:
            lines.append(f"  config: {', '.join(config)}")
        for step, reply in enumerate(self.replies):
            lines.extend(f"  {line}" for line in reply.describe(step))
        lines.append(f"  (then the model has no reply left: request {len(self.replies)} errors)")
        lines.extend(f"  {a.describe()}" for a in sorted(self.arrivals, key=lambda a: a.at))
        lines.extend(f"  {i.describe()}" for i in self.interrupts)
        if self.abort is not None:
            lines.append(f"  {self.abort.describe()}")
        if self.deadline is not None:
            lines.append(f"  outer deadline at t={seconds(self.deadline)}")
        if self.stop_after_turn is not None:
            lines.append(f"  should_stop_after_turn says stop on call {self.stop_after_turn}")
        if self.hook_failure is not None:
            lines.append(f"  {self.hook_failure.describe()}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.describe()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        # Hypothesis (and IPython) print a falsifying example through this.
        p.text(self.describe())


_SCENARIO_DEFAULTS = Scenario()


def paired_history(
    *, with_tools: bool, pending: Literal["none", "user", "results"]
) -> tuple[Message, ...]:
    """A small, paired conversation to start from (ids ``h0``, ``h1`` never clash with a
    script's own). ``pending`` says how it ends: ``none`` after an answer (a prompt must
    follow), ``user`` with an unanswered question, ``results`` right after tool results
    (a run may continue from either of the last two)."""
    out: list[Message] = [UserMessage.text("earlier question", timestamp=0.0)]
    if with_tools or pending == "results":
        out.append(
            AssistantMessage(
                content=(
                    ToolCall(id="h0", name=WORK_TOOL, arguments={}),
                    ToolCall(id="h1", name="gone", arguments={"x": 1}),
                ),
                stop_reason="tool_use",
                timestamp=0.0,
            )
        )
        for cid, name in (("h0", WORK_TOOL), ("h1", "gone")):
            out.append(
                ToolResultMessage(
                    tool_call_id=cid,
                    tool_name=name,
                    content=(Text(text=f"{cid} done"),),
                    timestamp=0.0,
                )
            )
        if pending == "results":
            return tuple(out)
    out.append(
        AssistantMessage(content=(Text(text="earlier answer"),), stop_reason="stop", timestamp=0.0)
    )
    out.append(CustomMessage(kind="note", content={"seen": True}, timestamp=0.0))
    if pending == "user":
        out.append(UserMessage.text("next question", timestamp=0.0))
    return tuple(out)
