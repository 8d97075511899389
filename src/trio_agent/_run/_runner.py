"""The runner: the trio driver of one run (started by ``_loop``'s entry points).

Theory of operation
-------------------
Where a run goes is decided by its turn machine (``_core._turn.TurnMachine``: the
loop's steps, the limits, the polls, what a reply means, the interrupt, the abort and
the end, as tables; see the theory of operation there). The machine never awaits. A
:class:`Runner` drives it: it asks the machine for the next step (``next()``),
performs it — emits the events, calls a hook or a poll, streams the reply, runs the
batch, takes a checkpoint — and hands back what came of it. Every ``await`` of a run
is here; every change to the run's state is one synchronous call into the machine,
made *before* the events about it are emitted (so code that reads the state — the
Agent's ``state`` — never lags the events), and never cut half-way by a cancel.
Events are delivered by ``_delivery.EventDelivery`` (to the ``on_event`` sink, then the
channel; each exactly once, in order, whatever cancels a delivery — see there).
Whatever ends the run, at whatever checkpoint — the run's own cancel scope
(``abort``), the caller's cancel scope, an exception — ``TurnMachine.close`` finds the
state whole, gives every unanswered call a result, and builds the closing events.
That is the pairing invariant: it never depends on how far an ``await`` got. After an
abort or an outer cancel, the closing events are delivered within
``LoopConfig.cleanup_timeout`` (a stuck sink cannot keep the run from ending).

Cancel scopes: entering one costs about as much as a full checkpoint, so a run has as
few as it can. A run that another task may abort or interrupt (``open_agent_loop``, the
Agent) runs in one scope of its own. An abort cancels it and the run ends. An interrupt
cancels it too: the scope catches that, and the run goes on in a fresh scope, where the
machine first asks to end the turn that was cut short (``end_cut_turn``). So a run has
one scope, plus one per interrupt — none per turn. A ``run_agent_loop`` run, which
nothing outside can reach, has none (the caller's scopes still stop it) unless
``run_timeout`` gives it one, with that deadline (which ends the run ``timeout``,
cleaned up as an abort); ``stream_idle_timeout`` adds one around each stream.

``_batch.Batch`` runs one batch of tool calls; ``_stream.StreamAccumulator`` turns the
model's events into the assistant message.

Exception policy: a tool's or the model's ``Exception`` becomes data (an error result, an
``error`` reply). Any other ``Exception`` (a hook, the event sink, a bug) ends the run with
``AgentEnd(reason="error")`` and raises :class:`AgentRunError` with the original as
``__cause__``. ``Cancelled``, ``KeyboardInterrupt`` and other ``BaseException``s propagate
after the clean-up, never wrapped in an exception group.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import trio

from .._core import (
    AgentRunError,
    ContextRequest,
    NextTurn,
    RequestContext,
    TurnMachine,
    as_history,
    as_prompts,
    default_convert,
    hook_returned,
    maybe_await,
)
from .._core import events as ev
from ._batch import Batch
from ._cancel import NO_SCOPE, representative
from ._delivery import EventDelivery, OnEvent, SinkFailure
from ._observe import ObservedStream, Probe
from ._stream import StreamAccumulator

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Sequence

    from .._core import (
        AbortAct,
        AgentRunResult,
        Context,
        LoopConfig,
        MaybeAwaitable,
        Message,
        Messages,
        Model,
        OutputPlan,
        ResumePlan,
        Usage,
    )

    PollHook: TypeAlias = Callable[[], MaybeAwaitable[Messages]] | None

__all__ = ["OnEvent", "Runner"]


class Runner:
    """One run: drives its :class:`TurnMachine` (see the module docstring).

    Slotted: a thousand runs at once each save the instance dictionary.
    """

    __slots__ = ("m", "probe", "scope", "sink", "token")

    def __init__(
        self,
        prompts: Sequence[Message],
        context: Context,
        model: Model,
        config: LoopConfig,
        *,
        on_event: OnEvent | None = None,
        send: trio.MemorySendChannel[ev.AgentEvent] | None = None,
        controlled: bool = True,
        polls: tuple[PollHook, PollHook] | None = None,
        delivery: EventDelivery | None = None,
        plan: ResumePlan | None = None,
        output: OutputPlan | None = None,
    ) -> None:
        # The inputs were checked where they entered (``_core._inputs``): trusted here.
        # Only a channel's consumer can go away; the callback is dropped when the run
        # ends (see EventDelivery.close), so a run is not a reference cycle.
        self.sink = (
            delivery
            if delivery is not None
            else EventDelivery(on_event, send, self._consumer_gone if send is not None else None)
        )
        self.m = TurnMachine(
            prompts,
            context,
            model,
            config,
            listener=self.sink,
            # The steering and follow-up polls: the config's, or ``polls`` (the Agent's
            # queues, given apart so that no per-run copy of its config is made).
            polls=(
                (config.get_steering_messages, config.get_follow_up_messages)
                if polls is None
                else polls
            ),
            interruptible=controlled,
            # The Agent's polls hand out messages its queues took checked.
            trusted_polls=polls is not None,
            plan=plan,
            output=output,
        )
        # A run that another task may abort or interrupt (through open_agent_loop's
        # handle, or the Agent) has a cancel scope of its own. A run nobody can reach
        # (run_agent_loop) needs none — the caller's own cancel scopes still stop it —
        # and saves its cost; unless it has a run_timeout: its deadline is on the run's
        # scope.
        self.scope = trio.CancelScope() if controlled or config.run_timeout is not None else None
        self.token = trio.lowlevel.current_trio_token()
        self.probe = Probe.make(config.observer)  # None: nothing observes the run

    # --- what others read ----------------------------------------------------------------

    @property
    def result(self) -> AgentRunResult | None:
        """How the run ended; None while it runs."""
        return self.m.result

    @property
    def ended(self) -> bool:
        """Whether the run ended (its result is set; closing events may still be going
        out)."""
        return self.m.ended

    @property
    def new_messages(self) -> list[Message]:
        """The messages the run appended so far (the run's own list: do not change it)."""
        return self.m.new_messages

    @property
    def steps(self) -> int:
        """Model requests made so far."""
        return self.m.steps

    @property
    def usage(self) -> Usage:
        """The token counts of the replies this run appended so far, summed."""
        return self.m.usage

    @property
    def acc(self) -> StreamAccumulator | None:
        """The reply being streamed, if one is."""
        return cast("StreamAccumulator | None", self.m.acc)

    @property
    def batch(self) -> Batch | None:
        """The batch being run, if one is."""
        return cast("Batch | None", self.m.batch)

    # --- control from other tasks ------------------------------------------------------

    def abort(self, reason: str | None = None, grace: float | None = None) -> None:
        """Stop the run (see ``AgentRun.abort``); not a checkpoint."""
        self._act(
            self.m.abort(reason, grace=grace is not None and grace > 0 and self.scope is not None),
            grace,
        )

    def _act(self, act: AbortAct, grace: float | None = None) -> None:
        if act == "cancel":
            self._cancel()
        elif act == "grace":
            # The batch runs in the run's scope: the calls get `grace` to finish.
            assert self.scope is not None
            assert grace is not None
            self.scope.deadline = min(self.scope.deadline, trio.current_time() + grace)
        else:
            # The run is delivering its closing events: what is left goes out within
            # cleanup_timeout (a stuck consumer cannot keep the run from ending).
            closing = self.sink.closing_scope
            if closing is not None:
                closing.deadline = min(
                    closing.deadline, trio.current_time() + self.m.config.cleanup_timeout
                )
            else:
                self._cancel()

    def _cancel(self) -> None:
        """Cancel the run's own scope (only a controlled run is aborted or interrupted:
        it has one)."""
        assert self.scope is not None, "only a controlled run is aborted or interrupted"
        self.scope.cancel()

    def interrupt(self) -> bool:
        """Cut the running batch or reply short; the run goes on (see the turn machine's
        interrupt). False when the run is aborting or ended: nothing to interrupt."""
        cut = self.m.request_interrupt()
        if cut is None:
            return False
        if cut:
            self._cancel()
        return True

    def _consumer_gone(self) -> None:
        self.abort("the event consumer closed the channel")

    # --- the run -------------------------------------------------------------------------

    def run(self) -> Coroutine[Any, Any, AgentRunResult]:
        """The run, to await (a plain method returning the coroutine: one frame less
        kept alive for as long as the run lasts)."""
        if self.probe is not None:
            return self.probe.run(
                self._run, model=self.m.model, prompts=tuple(self.m.pending), ended=self._ended
            )
        return self._run()

    def _ended(self) -> tuple[ev.EndReason | None, int, Usage]:
        m = self.m
        return (None if m.result is None else m.result.reason), m.steps, m.usage

    async def _run(self) -> AgentRunResult:
        m = self.m
        failure: BaseException | None = None
        timeout = m.config.run_timeout
        if timeout is not None:
            assert self.scope is not None  # a run with a run_timeout has its own scope
            self.scope.deadline = trio.current_time() + timeout
        try:
            while True:
                scope = self.scope
                with scope if scope is not None else NO_SCOPE:
                    await self._main()
                if scope is None or not scope.cancelled_caught or m.lifecycle != "running":
                    break
                if trio.current_time() >= scope.deadline:
                    # The run_timeout's deadline (the only one a running run's scope has).
                    assert timeout is not None
                    self._act(m.time_out(timeout))
                    break
                # An interrupt cut a turn short (the run's scope caught it): the run goes
                # on in a fresh scope, which first ends that turn (by the same deadline).
                self.scope = trio.CancelScope(deadline=scope.deadline)
        # Everything is re-raised below, once the transcript is paired.
        except BaseException as exc:  # noqa: ASYNC103, ASYNC104
            failure = representative(exc)
        if isinstance(failure, SinkFailure):
            failure = failure.original
        if failure is None or not isinstance(failure, Exception):
            # Finished, aborted through the run's own scope, timed out, or stopped by an
            # outer cancel scope / KeyboardInterrupt: those end "aborted" or "timeout" (a
            # no-op if already ended).
            self._close("timeout" if m.timed_out else "aborted")
            await self._deliver_closing(cancelled=isinstance(failure, trio.Cancelled))
            if failure is not None:
                raise failure from None
        else:
            self._close("error")
            await self._deliver_closing()
        result = m.result
        assert result is not None
        if failure is not None:
            raise AgentRunError(
                f"the run failed: {type(failure).__name__}: {failure}", result
            ) from failure
        return result

    def _close(self, reason: ev.EndReason) -> None:
        events = self.m.close(reason)
        if events is not None:
            self.sink.owe(events)

    async def _deliver_closing(self, cancelled: bool = False) -> None:
        m = self.m
        assert m.result is not None
        await self.sink.close(
            m.result,
            bound=m.config.cleanup_timeout,
            cancelled=cancelled,
            aborted=m.lifecycle == "aborted",
        )

    async def _main(self) -> None:
        """Perform what the machine asks for, step by step, until it asks to end."""
        m = self.m
        config = m.config
        sink = self.sink
        while True:
            ask = m.next()
            if ask == "check_abort":
                await self._checkpoint_abort()
            elif ask == "turn":
                await self._turn()
            elif ask == "poll_steering":
                await self._poll(m.steering_poll, "get_steering_messages")
            elif ask == "poll_follow_up":
                await self._poll(m.follow_up_poll, "get_follow_up_messages")
            elif ask == "should_stop":
                assert config.should_stop_after_turn is not None
                m.stop_said(
                    bool(await maybe_await(config.should_stop_after_turn(m.turn_context())))
                )
            elif ask == "prepare_next_turn":
                assert config.prepare_next_turn is not None
                nxt = hook_returned(
                    "prepare_next_turn",
                    await maybe_await(config.prepare_next_turn(m.turn_context())),
                    NextTurn,
                )
                if nxt is not None:
                    m.apply_next_turn(nxt)
            elif ask == "start":
                if sink.listening:
                    await sink.emit(ev.AgentStart())
            elif ask == "end_cut_turn":
                await self._finish_turn()
            elif ask == "resume":
                # A resumed run answers the deferred calls first: the decisions marker
                # goes out (and is written) before any approved call runs.
                await sink.emit(*m.resume_turn())
                await self._finish_turn()
            else:
                assert ask == "end", ask
                self._close(m.ending)
                await sink.flush()
                return

    async def _checkpoint_abort(self) -> None:
        if self.m.lifecycle == "aborting":
            # An abort with a grace only set a deadline: the run stops here.
            self._cancel()
        await trio.lowlevel.checkpoint_if_cancelled()

    async def _poll(self, hook: Callable[[], Any] | None, name: str) -> None:
        """Call a poll hook; what it returns is checked as prompts are (a sequence of
        messages or one str; None or empty for nothing): a wrong value fails the run
        with an error naming the hook, before anything of it enters the transcript. The
        Agent's polls are not checked again: its queues checked each message when it was
        queued."""
        assert hook is not None
        messages = await maybe_await(hook())
        if messages:
            self.m.polled(
                messages if self.m.trusted_polls else as_prompts(messages, f"{name}()'s result")
            )

    async def _llm_messages(self) -> Sequence[Message]:
        """The transcript as this request shows it to the model, through the context
        policy, ``transform_context`` and ``convert_to_llm`` (one of them is set). A
        compaction the policy reports goes out as its event first."""
        m = self.m
        config = m.config
        messages: Sequence[Message] = m.transcript
        policy = config.context
        if policy is not None:
            context = m.context
            view = await policy.compact(
                tuple(messages),
                ContextRequest(
                    system_prompt=context.system_prompt,
                    tools=context.tools,
                    model=m.model,
                    options=m.options,
                    overflow=m.overflow_retry,
                ),
            )
            messages = as_history(view.messages, "the context policy's view")
            if view.compacted is not None and self.sink.listening:
                await self.sink.emit(view.compacted)
        if config.transform_context is not None:
            messages = as_history(
                await maybe_await(config.transform_context(tuple(messages))),
                "transform_context()'s result",
            )
        if config.convert_to_llm is not None:
            return as_history(
                await maybe_await(config.convert_to_llm(tuple(messages))),
                "convert_to_llm()'s result",
            )
        return default_convert(messages)

    async def _turn(self) -> None:
        """One turn: open it, shape and send the request, stream the reply, then finish
        the turn (:meth:`_finish_turn`)."""
        m = self.m
        sink = self.sink
        events = m.open_turn()
        if sink.listening:
            await sink.emit(*events)
        config = m.config
        prepared = config.prepare_request is None
        while True:
            if not m.takes_steering_first():
                if not prepared:
                    # Once per request, with its pending messages appended.
                    prepared = True
                    await self._prepare_request()
                    continue  # an interrupt may have come while it ran
                if (
                    config.transform_context is None
                    and config.convert_to_llm is None
                    and config.context is None
                ):
                    messages: Sequence[Message] = m.llm_view
                else:
                    messages = await self._llm_messages()
                if not m.takes_steering_first():
                    break
            # Interrupted before the request went out: it takes the steering first.
            if m.steering_polled():
                await self._poll(m.steering_poll, "get_steering_messages")
            events = m.take_pending()
            if sink.listening:
                await sink.emit(*events)
        await self._checkpoint_abort()
        # The reply and its batch run in the run's own scope: an interrupt cancels it,
        # and the run ends this turn in a fresh one (the machine asks "end_cut_turn").
        # The request is no local here: it is not kept alive while the batch runs.
        await self._stream(messages)
        await self._finish_turn()

    async def _prepare_request(self) -> None:
        """Call ``prepare_request`` and apply what it returned (a ``NextTurn`` or None;
        anything else, or an exception, fails the run)."""
        m = self.m
        hook = m.config.prepare_request
        assert hook is not None
        nxt = hook_returned(
            "prepare_request",
            await maybe_await(
                hook(RequestContext(context=m.context_now(), model=m.model, options=m.options))
            ),
            NextTurn,
        )
        if nxt is not None:
            m.apply_next_turn(nxt)

    async def _finish_turn(self) -> None:
        """Take the turn from where it stands — its reply streaming, its calls to run or
        skip, its batch running — to its ``TurnEnd``. Also what ends a turn that an
        interrupt cut short (the machine then makes a cut reply's or batch's calls
        skipped)."""
        m = self.m
        sink = self.sink
        if m.phase == "streaming":
            await self._end_reply()
        if m.phase == "replied":
            decision = m.decision
            assert decision is not None
            if decision.action == "execute":
                # Run from here, not from a helper coroutine: one frame less kept alive
                # while the tools run.
                batch = self._start_batch(decision.calls)
                await batch.run()
                # An interrupt that came after the last call settled cancelled the run's
                # scope with no checkpoint since: take that cancel now, while the batch
                # is still the run's, so that the resumed run ends this batch (each call
                # keeps its result) — never later, when it would take the turn for a cut
                # reply.
                await trio.lowlevel.checkpoint_if_cancelled()
            else:
                events = m.skip_calls()
                if sink.listening:
                    await sink.emit(*events)
        if m.phase == "executing":
            events = m.end_batch()
            if sink.listening:
                await sink.emit(*events)
            if m.lifecycle == "aborting":
                await self._checkpoint_abort()
        turn_end = m.end_turn()
        if sink.listening:
            await sink.emit(*turn_end)

    async def _stream(self, messages: Sequence[Message]) -> None:
        """Send the request and stream the reply; it enters the transcript (see
        :meth:`_end_reply`).

        An interrupt cancels the run's scope while the reply streams, and the run ends
        the reply in a fresh one. The idle timeout has a scope of its own, here.
        """
        m = self.m
        acc = StreamAccumulator()
        request = m.start_reply(messages, acc)
        idle = m.config.stream_idle_timeout
        timer = trio.CancelScope() if idle is not None else None
        span = math.inf if idle is None else idle
        sink = self.sink
        with timer if timer is not None else NO_SCOPE:
            if timer is not None:
                timer.deadline = trio.current_time() + span
            model = m.model
            stream = model.stream(request)
            if self.probe is not None:
                stream = ObservedStream(self.probe, stream, model, request, m.steps)
            try:
                async with stream as events:
                    async for event in events:
                        if timer is not None:
                            timer.deadline = math.inf
                        show = acc.feed(event)
                        if sink.listening:
                            if not acc.start_emitted and acc.started:
                                acc.start_emitted = True
                                await sink.emit(ev.MessageStart(message=acc.empty()))
                            if show:
                                await sink.emit(
                                    ev.MessageUpdate(message=acc.snapshot(), event=event)
                                )
                                answer = m.answer
                                if answer is not None:
                                    update = answer.feed(event)
                                    if update is not None:
                                        await sink.emit(update)
                        if acc.final is not None:
                            break
                        if timer is not None:
                            timer.deadline = trio.current_time() + span
            except Exception as exc:
                if acc.final is None:
                    acc.fail(f"the model stream failed: {type(exc).__name__}: {exc}")
        if (
            timer is not None
            and timer.cancelled_caught
            and acc.final is None
            and m.interrupt != "cutting"
        ):
            acc.fail(f"the model stream was silent for {idle:g}s (stream_idle_timeout)")
        await self._end_reply()

    async def _end_reply(self) -> None:
        """The reply is over — finished, failed, or cut short by an interrupt — and
        enters the transcript; then its closing events go out."""
        # As after a batch: an interrupt's cancel not taken yet is taken while the reply
        # is still the one in flight.
        await trio.lowlevel.checkpoint_if_cancelled()
        events = self.m.end_reply()
        if self.sink.listening:
            await self.sink.emit(*events)

    def _start_batch(self, calls: tuple[Any, ...]) -> Batch:
        """The batch of ``calls``, made the run's current one (to run next, in the run's
        scope); cut at once if an interrupt was pending."""
        m = self.m
        config = m.config
        message = m.turn_message
        assert message is not None
        context = m.context
        if config.before_tool_call is not None or config.after_tool_call is not None:
            # The hooks see the conversation as it stands, this reply included.
            context = m.context_now()
        batch = Batch(
            message=message,
            calls=calls,
            context=context,
            config=config,
            sink=self.sink,
            settled=m.settle,
            tools=m.batch_tools,
            plan=m.plan,
        )
        batch.probe = self.probe
        if m.start_batch(batch):
            self._cancel()
        return batch
