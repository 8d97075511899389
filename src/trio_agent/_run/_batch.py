"""One tool batch: prepare each call in declaration order, run the prepared calls in one
nursery, finalize each, and hand back results in declaration order.

Theory of operation: every call has a :class:`CallState` that records how far it got
(Start emitted, result known). The run keeps the batch while it runs, so that whatever
stops it — an abort, an outer cancel scope, an interrupt, the end of an
``abort(grace=...)`` — the states say exactly which calls still need a result, and
:meth:`Batch.close` gives them the one the run names. Each call's result is reported to
the run once, as it settles (``settled``: the turn machine's ``settle``), and the run
alone appends results to the transcript: in sequential mode as each settles (its
``MessageStart``/``MessageEnd`` right after its ``ToolExecutionEnd``, pi's order), in
parallel mode all of them in declaration order once the batch is over.
``ToolExecutionEnd`` events go out in completion order as calls finish. In a sequential
batch each call is finalized before the next starts.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import trio

from .._core import (
    AfterToolCallContext,
    AfterToolCallResult,
    Approve,
    AssistantMessage,
    BatchEnd,
    BeforeToolCallContext,
    BeforeToolCallResult,
    Context,
    Defer,
    DeferredCall,
    Deny,
    Image,
    InvalidArguments,
    LoopConfig,
    Result,
    ResumePlan,
    Text,
    Tool,
    ToolCall,
    ToolContext,
    ToolIndex,
    ToolOutput,
    ToolResultMessage,
    argument_problem,
    check_arguments,
    check_json,
    check_structured_content,
    decided_result,
    hook_returned,
    make_result,
    maybe_await,
    needs_approval,
    result_content,
    result_message,
    runs_sequentially,
)
from .._core import events as ev

if TYPE_CHECKING:
    from ._delivery import EventDelivery
    from ._observe import ObservedCall, Probe

__all__ = ["Batch", "CallState", "Settled"]


class CallState(ToolContext):
    """How far one call of the batch got; also the :class:`ToolContext` its tool gets.

    One object per call instead of two (the state, and a context pointing at it): every
    object alive per sleeping call is more for the garbage collector to walk. It points
    at the run's event delivery, not at its batch: no reference cycle, so a finished
    batch is freed at once instead of waiting for the garbage collector.
    """

    __slots__ = (
        "args",
        "deferred",
        "end",
        "obs",
        "outcome",
        "result",
        "sink",
        "start",
        "start_emitted",
        "terminate",
        "tool",
        "waited",
    )

    def __init__(self, call: ToolCall, sink: EventDelivery) -> None:
        self.call = call
        self.sink = sink
        self.tool: Tool | None = None
        self.args: Mapping[str, Any] = call.arguments
        self.start_emitted = False
        self.result: ToolResultMessage | None = None
        self.outcome: ev.ToolOutcome = "ok"
        self.terminate = False
        self.start = math.nan
        self.end = math.nan
        self.waited = 0.0
        self.obs: ObservedCall | None = None  # the call's observation, if observed
        self.deferred: DeferredCall | None = None  # set when the call waits for a decision

    def end_event(self) -> ev.ToolExecutionEnd:
        assert self.result is not None
        # NaN (execute never started) is the one value not equal to itself.
        start = self.start
        return ev.ToolExecutionEnd(
            call_id=self.call.id,
            tool_name=self.call.name,
            result=self.result,
            is_error=self.result.is_error,
            outcome=self.outcome,
            duration=self.end - start if start == start else None,
        )

    async def report_progress(self, partial: Any) -> None:
        """Emit a ``ToolExecutionUpdate`` for this call (see ``ToolContext``)."""
        if self.result is not None or not self.sink.listening:
            await trio.lowlevel.checkpoint()
            return
        await self.sink.emit(
            ev.ToolExecutionUpdate(call_id=self.call.id, tool_name=self.call.name, partial=partial)
        )

    def _validated(self, tool: Tool) -> Mapping[str, Any] | None:
        # ``args`` were validated for ``self.tool`` once the call was prepared.
        return self.args if self.tool is tool else None

    def start_event(self) -> ev.ToolExecutionStart:
        return ev.ToolExecutionStart(
            call_id=self.call.id, tool_name=self.call.name, args=self.call.arguments
        )


Settled = Callable[[ToolResultMessage], Sequence[ev.AgentEvent]]
"""Reports a call's result to the run, once; returns the events of what that did to the
transcript (its result message's start and end in sequential mode; none in parallel
mode, where the run appends every result once the batch is over)."""


class Batch:
    """Runs the calls of one assistant message. Owned by the run that made it.

    Events go to ``sink`` (the run's delivery), and only while it listens.
    """

    __slots__ = (
        "_clock",
        "_ended_at",
        "_gated",
        "_peak",
        "_running",
        "_settled",
        "_sink",
        "_started_at",
        "_tools",
        "config",
        "context",
        "deferring",
        "message",
        "plan",
        "probe",
        "sequential",
        "states",
    )

    def __init__(
        self,
        *,
        message: AssistantMessage,
        calls: tuple[ToolCall, ...],
        context: Context,
        config: LoopConfig,
        sink: EventDelivery,
        settled: Settled,
        tools: ToolIndex,
        plan: ResumePlan | None = None,
    ) -> None:
        self.message = message
        self.states = [CallState(c, sink) for c in calls]
        self.context = context
        self.config = config
        self._sink = sink
        self._settled = settled
        self._tools = tools.by_name
        # Sequential: each call prepared, executed and finalized before the next starts.
        self.sequential = runs_sequentially(config, tools, calls)
        self._running = 0
        self._peak = 0
        # The run's clock, read directly: a call is timed twice.
        self._clock = trio.lowlevel.current_clock()
        self._started_at = math.nan
        self._ended_at = math.nan
        self.probe: Probe | None = None  # set by the run when something observes it
        # A resumed run's answers to the deferred calls (this batch is their batch).
        self.plan = plan
        # A call of the batch was deferred: the results of the calls after it are held
        # back (the run keeps them until the waiting calls are answered).
        self.deferring = False
        # Some call may wait for a decision, or this batch answers deferred calls: every
        # call is prepared in full (no quiet path).
        by_name = self._tools
        self._gated = plan is not None or any(
            (t := by_name.get(c.name)) is not None and t.approval != "never" for c in calls
        )

    # --- driving ---------------------------------------------------------------------

    async def run(self) -> None:
        """Run the batch. When the run's scope is cancelled (an interrupt, an abort),
        ``Cancelled`` propagates with the calls unfinished; the run ends them."""
        self._started_at = self._clock.current_time()
        try:
            if self.sequential:
                for st in self.states:
                    if await self._prepare(st):
                        await self._execute_now(st)
            else:
                if self._sink.listening or self.config.before_tool_call is not None or self._gated:
                    runnable = [st for st in self.states if await self._prepare(st)]
                else:
                    runnable = [st for st in self.states if self._prepare_quietly(st)]
                if len(runnable) == 1:
                    await self._execute_now(runnable[0])
                elif runnable:
                    limit = self.config.max_concurrency
                    async with trio.open_nursery() as nursery:
                        if limit is not None and limit < len(runnable):
                            limiter = trio.CapacityLimiter(limit)
                            for st in runnable:
                                nursery.start_soon(self._execute, st, limiter)
                        else:
                            # Straight to the call: every frame kept alive per sleeping
                            # call is more for the garbage collector to walk.
                            for st in runnable:
                                nursery.start_soon(self._execute_now, st)
        finally:
            self._ended_at = self._clock.current_time()

    def close(self, outcome: ev.ToolOutcome, text: str, *, keep_deferred: bool = False) -> BatchEnd:
        """Give every call without a result the result ``text`` with ``outcome`` (the
        run says which: an interrupt's or an abort's), and hand over what the run takes
        from the batch (one pass over the calls). With ``keep_deferred`` (the batch ran
        to its end) a deferred call keeps waiting: no result, no end event.

        Each stopped call settles in turn: its ``ToolExecutionEnd``, then what the run
        made of its result (in sequential mode its result message: pi's order). In
        parallel mode the run appends every result after these events.
        """
        events: list[ev.AgentEvent] = []
        results: list[ToolResultMessage] = []
        timings: list[ev.CallTiming] = []
        total = longest = waited = 0.0
        terminate = bool(self.states)
        deferred: list[DeferredCall] = []
        split = -1  # how many results come before the first deferred call
        for st in self.states:
            if st.deferred is not None:
                if split < 0:
                    split = len(results)
                if keep_deferred:
                    deferred.append(st.deferred)
                    terminate = False
                    continue
            if not st.start_emitted:
                st.start_emitted = True
                events.append(st.start_event())
            result = st.result
            if result is None:
                result = make_result(st.call, text, is_error=True)
                settled = self._record(st, result, outcome)
                events.append(st.end_event())
                events.extend(settled)
            results.append(result)
            terminate = terminate and st.terminate
            start, end = st.start, st.end
            # NaN (the call never ran, or never finished) is the one value not equal
            # to itself.
            if start == start and end == end:
                duration = end - start
                total += duration
                if duration > longest:
                    longest = duration
                waited += st.waited
                timings.append(
                    ev.CallTiming(
                        call_id=st.call.id,
                        tool_name=st.call.name,
                        start=start,
                        end=end,
                        waited=st.waited,
                    )
                )
        ended = self._ended_at if not math.isnan(self._ended_at) else self._clock.current_time()
        stats = ev.TurnStats(
            wall_time=ended - self._started_at if not math.isnan(self._started_at) else 0.0,
            critical_path=longest,
            total_call_time=total,
            peak_concurrency=self._peak,
            waited_on_limit=waited,
            calls=tuple(timings),
        )
        return BatchEnd(
            events, results, stats, terminate, tuple(deferred), len(results) if split < 0 else split
        )

    # --- one call ----------------------------------------------------------------------

    def _record(
        self, st: CallState, result: ToolResultMessage, outcome: ev.ToolOutcome
    ) -> Sequence[ev.AgentEvent]:
        """Record the call's result and report it to the run; returns the events of what
        the run did with it."""
        st.result = result
        st.outcome = outcome
        if st.obs is not None:
            st.obs.end(result, outcome)
        return self._settled(result)

    def _settle_now(
        self, st: CallState, result: ToolResultMessage, outcome: ev.ToolOutcome
    ) -> list[ev.AgentEvent] | None:
        """Record the call's result; the events to deliver (None while nothing listens):
        its ``ToolExecutionEnd``, then what the run made of the result."""
        settled = self._record(st, result, outcome)
        if self._sink.listening:
            return [st.end_event(), *settled]
        return None

    async def _settle(
        self, st: CallState, result: ToolResultMessage, outcome: ev.ToolOutcome
    ) -> None:
        events = self._settle_now(st, result, outcome)
        if events is not None:
            await self._sink.emit(*events)

    async def _fail(
        self,
        st: CallState,
        text: str,
        outcome: ev.ToolOutcome,
        terminate: bool = False,
    ) -> bool:
        st.terminate = terminate
        await self._settle(st, make_result(st.call, text, is_error=True), outcome)
        return False

    def _start(self, st: CallState) -> None:
        st.start_emitted = True
        if self.probe is not None:
            st.obs = self.probe.tool_call(st.call)

    def _check(self, st: CallState) -> tuple[str, ev.ToolOutcome] | None:
        """Look the tool up, run ``prepare_arguments``, validate. Returns why the call
        cannot run, or None (``st.tool`` and ``st.args`` set)."""
        call = st.call
        tool = self._lookup(st)
        if tool is None:
            return self._not_found(call), "not_found"
        if call.raw_arguments is not None:
            # Kept unparsed (a final-answer call, or a model of one's own): never run.
            problem = argument_problem(call.raw_arguments)
            return (
                f"The call was not run: it has {problem}. Call {call.name} again with "
                "its arguments as one JSON object.",
                "invalid_arguments",
            )
        args: Mapping[str, Any] = call.arguments
        if tool.prepare_arguments is not None:
            try:
                args = tool.prepare_arguments(args)
            except Exception as exc:
                return f"prepare_arguments failed: {_describe(exc)}", "error"
        try:
            st.args = check_arguments(tool, args)
        except InvalidArguments as exc:
            return exc.text, "invalid_arguments"
        return None

    def _lookup(self, st: CallState) -> Tool | None:
        """The call's tool (set as ``st.tool``), or None when no tool has its name."""
        tool = st.tool = self._tools.get(st.call.name)
        return tool

    def _not_found(self, call: ToolCall) -> str:
        names = ", ".join(sorted(self._tools)) or "(none)"
        return f"Tool {call.name} not found. Available tools: {names}"

    def _prepare_quietly(self, st: CallState) -> bool:
        """:meth:`_prepare` when nothing listens and no ``before_tool_call`` hook is set:
        nothing to await, so no coroutine per call."""
        self._start(st)
        failure = self._check(st)
        if failure is None:
            return True
        self._settle_now(st, make_result(st.call, failure[0], is_error=True), failure[1])
        return False

    async def _prepare(self, st: CallState) -> bool:
        """Start event, lookup, ``prepare_arguments``, validation, ``before_tool_call``.

        Returns whether the call may run; a call stopped here already has its result.
        """
        plan = self.plan
        if plan is not None:
            return await self._prepare_answered(st, plan)
        self._start(st)
        if self._sink.listening:
            await self._sink.emit(st.start_event())
        failure = self._check(st)
        if failure is not None:
            return await self._fail(st, *failure)
        before = self.config.before_tool_call
        if before is not None:
            tool = st.tool
            assert tool is not None
            try:
                said = await maybe_await(
                    before(
                        BeforeToolCallContext(
                            assistant_message=self.message,
                            tool_call=st.call,
                            args=st.args,
                            context=self.context,
                        )
                    )
                )
                decision = (
                    None if type(said) is Defer else hook_returned("it", said, BeforeToolCallResult)
                )
            except Exception as exc:
                return await self._fail(st, f"before_tool_call failed: {_describe(exc)}", "error")
            if type(said) is Defer:
                return await self._wait(st, said.reason)
            if decision is not None:
                if decision.block:
                    return await self._fail(
                        st,
                        decision.reason or "Tool execution was blocked",
                        "blocked",
                        terminate=decision.terminate,
                    )
                if decision.args is not None:
                    try:
                        st.args = check_arguments(tool, decision.args)
                    except InvalidArguments as exc:
                        return await self._fail(st, exc.text, "invalid_arguments")
        tool = st.tool
        assert tool is not None
        if tool.approval != "never":
            try:
                wait, reason = needs_approval(tool, st.args)
            except Exception as exc:
                return await self._fail(st, f"Tool.approval failed: {_describe(exc)}", "error")
            if wait:
                return await self._wait(st, reason)
        return True

    async def _wait(self, st: CallState, reason: str | None) -> bool:
        """The call waits for a decision: the ``approver`` is asked (within
        ``approval_timeout``); without an answer the call is deferred (no result; the
        run ends ``deferred`` once the batch is over). Returns whether it runs now."""
        call = st.call
        waiting = DeferredCall(id=call.id, name=call.name, arguments=st.args, reason=reason)
        approver = self.config.approver
        answer: object = None
        if approver is not None:
            limit = self.config.approval_timeout
            try:
                with trio.move_on_after(math.inf if limit is None else limit):
                    answer = await approver(waiting)
            except Exception as exc:
                return await self._fail(st, f"approver failed: {_describe(exc)}", "error")
            if answer is not None and not isinstance(answer, Approve | Deny | Result):
                return await self._fail(
                    st,
                    f"approver failed: it returned {type(answer).__name__}, not Approve, Deny, "
                    "Result or None",
                    "error",
                )
        if answer is None:
            st.deferred = waiting
            self.deferring = True
            if st.obs is not None:
                # The observation ends here (no result: the transcript gets none); the
                # resumed run observes the call again if it runs.
                text = "Tool call deferred: it waits for a decision."
                st.obs.end(make_result(call, text, is_error=True), "skipped")
            return False
        assert isinstance(answer, Approve | Deny | Result)
        return await self._decided(st, answer)

    async def _decided(self, st: CallState, answer: Approve | Deny | Result) -> bool:
        """Apply a decision: an approved call runs (with its edited arguments validated
        again); a denied or given one settles with its result. Returns whether it runs."""
        if isinstance(answer, Approve):
            if answer.arguments is not None:
                tool = st.tool
                assert tool is not None
                try:
                    st.args = check_arguments(tool, answer.arguments)
                except InvalidArguments as exc:
                    return await self._fail(st, exc.text, "invalid_arguments")
            return True
        try:
            result, outcome = decided_result(st.call, answer)
        except TypeError as exc:
            return await self._fail(st, f"approver failed: {exc}", "error")
        await self._settle(st, result, outcome)
        return False

    async def _prepare_answered(self, st: CallState, plan: ResumePlan) -> bool:
        """Prepare a call of a resumed run's answering batch: one with its result
        decided already (held back, denied, given) settles with it; an approved one is
        looked up and its arguments validated again, and runs (no ``before_tool_call``,
        no approval: it was approved)."""
        call = st.call
        st.start_emitted = True
        if self._sink.listening:
            await self._sink.emit(st.start_event())
        preset = plan.presets.get(call.id)
        if preset is not None:
            await self._settle(st, *preset)
            return False
        if self.probe is not None:
            st.obs = self.probe.tool_call(call)
        tool = self._lookup(st)
        if tool is None:
            return await self._fail(st, self._not_found(call), "not_found")
        try:
            st.args = check_arguments(tool, plan.approved[call.id])
        except InvalidArguments as exc:
            return await self._fail(st, exc.text, "invalid_arguments")
        return True

    async def _execute(self, st: CallState, limiter: trio.CapacityLimiter) -> None:
        asked = trio.current_time()
        async with limiter:
            st.waited = trio.current_time() - asked
            await self._execute_now(st)

    async def _execute_now(self, st: CallState) -> None:
        tool = st.tool
        assert tool is not None
        call = st.call
        timeout = tool.timeout if tool.timeout is not None else self.config.tool_timeout
        self._running += 1
        if self._running > self._peak:
            self._peak = self._running
        st.start = self._clock.current_time()
        timer: trio.CancelScope | None = None
        # The call's observation is current while its tool runs (in the call's task).
        token = st.obs.activate() if st.obs is not None else None
        try:
            # Inline rather than a helper coroutine: one frame less per live call; and no
            # `with` block without a timeout (it would keep a bound __exit__ alive).
            try:
                if timeout is None:
                    output = await tool.execute(call, st.args, st)
                else:
                    output = ""  # replaced by the timed-out result below
                    with trio.CancelScope(deadline=st.start + timeout) as timer:
                        output = await tool.execute(call, st.args, st)
                content, details, terminate, is_error, structured = _normalize(output)
            except Exception as exc:
                if st.obs is not None:
                    st.obs.exception = exc
                content = (Text(text=_describe(exc)),)
                details, terminate, is_error, structured = None, False, True, None
        finally:
            self._running -= 1
            st.end = self._clock.current_time()
            if st.obs is not None:
                st.obs.deactivate(token)
        if timer is not None and timer.cancelled_caught:
            await self._fail(st, f"Tool {call.name} timed out after {timeout:g}s", "timed_out")
            return
        if structured is not None and not is_error:
            mismatch = check_structured_content(tool, structured)
            if mismatch is not None:
                # The model reads what was wrong; nothing unchecked is kept.
                content, is_error, structured = (Text(text=mismatch),), True, None
        after = self.config.after_tool_call
        if after is not None:
            try:
                change = hook_returned(
                    "it",
                    await maybe_await(
                        after(
                            AfterToolCallContext(
                                assistant_message=self.message,
                                tool_call=call,
                                args=st.args,
                                result=ToolOutput(
                                    content=content,
                                    details=details,
                                    terminate=terminate,
                                    structured_content=structured,
                                ),
                                is_error=is_error,
                                context=self.context,
                            )
                        )
                    ),
                    AfterToolCallResult,
                )
            except Exception as exc:
                await self._fail(st, f"after_tool_call failed: {_describe(exc)}", "error")
                return
            if change is not None:
                try:
                    if change.content is not None:
                        content = result_content(change.content)
                        structured = None  # unless replaced too: it may no longer match
                    if change.details is not None:
                        check_json(change.details, "AfterToolCallResult.details")
                        details = change.details
                    if change.structured_content is not None:
                        check_json(
                            change.structured_content, "AfterToolCallResult.structured_content"
                        )
                        structured = change.structured_content
                except TypeError as exc:
                    await self._fail(st, f"after_tool_call failed: {exc}", "error")
                    return
                if change.is_error is not None:
                    is_error = change.is_error
                if change.terminate is not None:
                    terminate = change.terminate
                if change.structured_content is not None and not is_error:
                    mismatch = check_structured_content(tool, structured)
                    if mismatch is not None:
                        await self._fail(st, f"after_tool_call failed: {mismatch}", "error")
                        return
        st.terminate = terminate
        # `content` is checked already (by _normalize or result_content above).
        events = self._settle_now(
            st,
            result_message(
                call, content, is_error=is_error, details=details, structured_content=structured
            ),
            "error" if is_error else "ok",
        )
        if events is not None:
            await self._sink.emit(*events)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return text if text else type(exc).__name__


def _normalize(
    output: Any,
) -> tuple[tuple[Text | Image, ...], Any, bool, bool, Any]:
    """A tool's return value as (content, details, terminate, is_error,
    structured_content), checked."""
    if isinstance(output, str):
        return (Text(text=output),), None, False, False, None
    if isinstance(output, ToolOutput):
        # Checked here, not when a sink writes the result: the call gets an error result
        # naming the problem, and the run goes on.
        if output.details is not None:
            check_json(output.details, "ToolOutput.details")
        if output.structured_content is not None:
            check_json(output.structured_content, "ToolOutput.structured_content")
        return (
            result_content(output.content),
            output.details,
            output.terminate,
            output.is_error,
            output.structured_content,
        )
    if inspect.iscoroutine(output):
        output.close()  # never to be awaited: no "never awaited" warning on top
        raise TypeError(
            "a tool must return a str or a ToolOutput, not a coroutine (the tool calls an "
            "async function without await)"
        )
    raise TypeError(f"a tool must return a str or a ToolOutput, not {type(output).__name__}")
