"""Scripts: a whole scenario for one run of the loop, as one readable value.

Theory of operation
-------------------
A :class:`Script` is plain data — frozen attrs values, no callables — so Hypothesis can
generate and shrink it, and a failing one prints as a scenario (``describe()``, also its
``repr``) rather than as nested objects. It says:

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

``script.build()`` turns it into a :class:`ScriptRig` — the ``ScriptedModel``, the tools,
the ``Context``, the ``LoopConfig`` and the queues — and ``await rig.run()`` (or simply
``await script.run()``) drives one real run under the current trio clock (use an
autojump clock: latencies are virtual seconds) and returns a :class:`ScriptRun` holding
everything the invariants need. ``ScriptRun.check()`` asserts them all.

Nothing here imports Hypothesis; the strategies that generate scripts live in
``_strategies``.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, TypeAlias, final

import attrs
import trio

from .. import _events as ev
from .._config import (
    AfterToolCallContext,
    AfterToolCallResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
    Context,
    LoopConfig,
    NextTurn,
    TurnContext,
)
from .._errors import AgentRunError
from .._loop import AgentRun, AgentRunResult, open_agent_loop, run_agent_loop
from .._messages import (
    AssistantMessage,
    CustomMessage,
    Message,
    StopReason,
    Text,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .._model import ModelRequest
from .._serde import dumps, loads
from .._tools import Tool, ToolContext, ToolOutput
from ._invariants import run_invariant_violations
from ._scripted import PausePoint, ScriptedModel, events_for

__all__ = [
    "AbortScript",
    "Arrival",
    "CallScript",
    "HookFailure",
    "InterruptScript",
    "ReplyScript",
    "Script",
    "ScriptRig",
    "ScriptRun",
    "ToolProbe",
    "live_tasks",
    "paired_history",
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


def _seconds(t: float) -> str:
    return f"{t:g}s"


# --- the parts of a script --------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CallScript:
    """One tool call the model declares, and what the tool then does.

    Attributes:
        id: the call id.
        tool: ``"work"``, ``"serial"`` (a sequential tool) or any other name (unknown:
            the call gets a ``not_found`` result).
        valid_arguments: False sends arguments that fail the schema.
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

    @property
    def known_tool(self) -> bool:
        return self.tool in (WORK_TOOL, SERIAL_TOOL)

    def arguments(self) -> dict[str, Any]:
        """The JSON arguments the model sends (the tool reads its behaviour from them)."""
        if not self.valid_arguments:
            return dict(_INVALID_ARGUMENTS)
        return {"latency": self.latency, "progress": self.progress, "behaviour": self.behaviour}

    def tool_call(self) -> ToolCall:
        return ToolCall(id=self.id, name=self.tool, arguments=self.arguments())

    def describe(self) -> str:
        head = f"call {self.id} {self.tool}"
        if not self.known_tool:
            return f"{head} (unknown tool)"
        if not self.valid_arguments:
            return f"{head} with invalid arguments"
        detail = [f"latency {_seconds(self.latency)}"]
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
    with ``AgentRunError``, its transcript paired."""

    hook: RunHook
    at: int = 0

    def describe(self) -> str:
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
        head: list[str] = [self.stop_reason]
        if self.text:
            head.append(f"text {self.text!r}")
        if self.latency:
            head.append(f"streams for {_seconds(self.latency)}")
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
        what = "steering" if self.queue == "steer" else "follow-up"
        return f"at t={_seconds(self.at)}: {what} message {self.text!r} queued"


@attrs.frozen(kw_only=True)
class AbortScript:
    """When the run is aborted: at an event (the consumer aborts when it receives event
    number ``after_event``, 0-based) or at a time; ``grace`` lets running tools finish."""

    after_event: int | None = None
    at_time: float | None = None
    grace: float | None = None
    reason: str | None = None

    def __attrs_post_init__(self) -> None:
        if (self.after_event is None) == (self.at_time is None):
            raise ValueError("an AbortScript needs exactly one of after_event and at_time")

    def describe(self) -> str:
        if self.after_event is not None:
            when = f"when the consumer receives event {self.after_event}"
        else:
            assert self.at_time is not None
            when = f"at t={_seconds(self.at_time)}"
        grace = f", grace {_seconds(self.grace)}" if self.grace is not None else ""
        return f"abort {when}{grace}"


@attrs.frozen(kw_only=True)
class InterruptScript:
    """When ``run.interrupt()`` is called (what ``steer(..., interrupt=True)`` does): at
    an event (0-based, as received by the consumer) or at a time. The run goes on."""

    after_event: int | None = None
    at_time: float | None = None

    def __attrs_post_init__(self) -> None:
        if (self.after_event is None) == (self.at_time is None):
            raise ValueError("an InterruptScript needs exactly one of after_event and at_time")

    def describe(self) -> str:
        if self.after_event is not None:
            return f"interrupt when the consumer receives event {self.after_event}"
        assert self.at_time is not None
        return f"interrupt at t={_seconds(self.at_time)}"


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
class Script:
    """A whole scenario for one run (see the module docstring).

    Attributes:
        replies: the model's replies, in request order; when they run out the model
            answers with an error.
        prompt: the prompt's text; ``None`` continues from ``history``.
        history: the caller's context messages (paired; they must end in a user,
            tool-result or custom message when ``prompt`` is None).
        max_steps, tool_timeout, tool_execution, max_concurrency,
            continue_after_length, max_output_tokens: the ``LoopConfig`` fields of the
            same names (each reply reports 10 output tokens).
        arrivals: steering and follow-up messages queued during the run.
        steering_mode, follow_up_mode: how many messages one poll takes.
        abort: when the run is aborted, if it is.
        interrupts: when the running batch or reply is interrupted (the run goes on).
        deadline: an outer cancel scope's deadline, virtual seconds after the start.
        stop_after_turn: ``should_stop_after_turn`` answers True on its call number
            ``stop_after_turn`` (0-based; the run then ends ``stopped``); None installs
            no such hook.
        hook_failure: a run-level hook that raises.
        chunk_size: text is streamed in deltas of this many characters.
        driver: ``channel`` (``open_agent_loop``, a consumer task) or ``callback``
            (``run_agent_loop`` with a plain ``on_event``; no abort, no deadline).
    """

    replies: tuple[ReplyScript, ...] = attrs.field(default=(), converter=_tuple)
    prompt: str | None = "go"
    history: tuple[Message, ...] = attrs.field(default=(), converter=_tuple)
    max_steps: int = 32
    tool_timeout: float | None = None
    tool_execution: Literal["parallel", "sequential"] = "parallel"
    max_concurrency: int | None = None
    continue_after_length: bool = False
    max_output_tokens: int | None = None
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

    def __attrs_post_init__(self) -> None:
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
        defaults = _SCRIPT_DEFAULTS
        for name in (
            "max_steps",
            "tool_timeout",
            "max_concurrency",
            "max_output_tokens",
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
            lines.append(f"  outer deadline at t={_seconds(self.deadline)}")
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

    def build(self) -> ScriptRig:
        """The model, tools, context, config and queues for one run of this script."""
        return ScriptRig(self)

    async def run(self) -> ScriptRun:
        """Build a rig and drive one run; see :meth:`ScriptRig.run`."""
        return await self.build().run()


_SCRIPT_DEFAULTS = Script()


# --- the rig: live objects for one run -------------------------------------------------


@attrs.define(eq=False)
class ToolProbe:
    """Which scripted calls entered ``execute`` and which left it (its ``finally``)."""

    started: list[str] = attrs.field(factory=list)
    finished: list[str] = attrs.field(factory=list)

    def unfinished(self) -> list[str]:
        left = collections.Counter(self.started)
        left.subtract(self.finished)
        return sorted(left.elements())


class _ClockedModel(ScriptedModel):
    """A ``ScriptedModel`` that also notes when (virtual time) each request came."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.request_times: list[float] = []

    def stream(self, request: ModelRequest) -> Any:
        self.request_times.append(trio.current_time())
        return super().stream(request)


def _make_tools(probe: ToolProbe) -> tuple[Tool, ...]:
    async def execute(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        probe.started.append(call.id)
        try:
            progress = int(args["progress"])
            pause = float(args["latency"]) / (progress + 1)
            for k in range(progress):
                await trio.sleep(pause)
                await ctx.report_progress({"done": k + 1, "of": progress})
            await trio.sleep(pause)
            behaviour = args["behaviour"]
            if behaviour == "fail":
                raise RuntimeError(f"{call.id} failed on purpose")
            if behaviour == "hang":
                await trio.sleep_forever()
            return ToolOutput(
                content=f"{call.id} done",
                details={"progress": progress},
                terminate=behaviour == "terminate",
            )
        finally:
            probe.finished.append(call.id)

    work = Tool(
        name=WORK_TOOL,
        description="Works for `latency` seconds, reporting `progress` updates.",
        parameters=CALL_SCHEMA,
        execute=execute,
    )
    serial = Tool(
        name=SERIAL_TOOL,
        description="Like work, but its batches run one call at a time.",
        parameters=CALL_SCHEMA,
        execute=execute,
        execution_mode="sequential",
    )
    return (work, serial)


def live_tasks() -> set[trio.lowlevel.Task]:
    """Every task of the current trio run (walked from the root task). Not a checkpoint."""
    root = trio.lowlevel.current_root_task()
    assert root is not None
    seen: set[trio.lowlevel.Task] = set()
    stack = [root]
    while stack:
        task = stack.pop()
        seen.add(task)
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return seen


@final
@attrs.define(eq=False)
class ScriptRig:
    """The live objects one run of a :class:`Script` needs. Build with ``script.build()``.

    Attributes:
        model: the ``ScriptedModel`` (it records ``requests``).
        context: the caller's ``Context`` (history and the two scripted tools).
        config: the ``LoopConfig`` (limits from the script, polls reading the queues).
        prompts: the prompt messages (empty when the script continues from history).
        probe: which calls entered and left their tool.
        queues: the steering and follow-up queues the polls read.
        polled: every message a poll returned, in order.
    """

    script: Script
    model: _ClockedModel = attrs.field(init=False)
    context: Context = attrs.field(init=False)
    config: LoopConfig = attrs.field(init=False)
    prompts: tuple[Message, ...] = attrs.field(init=False)
    probe: ToolProbe = attrs.field(init=False, factory=ToolProbe)
    queues: dict[QueueName, collections.deque[Message]] = attrs.field(init=False)
    arrived: dict[QueueName, list[Message]] = attrs.field(init=False)
    taken: dict[QueueName, list[Message]] = attrs.field(init=False)
    polled: list[Message] = attrs.field(init=False, factory=list)
    events: list[ev.AgentEvent] = attrs.field(init=False, factory=list)
    event_times: list[float] = attrs.field(init=False, factory=list)
    requests_at_abort: int | None = attrs.field(init=False, default=None)
    _stalls: list[tuple[PausePoint, float]] = attrs.field(init=False, factory=list)
    _start: float = attrs.field(init=False, default=0.0)
    hook_calls: collections.Counter[str] = attrs.field(init=False, factory=collections.Counter)
    hook_failed: bool = attrs.field(init=False, default=False)
    interrupted: int = attrs.field(init=False, default=0)
    _call_hooks: dict[str, CallHook] = attrs.field(init=False, factory=dict)
    _handle: AgentRun | None = attrs.field(init=False, default=None)

    _QUEUES: ClassVar[tuple[QueueName, QueueName]] = ("steer", "follow_up")

    def __attrs_post_init__(self) -> None:
        script = self.script
        model = _ClockedModel(chunk_size=script.chunk_size)
        for step, reply in enumerate(script.replies):
            events = reply.events(step=step, chunk_size=script.chunk_size)
            model.add(events)
            if reply.fault == "raises":
                model.fail_at(step, len(events) // 2, RuntimeError("connection reset (scripted)"))
            if reply.latency > 0:
                self._stalls.append((model.pause_at(step, 1), reply.latency))
        self.model = model
        self.context = Context(
            system_prompt="You are a scripted test.",
            messages=script.history,
            tools=_make_tools(self.probe),
        )
        self.prompts = (
            (UserMessage.text(script.prompt, timestamp=0.0),) if script.prompt is not None else ()
        )
        self.queues = {q: collections.deque() for q in self._QUEUES}
        self.arrived = {q: [] for q in self._QUEUES}
        self.taken = {q: [] for q in self._QUEUES}
        self._call_hooks = {
            c.id: c.hook for r in script.replies for c in r.calls if c.hook is not None
        }
        failing = script.hook_failure.hook if script.hook_failure is not None else None
        hooks: dict[str, Any] = {}
        # Only the hooks a script needs are installed: the loop's paths without hooks
        # are exercised too.
        if self._call_hooks:
            hooks["before_tool_call"] = self._before_tool_call
            hooks["after_tool_call"] = self._after_tool_call
        if failing == "transform_context":
            hooks["transform_context"] = self._transform_context
        if failing == "prepare_next_turn":
            hooks["prepare_next_turn"] = self._prepare_next_turn
        if script.stop_after_turn is not None or failing == "should_stop_after_turn":
            hooks["should_stop_after_turn"] = self._should_stop_after_turn
        self.config = LoopConfig(
            max_steps=script.max_steps,
            tool_execution=script.tool_execution,
            max_concurrency=script.max_concurrency,
            tool_timeout=script.tool_timeout,
            continue_after_length=script.continue_after_length,
            max_output_tokens=script.max_output_tokens,
            get_steering_messages=lambda: self._poll("steer"),
            get_follow_up_messages=lambda: self._poll("follow_up"),
            **hooks,
        )

    # --- hooks ---------------------------------------------------------------------------

    def _hook(self, name: RunHook) -> int:
        """Count one call of a run-level hook; raise if the script says this one fails."""
        n = self.hook_calls[name]
        self.hook_calls[name] += 1
        failure = self.script.hook_failure
        if failure is not None and failure.hook == name and failure.at == n:
            self.hook_failed = True
            raise RuntimeError(f"{name} failed on purpose (call {n})")
        return n

    def _transform_context(self, messages: Sequence[Message]) -> Sequence[Message]:
        self._hook("transform_context")
        return messages

    def _prepare_next_turn(self, ctx: TurnContext) -> NextTurn | None:
        self._hook("prepare_next_turn")
        return None

    def _should_stop_after_turn(self, ctx: TurnContext) -> bool:
        return self._hook("should_stop_after_turn") == self.script.stop_after_turn

    async def _before_tool_call(self, ctx: BeforeToolCallContext) -> BeforeToolCallResult | None:
        await trio.lowlevel.checkpoint()  # a real hook may await: let it be a checkpoint
        hook = self._call_hooks.get(ctx.tool_call.id)
        if hook == "before_raises":
            raise RuntimeError(f"before_tool_call failed on purpose for {ctx.tool_call.id}")
        if hook in ("block", "block_terminate"):
            return BeforeToolCallResult(
                block=True,
                reason=f"{ctx.tool_call.id} blocked by the script",
                terminate=hook == "block_terminate",
            )
        return None

    async def _after_tool_call(self, ctx: AfterToolCallContext) -> AfterToolCallResult | None:
        await trio.lowlevel.checkpoint()
        hook = self._call_hooks.get(ctx.tool_call.id)
        if hook == "after_raises":
            raise RuntimeError(f"after_tool_call failed on purpose for {ctx.tool_call.id}")
        if hook == "after_marks_error":
            return AfterToolCallResult(is_error=True, content=f"{ctx.tool_call.id}: rejected")
        return None

    def _poll(self, name: QueueName) -> tuple[Message, ...]:
        self._hook("steering_poll" if name == "steer" else "follow_up_poll")
        queue = self.queues[name]
        if not queue:
            return ()
        mode = self.script.steering_mode if name == "steer" else self.script.follow_up_mode
        if mode == "all":
            taken = list(queue)
            queue.clear()
        else:
            taken = [queue.popleft()]
        self.taken[name].extend(taken)
        self.polled.extend(taken)
        return tuple(taken)

    async def _arrive(self, arrival: Arrival, start: float) -> None:
        await trio.sleep_until(start + arrival.at)
        message = UserMessage.text(arrival.text, timestamp=arrival.at)
        self.queues[arrival.queue].append(message)
        self.arrived[arrival.queue].append(message)

    @staticmethod
    async def _stall(point: PausePoint, latency: float) -> None:
        await point.reached.wait()
        await trio.sleep(latency)
        point.release()

    def _abort(self) -> None:
        abort = self.script.abort
        assert abort is not None
        assert self._handle is not None
        if self.requests_at_abort is None:
            self.requests_at_abort = len(self.model.requests)
        self._handle.abort(abort.reason, grace=abort.grace)

    async def _abort_at(self, when: float) -> None:
        await trio.sleep_until(when)
        self._abort()

    def _interrupt(self) -> None:
        assert self._handle is not None
        if self._handle.interrupt():
            self.interrupted += 1

    async def _interrupt_at(self, when: float) -> None:
        await trio.sleep_until(when)
        self._interrupt()

    def _record(self, event: ev.AgentEvent) -> None:
        self.events.append(event)
        self.event_times.append(trio.current_time() - self._start)

    async def _consume(
        self, events: trio.MemoryReceiveChannel[ev.AgentEvent], done: trio.Event
    ) -> None:
        abort = self.script.abort
        at = abort.after_event if abort is not None else None
        interrupt_at = {i.after_event for i in self.script.interrupts}
        with events:
            async for event in events:
                self._record(event)
                if len(self.events) - 1 in interrupt_at:
                    self._interrupt()
                if at is not None and len(self.events) == at + 1:
                    self._abort()
        done.set()

    async def run(self) -> ScriptRun:
        """Drive one run of the script under the current trio clock.

        Arrivals, stream latencies and time-based aborts run in control tasks; the
        events are consumed by a task outside the deadline's scope (a clone of the
        channel), so the closing events of a run stopped by the deadline still arrive.
        Every control task is cancelled once the run is over. Returns what happened;
        raises only what the run itself raises besides ``AgentRunError`` (kept in
        ``ScriptRun.error``).
        """
        script = self.script
        # A deep copy through JSON text: what the caller's messages were, for invariant 3.
        context_before = Context(
            system_prompt=self.context.system_prompt,
            messages=loads(dumps(self.context.messages)),
            tools=self.context.tools,
        )
        tasks_before = live_tasks()
        start = self._start = trio.current_time()
        handle: AgentRun | None = None
        result: AgentRunResult | None = None
        error: AgentRunError | None = None
        async with trio.open_nursery() as controls:
            for arrival in script.arrivals:
                controls.start_soon(self._arrive, arrival, start)
            for point, latency in self._stalls:
                controls.start_soon(self._stall, point, latency)
            with trio.CancelScope() as outer:
                if script.deadline is not None:
                    outer.deadline = start + script.deadline
                try:
                    if script.driver == "callback":
                        result = await run_agent_loop(
                            self.prompts,
                            self.context,
                            self.model,
                            self.config,
                            on_event=self._record,
                        )
                    else:
                        async with open_agent_loop(
                            self.prompts, self.context, self.model, self.config
                        ) as handle:
                            # The consumer and the timed abort live in the outer nursery
                            # on purpose: the consumer must outlive the deadline's scope
                            # to take the closing events, and aborting an ended run is a
                            # no-op, so the handle may outlive its block.
                            self._handle = handle
                            consumer = handle.events.clone()
                            done = trio.Event()
                            controls.start_soon(self._consume, consumer, done)
                            abort = script.abort
                            if abort is not None and abort.at_time is not None:
                                controls.start_soon(self._abort_at, start + abort.at_time)
                            for i in script.interrupts:
                                if i.at_time is not None:
                                    controls.start_soon(self._interrupt_at, start + i.at_time)
                            await done.wait()
                except AgentRunError as exc:
                    error = exc
                    result = exc.result
            if result is None and handle is not None:
                result = handle.result
            controls.cancel_scope.cancel()
        leaked = live_tasks() - tasks_before
        assert result is not None, "the run ended without a result"
        return ScriptRun(
            script=script,
            result=result,
            error=error,
            events=tuple(self.events),
            event_times=tuple(self.event_times),
            requests=tuple(self.model.requests),
            request_times=tuple(t - start for t in self.model.request_times),
            prompts=self.prompts,
            context=self.context,
            context_before=context_before,
            polled=tuple(self.polled),
            arrived={q: tuple(v) for q, v in self.arrived.items()},
            taken={q: tuple(v) for q, v in self.taken.items()},
            still_queued={q: tuple(v) for q, v in self.queues.items()},
            requests_at_abort=self.requests_at_abort,
            outer_cancelled=outer.cancelled_caught,
            leaked_tasks=tuple(sorted(t.name for t in leaked)),
            unfinished_tools=tuple(self.probe.unfinished()),
            open_streams=self.model.open_streams,
            hook_failed=self.hook_failed,
            interrupted=self.interrupted,
        )


@final
@attrs.frozen(kw_only=True, repr=False)
class ScriptRun:
    """What one run of a script did. ``check()`` asserts every run invariant
    (those of :func:`assert_run_invariants`, and no task left alive)."""

    script: Script
    result: AgentRunResult
    error: AgentRunError | None
    events: tuple[ev.AgentEvent, ...]
    event_times: tuple[float, ...]
    """When each event reached the consumer, in virtual seconds after the start."""
    requests: tuple[ModelRequest, ...]
    request_times: tuple[float, ...]
    """When each request came, in virtual seconds after the start."""
    prompts: tuple[Message, ...]
    context: Context
    context_before: Context
    polled: tuple[Message, ...]
    arrived: Mapping[QueueName, tuple[Message, ...]]
    taken: Mapping[QueueName, tuple[Message, ...]]
    still_queued: Mapping[QueueName, tuple[Message, ...]]
    requests_at_abort: int | None
    outer_cancelled: bool
    leaked_tasks: tuple[str, ...]
    unfinished_tools: tuple[str, ...]
    open_streams: int
    hook_failed: bool = False
    """The script's failing hook did raise (the run must then end ``error``)."""
    interrupted: int = 0
    """How many ``run.interrupt()`` calls found something to interrupt."""

    def __repr__(self) -> str:
        return (
            f"<ScriptRun reason={self.result.reason!r} steps={self.result.steps} "
            f"events={len(self.events)}>"
        )

    def violations(self) -> list[str]:
        """Every broken invariant, as readable lines (empty when all hold)."""
        out = run_invariant_violations(
            self.result,
            self.events,
            self.requests,
            self.context_before,
            context=self.context,
            prompts=self.prompts,
            polled=self.polled,
            max_steps=self.script.max_steps,
            requests_at_abort=self.requests_at_abort,
        )
        if self.hook_failed:
            # A failing hook ends the run with AgentRunError (unless an outer cancel
            # took precedence: then Cancelled propagates and the result says error).
            if self.result.reason != "error":
                out.append(f"[2 events] a hook raised but the run ended {self.result.reason!r}")
            if self.error is None and not self.outer_cancelled:
                out.append("[2 events] a hook raised but no AgentRunError was raised")
            elif self.error is not None and not isinstance(self.error.__cause__, RuntimeError):
                out.append(f"[2 events] AgentRunError without the hook's error: {self.error!r}")
        elif self.error is not None:
            out.append(f"[2 events] the run raised AgentRunError: {self.error}")
        # 1: each request is the transcript as it stood (custom messages left out).
        sent = [m for m in self.result.transcript if type(m) is not CustomMessage]
        for i, request in enumerate(self.requests):
            if list(request.messages) != sent[: len(request.messages)]:
                out.append(f"[1 pairing] request {i} is not a prefix of the final transcript")
        # 4: an outer deadline stops requests as an abort does.
        if self.script.deadline is not None:
            late = [t for t in self.request_times if t >= self.script.deadline]
            if late:
                out.append(
                    f"[4 steps] {len(late)} request(s) at or after the deadline "
                    f"t={_seconds(self.script.deadline)}"
                )
        # 5: a sequential batch finalizes each call before the next: a call that settled
        # (not stopped by an abort or interrupt) has its result message right after.
        out.extend(self._sequential_order())
        # 6: each queue is FIFO: taken, then still queued, is what arrived.
        for q in ("steer", "follow_up"):
            if (*self.taken[q], *self.still_queued[q]) != self.arrived[q]:
                out.append(f"[6 queues] the {q} queue lost or reordered messages")
        # 7: nothing of the run outlives it.
        if self.leaked_tasks:
            out.append(f"[7 tasks] still alive after the run: {list(self.leaked_tasks)}")
        if self.unfinished_tools:
            out.append(
                f"[7 tasks] tool calls whose finally block never ran: {list(self.unfinished_tools)}"
            )
        if self.open_streams:
            out.append(f"[7 tasks] {self.open_streams} model stream(s) still open")
        return out

    def _sequential_order(self) -> list[str]:
        out: list[str] = []
        events = self.events
        sequential = self.script.tool_execution == "sequential"
        for i, e in enumerate(events):
            if isinstance(e, ev.MessageEnd) and type(e.message) is AssistantMessage:
                calls = e.message.tool_calls
                sequential = self.script.tool_execution == "sequential" or any(
                    c.name == SERIAL_TOOL for c in calls
                )
            elif (
                sequential
                and isinstance(e, ev.ToolExecutionEnd)
                and e.outcome not in ("aborted", "skipped")
            ):
                after = events[i + 1 : i + 3]
                if [type(x) for x in after] != [ev.MessageStart, ev.MessageEnd] or any(
                    x.message is not e.result  # type: ignore[union-attr]
                    for x in after
                ):
                    out.append(
                        f"[5 call events] event {i}: call {e.call_id!r} of a sequential "
                        "batch: its result message does not follow its ToolExecutionEnd"
                    )
        return out

    def check(self) -> None:
        """Raise ``AssertionError`` listing every broken invariant, with the scenario."""
        problems = self.violations()
        if problems:
            lines = "\n".join(f"  - {p}" for p in problems)
            raise AssertionError(
                f"{len(problems)} run invariant(s) broken (reason={self.result.reason!r}, "
                f"steps={self.result.steps}):\n{lines}\n{self.script.describe()}"
            )


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
