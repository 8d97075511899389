"""The runner: one run of pi's two-level loop (started by ``_loop``'s entry points).

Theory of operation
-------------------
A run is one :class:`Runner`. Its state is plain data — the working transcript, the
messages it appended, the messages polled but not yet appended (``pending``), the turn in
progress (``turn_open``/``turn_message``/``turn_results``), the reply being streamed
(``acc``) and the tool batch being run (``batch``) — updated *synchronously*, before
any event about it is emitted (so code that reads the state — the Agent's
``state`` — never lags the events). Events are delivered afterwards by
``_sink.EventDelivery`` (to the ``on_event`` sink, then the channel; each exactly once,
in order, whatever cancels a delivery — see there). Whatever ends the run, at whatever
checkpoint — the run's own cancel scope (``abort``), the caller's cancel scope, an
exception — ``_close`` can read the state, give every unanswered call a result, and
queue the closing events.
That is the pairing invariant: it never depends on how far an ``await`` got. After an
abort or an outer cancel, the closing events are delivered within
``LoopConfig.cleanup_timeout`` (a stuck sink cannot keep the run from ending).

``_policy.decide`` says what each reply means (the stop-reason table); ``_batch.Batch``
runs one batch of tool calls; ``_stream.StreamAccumulator`` turns the model's events into
the assistant message.

Exception policy: a tool's or the model's ``Exception`` becomes data (an error result, an
``error`` reply). Any other ``Exception`` (a hook, the event sink, a bug) ends the run with
``AgentEnd(reason="error")`` and raises :class:`AgentRunError` with the original as
``__cause__``. ``Cancelled``, ``KeyboardInterrupt`` and other ``BaseException``s propagate
after the clean-up, never wrapped in an exception group.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from . import _events as ev
from ._batch import Batch
from ._config import AgentRunResult, Context, LoopConfig, NextTurn, TurnContext
from ._errors import AgentRunError, AgentUsageError
from ._messages import (
    AssistantMessage,
    CustomMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    Usage,
    as_prompts,
    sum_usage,
)
from ._model import Model, ModelOptions, ModelRequest, ToolSpec
from ._observer import Probe
from ._policy import Decision, decide, interrupted, natural_end, over_budget
from ._sink import EventDelivery, OnEvent, SinkFailure
from ._stream import StreamAccumulator
from ._util import make_result, maybe_await, representative

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["OnEvent", "Runner"]

Interrupt = Literal["none", "pending", "requested"]



def _default_convert(messages: Sequence[Message]) -> tuple[Message, ...]:
    return tuple(m for m in messages if type(m) is not CustomMessage)


class Runner:
    """One run: its state, the two-level loop, and its clean-up (see the module docstring).

    Slotted: a run's state is its attributes, and a thousand runs at once each save the
    instance dictionary (about 1.3 KB per run). A new attribute goes in ``__slots__``.
    """

    __slots__ = (
        "_tool_specs",
        "abort_reason",
        "aborted",
        "acc",
        "acc_start_emitted",
        "batch",
        "call_ids",
        "config",
        "context",
        "ended",
        "interrupting",
        "last_all_terminate",
        "llm_view",
        "model",
        "new_messages",
        "next_suffix",
        "options",
        "pending",
        "probe",
        "result",
        "scope",
        "sink",
        "steps",
        "stream_scope",
        "token",
        "transcript",
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
    ) -> None:
        prompts = as_prompts(prompts)
        if not isinstance(context, Context):
            raise TypeError(f"context must be a trio_agent.Context, not {type(context).__name__}")
        if not prompts:
            last = context.messages[-1] if context.messages else None
            if last is None or type(last) is AssistantMessage:
                raise AgentUsageError(
                    "nothing to continue from: with no prompts, the context must end in a "
                    "user, tool-result or custom message (pass a prompt instead)"
                )
        self.config = config
        self.context = context
        self.model = model
        self.options: ModelOptions = config.model_options
        # Only a channel's consumer can go away; the callback is dropped when the run
        # ends (see EventDelivery.close), so a run is not a reference cycle.
        self.sink = EventDelivery(on_event, send, self._consumer_gone if send is not None else None)
        self.scope = trio.CancelScope()
        self.token = trio.lowlevel.current_trio_token()

        self.transcript: list[Message] = list(context.messages)
        # The transcript without CustomMessages, kept up to date as messages are
        # appended, so that the default request costs one tuple copy, not a filter pass
        # over the whole history every turn.
        self.llm_view: list[Message] = list(_default_convert(self.transcript))
        self.new_messages: list[Message] = []
        # Every call id in the transcript, so that a reply reusing one gets a fresh id.
        self.call_ids: set[str] = _call_ids(self.transcript)
        self.next_suffix: dict[str, int] = {}
        # Prompts count as pending from the start: a run that ends before appending
        # them reports them in `undelivered`, like polled messages.
        self.pending: list[Message] = list(prompts)
        self.steps = 0
        self.turn_index = 0
        self.turn_open = False
        self.turn_message: AssistantMessage | None = None
        self.turn_results: list[ToolResultMessage] = []
        self.turn_stats = ev.TurnStats()
        self.turns: list[ev.TurnStats] = []
        self.acc: StreamAccumulator | None = None
        self.acc_start_emitted = False
        self.stream_scope: trio.CancelScope | None = None
        self.batch: Batch | None = None
        self.aborted = False
        self.abort_reason: str | None = None
        # An interrupt in progress: "requested" while it cancels the reply being
        # streamed, "pending" when it came between a reply and its batch (or while a
        # turn was set up) and waits for the next steering poll or batch.
        self.interrupting: Interrupt = "none"
        self.last_all_terminate = False  # every result of the last batch set terminate
        self.ended = False
        self.result: AgentRunResult | None = None
        self._tool_specs: tuple[ToolSpec, ...] | None = None
        # The usage of new_messages[:usage_counted], summed only when a token budget is
        # checked or the usage is read (nothing per reply on the hot path).
        self.usage_so_far = Usage()
        self.usage_counted = 0
        self.probe = Probe.make(config.observer)  # None: nothing observes the run

    # --- control from other tasks -------------------------------------------------------

    def abort(self, reason: str | None = None, grace: float | None = None) -> None:
        if self.ended:
            # The run is delivering its closing events: what is left goes out within
            # cleanup_timeout (a stuck consumer cannot keep the run from ending).
            self.aborted = True
            closing = self.sink.closing_scope
            if closing is not None:
                closing.deadline = min(
                    closing.deadline, trio.current_time() + self.config.cleanup_timeout
                )
            else:
                self.scope.cancel()
            return
        if not self.aborted:
            self.aborted = True
            self.abort_reason = reason
        batch = self.batch
        if batch is not None:
            batch.stop_outcome = "aborted"
            batch.stop_text = _abort_text(self.abort_reason)
            if grace is not None and grace > 0:
                batch.scope.deadline = min(batch.scope.deadline, trio.current_time() + grace)
                return
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
            _interrupt_batch(self.batch)
            return True
        if self.stream_scope is not None:
            self.interrupting = "requested"
            self.stream_scope.cancel()
            return True
        self.interrupting = "pending"
        return True

    # --- events -------------------------------------------------------------------------

    # --- state changes (synchronous) ----------------------------------------------------

    def listen(self, listening: bool) -> None:
        """Build and deliver events from now on, or stop (the Agent listens while it has
        subscribers: a run that nobody watches builds no event at all)."""
        self.sink.listen(listening)

    @property
    def has_sink(self) -> bool:
        """Whether events are built and delivered at all (see :meth:`listen`)."""
        return self.sink.listening

    # --- state changes (synchronous) ----------------------------------------------------

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
        self.ended = True
        events: list[ev.AgentEvent] = []
        acc = self.acc
        if acc is not None:
            if acc.final is not None:
                message = acc.final
            elif reason == "aborted":
                message = acc.fail(self.abort_reason or "the run was aborted", "aborted")
            else:
                message = acc.fail("the run failed while the reply streamed", "error")
            if not self.acc_start_emitted:
                events.append(ev.MessageStart(message=acc.empty()))
            message = self._fresh_ids(message)
            self._push(message)
            events.append(ev.MessageEnd(message=message))
            self.turn_message = message
            self.acc = None
        new_results: list[ToolResultMessage] = []
        to_append: list[ToolResultMessage] = []
        answered = {r.tool_call_id for r in self.turn_results}
        batch = self.batch
        if batch is not None:
            events.extend(batch.finish_unfinished())
            new_results.extend(batch.results())
            to_append.extend(batch.take_unappended())
            self.turn_stats = batch.stats()
            self.batch = None
        answered.update(r.tool_call_id for r in new_results)
        if self.turn_message is not None:
            if reason != "aborted":
                why = f"the run ended ({reason})"
            elif self.abort_reason:
                why = f"the run was aborted ({self.abort_reason})"
            else:
                why = "the run was aborted"
            for call in self.turn_message.tool_calls:
                if call.id in answered:
                    continue
                answered.add(call.id)
                skipped = self._skipped(call, why, events)
                new_results.append(skipped)
                to_append.append(skipped)
        for result in to_append:
            events.extend(self._append(result))
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

    # --- the run ------------------------------------------------------------------------

    async def run(self) -> AgentRunResult:
        if self.probe is not None:
            return await self.probe.run(
                self._run, model=self.model, prompts=tuple(self.pending), ended=self._ended
            )
        return await self._run()

    @property
    def usage(self) -> Usage:
        """The token counts of the replies this run appended so far, summed."""
        new = self.new_messages
        if self.usage_counted < len(new):
            self.usage_so_far = self.usage_so_far + sum_usage(new[self.usage_counted :])
            self.usage_counted = len(new)
        return self.usage_so_far

    def _ended(self) -> tuple[ev.EndReason | None, int, Usage]:
        result = self.result
        return (None if result is None else result.reason), self.steps, self.usage

    async def _run(self) -> AgentRunResult:
        failure: BaseException | None = None
        try:
            with self.scope:
                await self._main()
        # Everything is re-raised below, once the transcript is paired.
        except BaseException as exc:  # noqa: ASYNC103, ASYNC104
            failure = representative(exc)
        if isinstance(failure, SinkFailure):
            self.sink.sink_dead = True
            failure = failure.original
        if failure is None or not isinstance(failure, Exception):
            # Finished, aborted through the run's own scope, or stopped by an outer cancel
            # scope / KeyboardInterrupt: those end "aborted" (a no-op if already ended).
            self._close("aborted")
            await self._deliver_closing(cancelled=isinstance(failure, trio.Cancelled))
            if failure is not None:
                raise failure from None
        else:
            self._close("error")
            await self._deliver_closing()
        assert self.result is not None
        if failure is not None:
            raise AgentRunError(
                f"the run failed: {type(failure).__name__}: {failure}", self.result
            ) from failure
        return self.result

    async def _deliver_closing(self, cancelled: bool = False) -> None:
        assert self.result is not None
        await self.sink.close(
            self.result,
            bound=self.config.cleanup_timeout,
            cancelled=cancelled,
            aborted=self.aborted,
        )

    def _consumer_gone(self) -> None:
        self.abort("the event consumer closed the channel")

    def _interrupt_is(self, state: Interrupt) -> bool:
        # A call, not an inline comparison: another task changes the state across awaits.
        return self.interrupting == state

    async def _checkpoint_abort(self) -> None:
        if self.aborted:
            self.scope.cancel()
        await trio.lowlevel.checkpoint_if_cancelled()

    async def _poll_steering(self) -> None:
        if self.interrupting == "pending":
            self.interrupting = "none"  # this poll delivers what an interrupt wanted
        await self._poll(self.config.get_steering_messages)

    async def _poll(self, hook: Callable[[], Any] | None) -> None:
        if hook is None:
            return
        messages = await maybe_await(hook())
        if messages:
            self.pending.extend(messages)

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

    async def _end(self, reason: ev.EndReason) -> None:
        self._close(reason)
        await self.sink.flush()

    async def _main(self) -> None:
        config = self.config
        await self.sink.emit(ev.AgentStart())
        await self._checkpoint_abort()
        await self._poll_steering()
        first = True
        has_more = True
        last_terminated = False
        while True:
            while has_more or self.pending:
                if not first:
                    if self.steps >= config.max_steps:
                        return await self._end("max_steps")
                    if (
                        config.max_input_tokens is not None or config.max_output_tokens is not None
                    ) and self._over_budget():
                        return await self._end("usage_limit")
                    await self._checkpoint_abort()
                    if config.prepare_next_turn is not None:
                        nxt = await maybe_await(config.prepare_next_turn(self._turn_context()))
                        if nxt is not None:
                            self._apply_next_turn(nxt)
                    if not self.pending:
                        await self._poll_steering()
                first = False
                await self._checkpoint_abort()
                decision = await self._turn()
                if decision.end is not None:
                    return await self._end(decision.end)
                batch_terminated = decision.action == "execute" and self.last_all_terminate
                last_terminated = batch_terminated
                has_more = decision.continues and not batch_terminated
                if config.should_stop_after_turn is not None and await maybe_await(
                    config.should_stop_after_turn(self._turn_context())
                ):
                    return await self._end("stopped")
                await self._poll_steering()
            await self._poll(config.get_follow_up_messages)
            if self.pending:
                continue
            return await self._end(natural_end(self.turn_message, terminated=last_terminated))

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

    def _apply_next_turn(self, nxt: NextTurn) -> None:
        if nxt.context is not None:
            self.context = nxt.context
            self.transcript = list(nxt.context.messages)
            self.llm_view = list(_default_convert(self.transcript))
            self.call_ids = _call_ids(self.transcript)
            self.next_suffix = {}
            self._tool_specs = None
        if nxt.model is not None:
            self.model = nxt.model
        if nxt.options is not None:
            self.options = nxt.options

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

    async def _llm_messages(self) -> Sequence[Message]:
        """The transcript as this request shows it to the model."""
        config = self.config
        if config.transform_context is None and config.convert_to_llm is None:
            return self.llm_view
        messages: Sequence[Message] = self.transcript
        if config.transform_context is not None:
            messages = await maybe_await(config.transform_context(tuple(messages)))
        if config.convert_to_llm is not None:
            return await maybe_await(config.convert_to_llm(tuple(messages)))  # type: ignore[no-any-return]
        return _default_convert(messages)

    async def _turn(self) -> Decision:
        config = self.config
        self.turn_open = True
        self.turn_message = None
        self.turn_results = []
        self.turn_stats = ev.TurnStats()
        index = self.turn_index
        self.turn_index += 1
        events: list[ev.AgentEvent] = [ev.TurnStart(index=index)] if self.has_sink else []
        pending, self.pending = self.pending, []
        for message in pending:
            events.extend(self._append(message))
        await self.sink.emit(*events)
        while True:
            messages = await self._llm_messages()
            if self.interrupting != "pending":
                break
            # Interrupted before the request went out: it takes the steering first.
            await self._poll_steering()
            pending, self.pending = self.pending, []
            await self.sink.emit(*(e for m in pending for e in self._append(m)))
        request = self._request(messages)
        await self._checkpoint_abort()
        self.steps += 1
        message = await self._stream(request)
        if self.interrupting == "requested":
            # An interrupted reply is kept (stop reason aborted) but the run goes on:
            # its calls are skipped and the steering poll delivers what interrupted it.
            self.interrupting = "none"
            decision = interrupted(message)
        else:
            decision = decide(message, continue_after_length=config.continue_after_length)
        self.last_all_terminate = False
        if decision.action == "execute":
            await self._run_batch(message, decision.calls)
        elif decision.action == "skip":
            await self._skip(decision)
        self.turn_open = False
        self.turns.append(self.turn_stats)
        if self.has_sink:
            await self.sink.emit(
                ev.TurnEnd(
                    message=message,
                    tool_results=tuple(self.turn_results),
                    stats=self.turn_stats,
                )
            )
        return decision

    async def _stream(self, request: ModelRequest) -> AssistantMessage:
        acc = StreamAccumulator()
        self.acc = acc
        self.acc_start_emitted = False
        if self.interrupting == "requested":
            self.interrupting = "none"
        idle = self.config.stream_idle_timeout
        with trio.CancelScope() as scope:
            self.stream_scope = scope
            if idle is not None:
                scope.deadline = trio.current_time() + idle
            stream = self.model.stream(request)
            if self.probe is not None:
                stream = self.probe.request(stream, self.model, request, self.steps)
            try:
                async with stream as events:
                    async for event in events:
                        if idle is not None:
                            scope.deadline = math.inf
                        show = acc.feed(event)
                        if self.has_sink:
                            if not self.acc_start_emitted and acc.started:
                                self.acc_start_emitted = True
                                await self.sink.emit(ev.MessageStart(message=acc.empty()))
                            if show:
                                await self.sink.emit(
                                    ev.MessageUpdate(message=acc.snapshot(), event=event)
                                )
                        if acc.final is not None:
                            break
                        if idle is not None:
                            scope.deadline = trio.current_time() + idle
            except Exception as exc:
                if acc.final is None:
                    acc.fail(f"the model stream failed: {type(exc).__name__}: {exc}")
        self.stream_scope = None
        if scope.cancelled_caught and acc.final is None:
            if self._interrupt_is("requested"):  # set by interrupt() meanwhile
                acc.fail("interrupted by user", "aborted")
            else:
                acc.fail(f"the model stream was silent for {idle:g}s (stream_idle_timeout)")
        message = self._fresh_ids(acc.finish())
        # The message enters the transcript in the same step as the stream stops being
        # "in flight", so a cancel at any later checkpoint finds it there.
        self.acc = None
        self._push(message)
        self.turn_message = message
        if self.has_sink:
            closing: list[ev.AgentEvent] = []
            if not self.acc_start_emitted:
                self.acc_start_emitted = True
                closing.append(ev.MessageStart(message=acc.empty()))
            closing.append(ev.MessageEnd(message=message))
            await self.sink.emit(*closing)
        return message

    def _fresh_ids(self, message: AssistantMessage) -> AssistantMessage:
        """``message`` with every call id already used in the transcript renamed.

        Some servers restart their ids each turn (``call_0`` again): such an id becomes
        ``<id>~<n>``, the smallest ``n`` from 2 up that is used neither in the
        transcript nor in this reply, the same for each of its uses in the reply. A
        deterministic rename, so the run's calls and results pair up. Ids repeated
        within the one reply are left alone (that reply is refused as a whole).
        """
        calls = message.tool_calls
        if not calls:
            return message
        taken = self.call_ids
        renames = {c.id: c.id for c in calls if c.id in taken}
        if renames:
            in_reply = {c.id for c in calls}
            for old in renames:
                n = self.next_suffix.get(old, 2)
                while (new := f"{old}~{n}") in taken or new in in_reply:
                    n += 1
                self.next_suffix[old] = n + 1
                renames[old] = new
                in_reply.add(new)
            message = attrs.evolve(
                message,
                content=tuple(
                    attrs.evolve(b, id=renames[b.id])
                    if type(b) is ToolCall and b.id in renames
                    else b
                    for b in message.content
                ),
            )
        taken.update(c.id for c in message.tool_calls)
        return message

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

    async def _skip(self, decision: Decision) -> None:
        events: list[ev.AgentEvent] = []
        results = [self._skipped(call, decision.skip_why, events) for call in decision.calls]
        for result in results:
            events.extend(self._append(result))
        self.turn_results.extend(results)
        await self.sink.emit(*events)

    async def _run_batch(self, message: AssistantMessage, calls: tuple[Any, ...]) -> None:
        context = self.context
        if self.config.before_tool_call is not None or self.config.after_tool_call is not None:
            # The hooks see the conversation as it stands, this reply included.
            context = self._context_now()
        batch = Batch(
            message=message,
            calls=calls,
            context=context,
            config=self.config,
            sink=self.sink,
            append=self._append,
        )
        batch.probe = self.probe
        self.batch = batch
        if self.interrupting == "pending":
            self.interrupting = "none"
            _interrupt_batch(batch)
        await batch.run()
        events = batch.finish_unfinished()
        results = batch.results()
        self.turn_stats = batch.stats()
        self.last_all_terminate = batch.all_terminate()
        self.batch = None
        for result in batch.take_unappended():
            events.extend(self._append(result))
        self.turn_results.extend(results)
        await self.sink.emit(*events)
        if self.aborted:
            await self._checkpoint_abort()


def _call_ids(messages: Sequence[Message]) -> set[str]:
    return {
        b.id
        for m in messages
        if type(m) is AssistantMessage
        for b in m.content
        if type(b) is ToolCall
    }


def _interrupt_batch(batch: Batch) -> None:
    batch.stop_outcome = "skipped"
    batch.stop_text = "Tool call skipped: interrupted by user."
    batch.scope.cancel()


def _abort_text(reason: str | None) -> str:
    return f"Tool call aborted: {reason or 'the run was aborted'}."
