"""The runner: one run of pi's two-level loop (started by ``_loop``'s entry points).

Theory of operation
-------------------
A run is one :class:`Runner`. Its state is plain data, kept by its base class
``_run_state.RunState`` — the working transcript, the messages it appended, the messages
polled but not yet appended (``pending``), the turn in progress
(``turn_open``/``turn_message``/``turn_results``), the reply being streamed (``acc``),
the tool batch being run (``batch``) and where the run is in its lifecycle
(``lifecycle``: running, aborting, ended, aborted — see ``_run_state.Lifecycle``) — and
updated *synchronously*, before any event about it is emitted (so code that reads the
state — the Agent's ``state`` — never lags the events). This module is the loop that
drives it: every ``await`` of a run is here.
Events are delivered afterwards by ``_sink.EventDelivery`` (to the ``on_event`` sink,
then the channel; each exactly once, in order, whatever cancels a delivery — see there).
Whatever ends the run, at whatever checkpoint — the run's own cancel scope (``abort``),
the caller's cancel scope, an exception — ``RunState._close`` can read the state, give
every unanswered call a result, and queue the closing events.
That is the pairing invariant: it never depends on how far an ``await`` got. After an
abort or an outer cancel, the closing events are delivered within
``LoopConfig.cleanup_timeout`` (a stuck sink cannot keep the run from ending).

Cancel scopes: entering one costs about as much as a full checkpoint, so a run has as
few as it can. A run that another task may abort or interrupt (``open_agent_loop``, the
Agent) runs in one scope of its own. An abort cancels it and the run ends. An interrupt
cancels it too: the scope catches that, and the run goes on in a fresh scope, which
first ends the turn that was cut short (:meth:`Runner._end_cut_turn`; the loop's own
place is kept in a ``_Progress``). So a run has one scope, plus one per interrupt — none
per turn. A ``run_agent_loop`` run, which nothing outside can reach, has none (the
caller's scopes still stop it) unless ``run_timeout`` gives it one, with that deadline
(which ends the run ``timeout``, cleaned up as an abort); ``stream_idle_timeout`` adds
one around each stream.

``_policy.decide`` says what each reply means (the stop-reason table); ``_batch.Batch``
runs one batch of tool calls; ``_stream.StreamAccumulator`` turns the model's events into
the assistant message; ``_call_ids.CallIds`` renames a call id the transcript already
holds.

Exception policy: a tool's or the model's ``Exception`` becomes data (an error result, an
``error`` reply). Any other ``Exception`` (a hook, the event sink, a bug) ends the run with
``AgentEnd(reason="error")`` and raises :class:`AgentRunError` with the original as
``__cause__``. ``Cancelled``, ``KeyboardInterrupt`` and other ``BaseException``s propagate
after the clean-up, never wrapped in an exception group.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._core import _events as ev
from .._core._config import NextTurn
from .._core._errors import AgentRunError
from .._core._messages import as_history
from .._core._policy import TERMINATED, Decision, decide, interrupted, natural_end
from .._core._serde import as_prompts
from .._core._util import NO_SCOPE, hook_returned, maybe_await, representative
from ._batch import Batch
from ._observed import ObservedStream
from ._run_state import Interrupt, RunState, default_convert
from ._sink import OnEvent, SinkFailure
from ._stream import StreamAccumulator

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Sequence

    from .._core._config import AgentRunResult
    from .._core._messages import AssistantMessage, Message, Usage
    from .._core._model import ModelRequest

__all__ = ["OnEvent", "Runner"]


@attrs.define(slots=True)
class _Progress:
    """Where a run's loop is, kept across the scopes it runs in (an interrupt that cuts
    a turn short ends the scope; the loop goes on in a fresh one)."""

    first: bool = True  # no turn has started yet
    has_more: bool = True  # the last turn asks for another
    last: Decision | None = None  # what the last turn came to
    cut: bool = False  # an interrupt cut the current turn short


class Runner(RunState):
    """One run: the two-level loop over its state (see the module docstring).

    The state, its attributes (``__slots__``) and its synchronous changes — ``abort``,
    ``interrupt``, ``listen``, the closing — are the base class's (``_run_state``).
    """

    __slots__ = ()

    # --- the run ------------------------------------------------------------------------

    def run(self) -> Coroutine[Any, Any, AgentRunResult]:
        """The run, to await (a plain method returning the coroutine: one frame less
        kept alive for as long as the run lasts)."""
        if self.probe is not None:
            return self.probe.run(
                self._run, model=self.model, prompts=tuple(self.pending), ended=self._ended
            )
        return self._run()

    def _ended(self) -> tuple[ev.EndReason | None, int, Usage]:
        result = self.result
        return (None if result is None else result.reason), self.steps, self.usage

    async def _run(self) -> AgentRunResult:
        failure: BaseException | None = None
        progress = _Progress()
        if self.config.run_timeout is not None:
            assert self.scope is not None  # a run with a run_timeout has its own scope
            self.scope.deadline = trio.current_time() + self.config.run_timeout
        try:
            while True:
                scope = self.scope
                with scope if scope is not None else NO_SCOPE:
                    await self._main(progress)
                if scope is None or not scope.cancelled_caught or self.lifecycle != "running":
                    break
                if trio.current_time() >= scope.deadline:
                    # The run_timeout's deadline (the only one a running run's scope has).
                    self.time_out()
                    break
                # An interrupt cut a turn short (the run's scope caught it): the run goes
                # on in a fresh scope, which first ends that turn (by the same deadline).
                progress.cut = True
                self.scope = trio.CancelScope(deadline=scope.deadline)
        # Everything is re-raised below, once the transcript is paired.
        except BaseException as exc:  # noqa: ASYNC103, ASYNC104
            failure = representative(exc)
        if isinstance(failure, SinkFailure):
            self.sink.sink_dead = True
            failure = failure.original
        if failure is None or not isinstance(failure, Exception):
            # Finished, aborted through the run's own scope, timed out, or stopped by an
            # outer cancel scope / KeyboardInterrupt: those end "aborted" or "timeout" (a
            # no-op if already ended).
            self._close("timeout" if self.timed_out else "aborted")
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
            aborted=self.lifecycle == "aborted",
        )

    def _interrupt_is(self, state: Interrupt) -> bool:
        # A call, not an inline comparison: another task changes the state across awaits.
        return self.interrupting == state

    async def _checkpoint_abort(self) -> None:
        if self.lifecycle == "aborting":
            self._cancel()
        await trio.lowlevel.checkpoint_if_cancelled()

    async def _poll_steering(self) -> None:
        if self.interrupting == "pending":
            self.interrupting = "none"  # this poll delivers what an interrupt wanted
        await self._poll(self.steering_poll, "get_steering_messages")

    async def _poll(self, hook: Callable[[], Any] | None, name: str) -> None:
        """Call a poll hook; what it returns is checked as prompts are (a sequence of
        messages or one str; None or empty for nothing): a wrong value fails the run
        with an error naming the hook, before anything of it enters the transcript."""
        if hook is None:
            return
        messages = await maybe_await(hook())
        if messages:
            self.pending.extend(as_prompts(messages, f"{name}()'s result"))

    async def _end(self, reason: ev.EndReason) -> None:
        self._close(reason)
        await self.sink.flush()

    async def _main(self, progress: _Progress) -> None:
        config = self.config
        decision: Decision | None = None  # a turn's, when the run resumes after it
        if progress.cut:
            progress.cut = False
            decision = await self._end_cut_turn()
        else:
            await self.sink.emit(ev.AgentStart())
            await self._checkpoint_abort()
            await self._poll_steering()
        while True:
            while progress.has_more or self.pending or decision is not None:
                if decision is None:
                    if not progress.first:
                        if self.steps >= config.max_steps:
                            return await self._end("max_steps")
                        if (
                            config.max_input_tokens is not None
                            or config.max_output_tokens is not None
                        ) and self._over_budget():
                            return await self._end("usage_limit")
                        await self._checkpoint_abort()
                        if config.prepare_next_turn is not None:
                            nxt = hook_returned(
                                "prepare_next_turn",
                                await maybe_await(config.prepare_next_turn(self._turn_context())),
                                NextTurn,
                            )
                            if nxt is not None:
                                self._apply_next_turn(nxt)
                        if not self.pending:
                            await self._poll_steering()
                    progress.first = False
                    await self._checkpoint_abort()
                    decision = await self._turn()
                if decision.end is not None:
                    return await self._end(decision.end)
                progress.last = decision
                progress.has_more = decision.continues
                decision = None
                if config.should_stop_after_turn is not None and await maybe_await(
                    config.should_stop_after_turn(self._turn_context())
                ):
                    return await self._end("stopped")
                await self._poll_steering()
            await self._poll(self.follow_up_poll, "get_follow_up_messages")
            if self.pending:
                continue
            return await self._end(
                natural_end(self.turn_message, terminated=progress.last is TERMINATED)
            )

    async def _llm_messages(self) -> Sequence[Message]:
        """The transcript as this request shows it to the model."""
        config = self.config
        if config.transform_context is None and config.convert_to_llm is None:
            return self.llm_view
        messages: Sequence[Message] = self.transcript
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

    async def _turn(self) -> Decision:
        config = self.config
        self.turn_open = True
        self.turn_message = None
        self.turn_results = []
        self.turn_stats = ev.NO_STATS
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
        await self._checkpoint_abort()
        self.steps += 1
        # The reply and its batch run in the run's own scope: an interrupt cancels it,
        # and the run ends this turn in a fresh one (see _end_cut_turn). The request is
        # no local here: it is not kept alive while the batch runs.
        message = await self._stream(self._request(messages))
        if self.interrupting == "requested":
            # An interrupted reply is kept (stop reason aborted) but the run goes on:
            # its calls are skipped and the steering poll delivers what interrupted it.
            self.interrupting = "none"
            decision = interrupted(message)
        else:
            decision = decide(message, continue_after_length=config.continue_after_length)
        if decision.action == "execute":
            self.turn_decision = decision
            # Run from here, not from a helper coroutine: one frame less kept alive
            # while the tools run.
            batch = self._start_batch(message, decision.calls)
            await batch.run()
            # An interrupt that came after the last call settled cancelled the run's
            # scope with no checkpoint since: take that cancel now, while the batch is
            # still the run's, so that the resumed run ends this batch (each call keeps
            # its result) — never later, when it would take the turn for a cut reply.
            await trio.lowlevel.checkpoint_if_cancelled()
            if await self._finish_batch(batch):
                decision = TERMINATED  # every result set terminate: no further request
        elif decision.action == "skip":
            await self._skip(decision)
        return await self._close_turn(message, decision)

    async def _end_cut_turn(self) -> Decision:
        """End the turn an interrupt cut short (the run resumes in a fresh scope): a
        cut reply is kept and its calls skipped; a cut batch's unfinished calls get
        their skipped results. Then the turn ends as any other."""
        batch = self.batch
        if batch is not None:
            decision = self.turn_decision
            assert decision is not None
            assert self.turn_message is not None
            if await self._finish_batch(batch):
                decision = TERMINATED
            return await self._close_turn(self.turn_message, decision)
        message = await self._end_reply()
        self.interrupting = "none"
        decision = interrupted(message)
        await self._skip(decision)
        return await self._close_turn(message, decision)

    async def _close_turn(self, message: AssistantMessage, decision: Decision) -> Decision:
        self.turn_open = False
        self.turn_decision = None
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
        """Stream the reply; it enters the transcript (see :meth:`_end_reply`).

        An interrupt cancels the run's scope while the reply streams, and the run ends
        the reply in a fresh one (:meth:`_end_cut_turn`). The idle timeout has a scope
        of its own, here.
        """
        acc = StreamAccumulator()
        self.acc = acc
        if self.interrupting == "requested":
            self.interrupting = "none"
        idle = self.config.stream_idle_timeout
        timer = trio.CancelScope() if idle is not None else None
        span = math.inf if idle is None else idle
        sink = self.sink
        with timer if timer is not None else NO_SCOPE:
            if timer is not None:
                timer.deadline = trio.current_time() + span
            stream = self.model.stream(request)
            if self.probe is not None:
                stream = ObservedStream(self.probe, stream, self.model, request, self.steps)
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
            and not self._interrupt_is("requested")
        ):
            acc.fail(f"the model stream was silent for {idle:g}s (stream_idle_timeout)")
        return await self._end_reply()

    async def _end_reply(self) -> AssistantMessage:
        """The reply is over — finished, failed, or cut short by an interrupt — and
        enters the transcript; then its closing events go out."""
        acc = self.acc
        if acc is None:
            # In already (an interrupt came while its closing events went out).
            assert self.turn_message is not None
            return self.turn_message
        # As after a batch: an interrupt's cancel not taken yet is taken while the reply
        # is still the one in flight.
        await trio.lowlevel.checkpoint_if_cancelled()
        if acc.final is None and self._interrupt_is("requested"):
            acc.fail("interrupted by user", "aborted")
        message = self.call_ids.fresh(acc.finish())
        # The message enters the transcript in the same step as the stream stops being
        # "in flight", so a cancel at any later checkpoint finds it there.
        self.acc = None
        self._push(message)
        self.turn_message = message
        if self.has_sink:
            closing: list[ev.AgentEvent] = []
            if not acc.start_emitted:
                acc.start_emitted = True
                closing.append(ev.MessageStart(message=acc.empty()))
            closing.append(ev.MessageEnd(message=message))
            await self.sink.emit(*closing)
        return message

    async def _skip(self, decision: Decision) -> None:
        events: list[ev.AgentEvent] = []
        self.turn_results.extend(self._skip_calls(decision.calls, decision.skip_why, events))
        await self.sink.emit(*events)

    def _start_batch(self, message: AssistantMessage, calls: tuple[Any, ...]) -> Batch:
        """The batch of ``calls``, made the run's current one (to run next, in the run's
        scope)."""
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
            self._interrupt_batch(batch)
        return batch

    async def _finish_batch(self, batch: Batch) -> bool:
        """Take the ran batch's results; True when every result set ``terminate``."""
        closed = batch.close()
        self.turn_stats = closed.stats
        self.batch = None
        events = closed.events
        for result in closed.unappended:
            events.extend(self._append(result))
        self.turn_results.extend(closed.results)
        await self.sink.emit(*events)
        if self.lifecycle == "aborting":
            await self._checkpoint_abort()
        return closed.terminate
