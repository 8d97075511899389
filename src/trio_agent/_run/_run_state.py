"""The state of one run, and every change to it: all synchronous (nothing here awaits).

Theory of operation: :class:`RunState` is the data of a run — the working transcript, the
turn in progress, the reply being streamed, the batch being run, where the run is in its
lifecycle — and the methods that change it. None of them awaits, so none can be cancelled
half-way: the loop that drives a run (``_runner.Runner``, a subclass) awaits between them,
and whatever stops it at whatever checkpoint, :meth:`RunState._close` finds the state
whole, gives every unanswered call a result, and queues the closing events.

The run's lifecycle is a named state (:data:`Lifecycle`), moved only by :meth:`abort` and
:meth:`_close`, through the tables below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypeAlias

import trio

from .._core import _events as ev
from .._core._call_ids import CallIds
from .._core._config import AgentRunResult, Context, NextTurn, TurnContext, check_loop_config
from .._core._errors import AgentUsageError
from .._core._messages import (
    NO_USAGE,
    AssistantMessage,
    CustomMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    Usage,
    sum_usage,
)
from .._core._model import ModelRequest, ToolSpec, check_model
from .._core._observer import Probe
from .._core._policy import over_budget
from .._core._serde import as_prompts
from .._core._util import make_result
from ._batch import runs_sequentially
from ._delivery import EventDelivery, OnEvent

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .._core._config import LoopConfig, MaybeAwaitable, Messages
    from .._core._model import Model, ModelOptions
    from .._core._policy import Decision
    from ._batch import Batch
    from ._stream import StreamAccumulator

    PollHook: TypeAlias = Callable[[], MaybeAwaitable[Messages]] | None

__all__ = ["Interrupt", "Lifecycle", "RunState"]

Lifecycle = Literal["running", "aborting", "ended", "aborted"]
"""Where a run is.

``running``: nothing asked it to stop. ``aborting``: :meth:`RunState.abort` was called;
the run stops at its next checkpoint (or when the batch's grace runs out). ``ended``:
:meth:`RunState._close` ran — the result is set, the closing events are owed or
delivered. ``aborted``: ended, and an abort was asked, before the end or while the
closing events went out: what is left of them goes out within ``cleanup_timeout``.
(``aborted`` says how the run is being closed, not why it ended: that is the result's
``reason``.)

=========  ==========  ===========
state      abort()     _close()
=========  ==========  ===========
running    aborting    ended
aborting   aborting    aborted
ended      aborted     (no change)
aborted    aborted     (no change)
=========  ==========  ===========
"""

_ON_ABORT: dict[Lifecycle, Lifecycle] = {
    "running": "aborting",
    "aborting": "aborting",
    "ended": "aborted",
    "aborted": "aborted",
}
_ON_CLOSE: dict[Lifecycle, Lifecycle] = {"running": "ended", "aborting": "aborted"}

Interrupt = Literal["none", "pending", "requested"]
"""An interrupt in progress: ``requested`` while it cancels the reply being streamed,
``pending`` when it came between a reply and its batch (or while a turn was set up) and
waits for the next steering poll or batch."""


def default_convert(messages: Sequence[Message]) -> tuple[Message, ...]:
    """The messages a model sees by default: all but the ``CustomMessage``s."""
    return tuple(m for m in messages if type(m) is not CustomMessage)


def check_run_inputs(context: object, model: object, config: object) -> None:
    """The door check of a run's context, model and config (its prompts go through
    ``as_prompts``): each must be what it says, so that a wrong one is a ``TypeError``
    naming it before anything runs, not an ``AttributeError`` at the first request.
    """
    if not isinstance(context, Context):
        raise TypeError(f"context must be a trio_agent.Context, not {type(context).__name__}")
    check_model(model)
    check_loop_config(config)


class RunState:
    """One run's state and its synchronous changes (see the module docstring).

    Slotted: a run's state is its attributes, and a thousand runs at once each save the
    instance dictionary (about 1.3 KB per run). A new attribute goes in ``__slots__``.
    """

    __slots__ = (
        "_tool_specs",
        "abort_reason",
        "acc",
        "batch",
        "call_ids",
        "config",
        "context",
        "controlled",
        "follow_up_poll",
        "interrupting",
        "lifecycle",
        "llm_view",
        "model",
        "new_messages",
        "options",
        "pending",
        "probe",
        "result",
        "scope",
        "sink",
        "steering_poll",
        "steps",
        "timed_out",
        "token",
        "transcript",
        "turn_decision",
        "turn_index",
        "turn_message",
        "turn_open",
        "turn_results",
        "turn_stats",
        "turns",
        "usage_counted",
        "usage_so_far",
    )

    def __init__(
        self,
        prompts: Sequence[Message] | str,
        context: Context,
        model: Model,
        config: LoopConfig,
        *,
        on_event: OnEvent | None = None,
        send: trio.MemorySendChannel[ev.AgentEvent] | None = None,
        controlled: bool = True,
        polls: tuple[PollHook, PollHook] | None = None,
        delivery: EventDelivery | None = None,
    ) -> None:
        prompts = as_prompts(prompts)
        check_run_inputs(context, model, config)
        if not prompts:
            last = context.messages[-1] if context.messages else None
            if last is None or type(last) is AssistantMessage:
                raise AgentUsageError(
                    "nothing to continue from: with no prompts, the context must end in a "
                    "user, tool-result or custom message (pass a prompt instead)"
                )
        self.config = config
        # The steering and follow-up polls: the config's, or ``polls`` (the Agent's
        # queues, given apart so that no per-run copy of its config is made).
        self.steering_poll, self.follow_up_poll = (
            (config.get_steering_messages, config.get_follow_up_messages)
            if polls is None
            else polls
        )
        self.context = context
        self.model = model
        self.options: ModelOptions = config.model_options
        # Only a channel's consumer can go away; the callback is dropped when the run
        # ends (see EventDelivery.close), so a run is not a reference cycle.
        self.sink = (
            delivery
            if delivery is not None
            else EventDelivery(on_event, send, self._consumer_gone if send is not None else None)
        )
        # A run that another task may abort or interrupt (through open_agent_loop's
        # handle, or the Agent) has cancel scopes of its own: the run's, the stream's,
        # the batch's. A run nobody can reach (run_agent_loop) needs none — the
        # caller's own cancel scopes still stop it — and saves their cost per turn;
        # unless it has a run_timeout: its deadline is on the run's scope.
        self.controlled = controlled
        self.scope = trio.CancelScope() if controlled or config.run_timeout is not None else None
        self.timed_out = False  # the run_timeout fired: the run ends "timeout"
        self.token = trio.lowlevel.current_trio_token()

        self.transcript: list[Message] = list(context.messages)
        # The transcript without CustomMessages, kept up to date as messages are
        # appended, so that the default request costs one tuple copy, not a filter pass
        # over the whole history every turn.
        self.llm_view: list[Message] = list(default_convert(self.transcript))
        self.new_messages: list[Message] = []
        # Every call id in the transcript, so that a reply reusing one gets a fresh id.
        self.call_ids = CallIds(self.transcript)
        # Prompts count as pending from the start: a run that ends before appending
        # them reports them in `undelivered`, like polled messages.
        self.pending: list[Message] = list(prompts)
        self.steps = 0
        self.turn_index = 0
        # From TurnStart to TurnEnd: a run closed in between still ends the turn.
        self.turn_open = False
        self.turn_message: AssistantMessage | None = None
        # The decision of the turn whose batch is running (ends a cut batch's turn).
        self.turn_decision: Decision | None = None
        self.turn_results: list[ToolResultMessage] = []
        self.turn_stats = ev.NO_STATS
        self.turns: list[ev.TurnStats] = []
        self.acc: StreamAccumulator | None = None
        self.batch: Batch | None = None
        self.lifecycle: Lifecycle = "running"
        self.abort_reason: str | None = None  # the first abort's
        self.interrupting: Interrupt = "none"
        self.result: AgentRunResult | None = None
        self._tool_specs: tuple[ToolSpec, ...] | None = None
        # The usage of new_messages[:usage_counted], summed only when a token budget is
        # checked or the usage is read (nothing per reply on the hot path).
        self.usage_so_far = NO_USAGE
        self.usage_counted = 0
        self.probe = Probe.make(config.observer)  # None: nothing observes the run

    # --- control from other tasks -------------------------------------------------------

    def abort(self, reason: str | None = None, grace: float | None = None) -> None:
        state = self.lifecycle
        self.lifecycle = _ON_ABORT[state]
        if state == "ended" or state == "aborted":
            # The run is delivering its closing events: what is left goes out within
            # cleanup_timeout (a stuck consumer cannot keep the run from ending).
            closing = self.sink.closing_scope
            if closing is not None:
                closing.deadline = min(
                    closing.deadline, trio.current_time() + self.config.cleanup_timeout
                )
            else:
                self._cancel()
            return
        if state == "running":
            self.abort_reason = reason
        batch = self.batch
        if batch is not None:
            batch.stop_outcome = "aborted"
            batch.stop_text = _abort_text(self.abort_reason)
            if grace is not None and grace > 0 and self.scope is not None:
                # The batch runs in the run's scope: the calls get `grace` to finish.
                self.scope.deadline = min(self.scope.deadline, trio.current_time() + grace)
                return
        self._cancel()

    def time_out(self) -> None:
        """The ``run_timeout`` deadline cancelled the run's scope: end the run with
        reason ``timeout``, cleaned up as an abort is (the reply kept, stop reason
        ``aborted``; unfinished calls get ``aborted`` results saying the run timed out)."""
        self.timed_out = True
        timeout = self.config.run_timeout
        self.abort(f"the run timed out after {timeout:g}s (run_timeout)")

    def _cancel(self) -> None:
        """Cancel the run's own scope (only a controlled run is aborted or interrupted:
        it has one)."""
        assert self.scope is not None, "only a controlled run is aborted or interrupted"
        self.scope.cancel()

    def interrupt(self) -> bool:
        """Cancel the running batch or stream; the run goes on. False once the run ended.

        Between the two (the reply is over, its batch not started yet; or a turn is
        being set up) the interrupt is kept until the next steering poll: a batch that
        starts before it is cancelled at once, and a request about to be sent first
        takes what the steering queue holds.
        """
        if self.ended:
            return False
        if self.batch is not None:
            self._interrupt_batch(self.batch)
            return True
        if self.acc is not None:  # the reply is streaming
            self.interrupting = "requested"
            self._cancel()
            return True
        self.interrupting = "pending"
        return True

    def _interrupt_batch(self, batch: Batch) -> None:
        """Cancel ``batch`` (it runs in the run's scope): its unfinished calls get
        ``skipped: interrupted by user``."""
        batch.stop_outcome = "skipped"
        batch.stop_text = "Tool call skipped: interrupted by user."
        self._cancel()

    @property
    def has_sink(self) -> bool:
        """Whether events are built and delivered at all: someone listens (an Agent's run
        that nobody subscribes to builds no event at all)."""
        return self.sink.listening

    @property
    def ended(self) -> bool:
        """Whether the run ended (its result is set; closing events may still be going
        out)."""
        return self.lifecycle == "ended" or self.lifecycle == "aborted"

    @property
    def usage(self) -> Usage:
        """The token counts of the replies this run appended so far, summed."""
        new = self.new_messages
        if self.usage_counted < len(new):
            self.usage_so_far = self.usage_so_far + sum_usage(new[self.usage_counted :])
            self.usage_counted = len(new)
        return self.usage_so_far

    def _consumer_gone(self) -> None:
        self.abort("the event consumer closed the channel")

    # --- state changes ------------------------------------------------------------------

    def _push(self, message: Message) -> None:
        self.transcript.append(message)
        self.new_messages.append(message)
        if type(message) is not CustomMessage:
            self.llm_view.append(message)

    def _append(self, message: Message) -> list[ev.AgentEvent]:
        self._push(message)
        if not self.has_sink:
            return []
        return [ev.MessageStart(message=message), ev.MessageEnd(message=message)]

    def _close(self, reason: ev.EndReason) -> None:
        """End the run: pair every call, close the turn, queue the closing events."""
        if self.ended:
            return
        self.lifecycle = _ON_CLOSE[self.lifecycle]
        events: list[ev.AgentEvent] = []
        acc = self.acc
        if acc is not None:
            if acc.final is not None:
                message = acc.final
            elif reason == "aborted" or reason == "timeout":
                message = acc.fail(self.abort_reason or "the run was aborted", "aborted")
            else:
                message = acc.fail("the run failed while the reply streamed", "error")
            if not acc.start_emitted:
                events.append(ev.MessageStart(message=acc.empty()))
            message = self.call_ids.fresh(message)
            self._push(message)
            events.append(ev.MessageEnd(message=message))
            self.turn_message = message
            self.acc = None
        new_results: list[ToolResultMessage] = []
        answered = {r.tool_call_id for r in self.turn_results}
        batch = self.batch
        if batch is not None:
            closed = batch.close()
            events.extend(closed.events)
            for result in closed.unappended:
                events.extend(self._append(result))
            new_results.extend(closed.results)
            self.turn_stats = closed.stats
            self.batch = None
        answered.update(r.tool_call_id for r in new_results)
        if self.turn_message is not None:
            if reason == "timeout" and self.abort_reason:
                why = self.abort_reason
            elif reason != "aborted":
                why = f"the run ended ({reason})"
            elif self.abort_reason:
                why = f"the run was aborted ({self.abort_reason})"
            else:
                why = "the run was aborted"
            unanswered: list[ToolCall] = []
            for call in self.turn_message.tool_calls:
                if call.id not in answered:
                    answered.add(call.id)
                    unanswered.append(call)
            new_results.extend(self._skip_calls(unanswered, why, events))
        self.turn_results.extend(new_results)
        if self.turn_open:
            self.turn_open = False
            self.turns.append(self.turn_stats)
            events.append(
                ev.TurnEnd(
                    message=self.turn_message,
                    tool_results=tuple(self.turn_results),
                    stats=self.turn_stats,
                )
            )
        last = self.new_messages[-1] if self.new_messages else None
        error_message = (
            last.error_message
            if type(last) is AssistantMessage and last.stop_reason == "error"
            else None
        )
        self.result = AgentRunResult(
            reason=reason,
            messages=tuple(self.new_messages),
            steps=self.steps,
            transcript=tuple(self.transcript),
            undelivered=tuple(self.pending),
            turns=tuple(self.turns),
            error_message=error_message,
            usage=self.usage,
        )
        self.pending = []
        events.append(ev.AgentEnd(reason=reason, messages=self.result.messages))
        self.sink.owe(events)

    def _skip_calls(
        self, calls: Sequence[ToolCall], why: str, events: list[ev.AgentEvent]
    ) -> list[ToolResultMessage]:
        """Give each of ``calls`` (of the turn's reply, never run) a skipped result and
        append it; the events go to ``events``. In sequential mode (decided on all the
        reply's calls, as for a batch) each call is finalized before the next starts, as
        in a sequential batch (its end, then its result message); in parallel mode every
        start and end comes first, then the result messages."""
        reply = self.turn_message
        assert reply is not None
        sequential = bool(calls) and runs_sequentially(
            self.config, self.context.tools, reply.tool_calls
        )
        results: list[ToolResultMessage] = []
        for call in calls:
            result = self._skipped(call, why, events)
            results.append(result)
            if sequential:
                events.extend(self._append(result))
        if not sequential:
            for result in results:
                events.extend(self._append(result))
        return results

    def _skipped(self, call: ToolCall, why: str, events: list[ev.AgentEvent]) -> ToolResultMessage:
        """A skipped result for a call that never ran; its Start and End go to ``events``."""
        result = make_result(call, f"Tool call skipped: {why}.", is_error=True)
        if self.has_sink:
            events.append(
                ev.ToolExecutionStart(call_id=call.id, tool_name=call.name, args=call.arguments)
            )
            events.append(
                ev.ToolExecutionEnd(
                    call_id=call.id,
                    tool_name=call.name,
                    result=result,
                    is_error=True,
                    outcome="skipped",
                )
            )
        return result

    def _apply_next_turn(self, nxt: NextTurn) -> None:
        if nxt.context is not None:
            self.context = nxt.context
            self.transcript = list(nxt.context.messages)
            self.llm_view = list(default_convert(self.transcript))
            self.call_ids = CallIds(self.transcript)
            self._tool_specs = None
        if nxt.model is not None:
            self.model = nxt.model
        if nxt.options is not None:
            self.options = nxt.options

    # --- views of the state -------------------------------------------------------------

    def _over_budget(self) -> bool:
        """Whether the next request would go over a token budget (see ``LoopConfig``);
        the rule itself is :func:`over_budget`."""
        config = self.config
        last = self.turn_message.usage.prompt_tokens if self.turn_message else 0
        return over_budget(
            self.usage,
            last,
            max_input_tokens=config.max_input_tokens,
            max_output_tokens=config.max_output_tokens,
        )

    def _request(self, messages: Sequence[Message]) -> ModelRequest:
        specs = self._tool_specs
        if specs is None:
            specs = self._tool_specs = tuple(
                ToolSpec(name=t.name, description=t.description, parameters=t.parameters)
                for t in self.context.tools
            )
        return ModelRequest(
            system_prompt=self.context.system_prompt,
            messages=tuple(messages),
            tools=specs,
            options=self.options,
        )

    def _context_now(self) -> Context:
        return Context(
            system_prompt=self.context.system_prompt,
            messages=tuple(self.transcript),
            tools=self.context.tools,
        )

    def _turn_context(self) -> TurnContext:
        assert self.turn_message is not None
        return TurnContext(
            message=self.turn_message,
            tool_results=tuple(self.turn_results),
            context=self._context_now(),
            new_messages=tuple(self.new_messages),
        )


def _abort_text(reason: str | None) -> str:
    return f"Tool call aborted: {reason or 'the run was aborted'}."
