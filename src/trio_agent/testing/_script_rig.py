"""Scripts, the driver: the live objects for one run of a script, and the run itself.

:class:`ScriptRig` turns a scenario into a ``ScriptedModel`` (a reply per turn, with its
stalls and faults), the scripted tools, the ``Context``, the ``LoopConfig`` (limits,
hooks, polls reading the steering and follow-up queues), and ``ScriptRig.run()`` drives
one real run under the current trio clock and returns a :class:`ScriptRun`.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any, ClassVar, final

import attrs
import trio

from .._core import (
    AfterToolCallContext,
    AfterToolCallResult,
    AgentRunError,
    AgentRunResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
    Context,
    LoopConfig,
    Message,
    NextTurn,
    RequestContext,
    Tool,
    ToolCall,
    ToolContext,
    ToolOutput,
    TurnContext,
    UserMessage,
    dumps,
    loads,
)
from .._core import events as ev
from .._run import AgentRun, open_agent_loop, run_agent_loop
from ._script_run import ScriptRun
from ._script_values import (
    CALL_SCHEMA,
    SERIAL_TOOL,
    WORK_TOOL,
    Arrival,
    CallHook,
    QueueName,
    RunHook,
    Scenario,
)
from ._scripted import PausePoint, ScriptedModel

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from .._core import ModelRequest

__all__ = ["ScriptRig", "ToolProbe", "live_tasks"]


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


def _probed(tool: Tool, probe: ToolProbe) -> Tool:
    """The user's ``tool`` with its calls noted in ``probe`` (its own body unchanged)."""
    inner = tool.execute

    async def execute(
        call: ToolCall, args: Mapping[str, Any], ctx: ToolContext
    ) -> ToolOutput | str:
        probe.started.append(call.id)
        try:
            return await inner(call, args, ctx)
        finally:
            probe.finished.append(call.id)

    return attrs.evolve(tool, execute=execute)


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
        script: the script this rig runs.
        model: the ``ScriptedModel`` (it records ``requests``).
        context: the caller's ``Context`` (history, the two scripted tools, and the
            script's own tools, each wrapped to note its calls in ``probe``).
        config: the ``LoopConfig`` (limits from the script, polls reading the queues).
        prompts: the prompt messages (empty when the script continues from history).
        probe: which calls entered and left their tool.
        queues: the steering and follow-up queues the polls read.
        polled: every message a poll returned, in order.
        arrived: per queue (``steer``, ``follow_up``), the messages queued so far.
        taken: per queue, the messages polls took so far.
        events: every event the consumer received, in order.
        event_times: when each event was received, in virtual seconds after the start.
        requests_at_abort: how many requests the model had received when the abort
            fell; None without an abort.
        hook_calls: how many times each run-level hook was called, by name.
        hook_failed: whether the script's failing hook did raise.
        interrupted: how many interrupts found something to interrupt.
    """

    script: Scenario
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
            tools=(
                *_make_tools(self.probe),
                *(_probed(t, self.probe) for t in script.tools),
            ),
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
        if failing == "prepare_request":
            hooks["prepare_request"] = self._prepare_request
        if script.stop_after_turn is not None or failing == "should_stop_after_turn":
            hooks["should_stop_after_turn"] = self._should_stop_after_turn
        self.config = LoopConfig(
            max_steps=script.max_steps,
            tool_execution=script.tool_execution,
            max_concurrency=script.max_concurrency,
            tool_timeout=script.tool_timeout,
            continue_after_length=script.continue_after_length,
            max_output_tokens=script.max_output_tokens,
            run_timeout=script.run_timeout,
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

    def _prepare_request(self, ctx: RequestContext) -> NextTurn | None:
        self._hook("prepare_request")
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
