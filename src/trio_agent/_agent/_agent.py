"""The Agent: a long-lived session over the loop, with queues that never lose a message.

Theory of operation
-------------------
An :class:`Agent` holds a transcript, two FIFO queues (steering and follow-up) and a list
of subscribers. ``prompt()`` and ``continue_()`` make one run of the loop (the runner
behind :func:`run_agent_loop`) in the calling task and wait for it. The agent holds the
run itself, not a channel of its events. Each of its jobs has a module:

- ``_agent_state``: ``state`` is read from the active run, which updates its own state
  before it emits any event about it; nothing is done per event for the state.
- ``_run/_delivery``: the agent's event delivery, whose targets are its subscribers;
  the run builds events only while someone subscribes; each one goes to every
  subscriber in turn, and none is lost.
- ``_queues``: a queued message is delivered exactly once, in FIFO order, or is still
  queued.
- ``_agent_run``: one run at a time; its state is final (``is_running`` false, the
  transcript stored, the queues restored) by the time its ``AgentEnd`` reaches the
  subscribers, as in pi.

Exception policy: a model's failure is data (the run ends ``error``, ``state.error_message``
set). A hook failure or a bug raises :class:`AgentRunError` out of ``prompt()``, after the
paired transcript was stored in ``state.messages``. A cancel of the task running
``prompt()`` aborts the run: the transcript is paired and stored, the closing events go
to the subscribers within ``LoopConfig.cleanup_timeout``, then ``Cancelled`` propagates.
``abort()`` ends the run within ``cleanup_timeout`` too, even while a subscriber takes
nothing. Nothing is wrapped in an exception group: the agent starts no task of its own
(the run goes on in the task that called ``prompt()``), and a failure is raised as it is.
"""

from __future__ import annotations

import functools
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, final, overload

import attrs
import trio
from typing_extensions import TypeVar

from .._core import (
    DEFAULT_RETRIES,
    AgentRunError,
    AgentUsageError,
    Deferral,
    LoopConfig,
    Model,
    Tool,
    as_agent_prompts,
    as_history,
    as_message,
    as_structured_output,
    as_tools,
    check_model,
    check_retries,
    is_str,
    one_of,
    plan_output,
    plan_resume,
    trusted_context,
)
from .._run import (
    MODES,
    EventDelivery,
    MessageQueues,
    QueueMode,
    Runner,
    in_memory,
    plan_for,
)
from ._run import ActiveRun, RunSlot, check_config
from ._state import AgentState, StateView

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Mapping, Sequence

    from .._core import (
        AgentRunResult,
        CallDecision,
        ContextPolicy,
        DeferredCall,
        Message,
        OutputPlan,
        ResumePlan,
        StructuredOutput,
        Usage,
    )
    from .._core import events as ev
    from .._run import DeferredSource

__all__ = ["Agent", "AgentState", "QueueMode", "open_agent"]

T = TypeVar("T")


def _tools(tools: Iterable[Tool]) -> tuple[Tool, ...]:
    return as_tools(tools, "Agent.tools")


def _check_model(_agent: object, _attribute: object, model: Any) -> None:
    check_model(model, "Agent.model")


def _check_retries(_agent: object, _attribute: object, value: Any) -> None:
    check_retries(value, "Agent.output_retries")


def _state_view(messages: Any) -> StateView:
    return StateView(list(as_history(messages, "Agent.messages")))


@final
@attrs.define(eq=False)
class Agent:
    """A stateful agent session; build one with :func:`open_agent`.

    ``model``, ``tools``, ``system_prompt`` and ``config`` may be reassigned; a run in
    progress keeps what it started with. ``steering_mode`` and ``follow_up_mode`` may be
    reassigned too and apply from the next poll.

    Methods that are not ``async`` are not checkpoints and may be called from any task of
    the agent's trio loop; the ``*_from_thread`` variants serve other threads.

    Attributes:
        model: the model the next run uses.
        tools: the tools the next run offers (checked when assigned: each a ``Tool``,
            names unique).
        system_prompt: the instructions the next run sends.
        config: the ``LoopConfig`` of the next run. It must not set
            ``get_steering_messages`` or ``get_follow_up_messages`` (the agent's queues
            are those polls): assigning one that does raises ``AgentUsageError``.
        steering_mode: ``"one_at_a_time"`` (default) delivers one queued steering
            message per poll; ``"all"`` delivers every queued one at once.
        follow_up_mode: the same for follow-up messages.
        output_retries: how many times an invalid structured output is sent back
            before a run ends ``output_invalid``, for a prompt that gives no retries of
            its own (``output_retries=`` or ``StructuredOutput(..., retries=)``);
            default 2.
    """

    model: Model = attrs.field(validator=_check_model)
    tools: tuple[Tool, ...] = attrs.field(default=(), converter=_tools)
    system_prompt: str = attrs.field(default="", validator=is_str)
    config: LoopConfig = attrs.field(factory=LoopConfig, validator=check_config)
    steering_mode: QueueMode = attrs.field(default="one_at_a_time", validator=one_of(*MODES))
    follow_up_mode: QueueMode = attrs.field(default="one_at_a_time", validator=one_of(*MODES))
    output_retries: int = attrs.field(default=DEFAULT_RETRIES, validator=_check_retries)
    # The transcript given as ``messages`` is kept by the state view. (mypy's attrs plugin
    # checks the default against the converted type, not against the converter's.)
    _view: StateView = attrs.field(  # type: ignore[assignment]
        factory=list, alias="messages", converter=_state_view, repr=lambda v: repr(v.messages)
    )
    _token: trio.lowlevel.TrioToken = attrs.field(
        factory=trio.lowlevel.current_trio_token, alias="token", repr=False
    )
    _queues: MessageQueues = attrs.field(init=False, factory=MessageQueues, repr=False)
    # The subscribers: every run of the agent delivers its events through this one.
    _delivery: EventDelivery = attrs.field(
        init=False, factory=lambda: EventDelivery(hold=True), repr=False
    )
    # The calls the last run left waiting (it ended "deferred"), until they are answered.
    _deferral: Deferral | None = attrs.field(init=False, default=None, repr=False)
    # The structured output of the last prompt, its retries resolved (continue_() and
    # resume() ask for it again).
    _output_type: Any = attrs.field(init=False, default=None, repr=False)
    _slot: RunSlot = attrs.field(
        init=False,
        default=attrs.Factory(
            lambda self: RunSlot(self._queues, self, self._view, self._delivery), takes_self=True
        ),
        repr=False,
    )

    # --- state ------------------------------------------------------------------------

    @property
    def state(self) -> AgentState:
        """An immutable snapshot of the agent's state (see :class:`AgentState`).

        During a run it is read from the run itself, which updates its state before it
        emits any event about it: whoever reads ``state`` after an event — a tool, a
        hook, a subscriber, another task — finds the event already in it.
        """
        return self._view.state(self._slot.live_run)

    @property
    def usage(self) -> Usage:
        """The token counts of every run this agent made, summed (cache tokens included),
        the active run's replies so far included. Not reset by anything."""
        return self._view.total_usage(self._slot.live_run)

    @property
    def deferred(self) -> tuple[DeferredCall, ...]:
        """The calls that wait for a decision: the last run ended ``deferred`` and
        :meth:`resume` has not answered them yet (empty otherwise)."""
        return () if self._deferral is None else self._deferral.calls

    @property
    def queued_steering(self) -> tuple[Message, ...]:
        """The steering messages waiting to be delivered, oldest first."""
        return tuple(self._queues.steering)

    @property
    def queued_follow_ups(self) -> tuple[Message, ...]:
        """The follow-up messages waiting to be delivered, oldest first."""
        return tuple(self._queues.follow_ups)

    @property
    def has_queued_messages(self) -> bool:
        """Whether a steering or follow-up message waits to be delivered."""
        return bool(self._queues.steering or self._queues.follow_ups)

    # --- queues -----------------------------------------------------------------------

    def steer(self, message: str | Message, *, interrupt: bool = False) -> None:
        """Queue a message for the model to read as soon as possible. Not a checkpoint.

        During a run, the next steering poll (after the current tool batch, before the
        next request) delivers it; when no run can take it, the next run delivers it
        first (see the module docstring). ``steering_mode`` decides whether one poll
        delivers one queued message or all of them.

        With ``interrupt=True`` the message goes to the front of the queue, and the
        running tool batch is cancelled (unfinished calls get ``skipped: interrupted by
        user`` results; finished ones keep theirs) or the streaming reply is cut (kept
        with stop reason ``aborted``, its calls skipped); the run then goes on with this
        message. If neither a batch nor a reply is running at that moment, a batch that
        starts before the message is delivered is cancelled, and a request about to be
        sent takes the message first.

        Raises:
            AgentUsageError: the agent is closed.
        """
        self._check_open()
        message = as_message(message)
        if not interrupt:
            self._queues.steering.append(message)
            return
        self._queues.steering.appendleft(message)
        self._slot.interrupt()

    def follow_up(self, message: str | Message) -> None:
        """Queue a message for when the model would otherwise stop. Not a checkpoint.

        During a run, the follow-up poll delivers it once the model has no tool calls to
        answer and no steering message is queued; ``follow_up_mode`` decides whether one
        poll delivers one queued message or all of them.

        Raises:
            AgentUsageError: the agent is closed.
        """
        self._check_open()
        self._queues.follow_ups.append(as_message(message))

    def clear_queues(self) -> tuple[tuple[Message, ...], tuple[Message, ...]]:
        """Empty both queues; returns what they held: ``(steering, follow_ups)``."""
        return self._queues.clear()

    # --- control ----------------------------------------------------------------------

    def abort(self, reason: str | None = None, *, grace: float | None = None) -> None:
        """Abort the active run; does nothing when none is active. Not a checkpoint.

        The run ends with reason ``aborted`` (see :meth:`trio_agent.AgentRun.abort`: the partial
        reply is kept, finished calls keep their results, the others get ``aborted``
        results; with ``grace``, running tools may finish for up to ``grace`` seconds).
        Messages taken from the queues but not delivered go back to their front.

        A run that has ended but still hands its last events to a subscriber that does
        not take them finishes within ``config.cleanup_timeout``.
        """
        self._slot.abort(reason, grace)

    def steer_from_thread(self, message: str | Message, *, interrupt: bool = False) -> None:
        """:meth:`steer`, from a thread that is not running the agent's trio loop.

        Blocks until the message is queued, so calls from one thread keep their order.
        """
        trio.from_thread.run_sync(
            functools.partial(self.steer, message, interrupt=interrupt), trio_token=self._token
        )

    def follow_up_from_thread(self, message: str | Message) -> None:
        """:meth:`follow_up`, from a thread that is not running the agent's trio loop.

        Blocks until the message is queued, so calls from one thread keep their order.
        """
        trio.from_thread.run_sync(self.follow_up, message, trio_token=self._token)

    def abort_from_thread(self, reason: str | None = None) -> None:
        """:meth:`abort`, from a thread that is not running the agent's trio loop."""
        trio.from_thread.run_sync(self.abort, reason, trio_token=self._token)

    def reset(self) -> None:
        """Forget the transcript, the queues and the last error. Not a checkpoint.

        Raises:
            AgentBusyError: a run is active.
        """
        self._slot.check_idle("reset()")
        self._deferral = None
        self._view.reset()
        self._queues.clear()

    def replace_messages(self, messages: Iterable[Message]) -> None:
        """Replace the transcript, for example to drop a failed reply before
        :meth:`continue_`. Not a checkpoint.

        Raises:
            AgentBusyError: a run is active.
        """
        self._slot.check_idle("replace_messages()")
        self._deferral = None
        self._view.replace(as_history(messages, "replace_messages()'s messages"))

    async def wait_for_idle(self) -> None:
        """Wait until no run is active (returns at once when idle). A checkpoint.

        Cancelling the wait does not affect the run.
        """
        await self._slot.wait_for_idle()

    # --- subscribers ------------------------------------------------------------------

    def subscribe(
        self, buffer: int = 0, *, drop_updates: bool = False
    ) -> AbstractAsyncContextManager[trio.MemoryReceiveChannel[ev.AgentEvent]]:
        """Receive the agent's events, from now until the block is left::

            async with agent.subscribe() as events:
                async for event in events:
                    ...

        Each subscriber gets its own memory channel holding ``buffer`` events (default
        0). Every event of every run goes to every subscriber, in order, and the run
        waits for each one to take it: a slow subscriber slows the run, nothing is
        dropped. An event a subscriber can take at once (it is already waiting, or its
        buffer has room) is handed over without a scheduling point. With
        ``drop_updates=True``, ``MessageUpdate`` and ``ToolExecutionUpdate`` events that
        do not fit the buffer are dropped instead (every other event is still waited
        for).

        Leaving the block unsubscribes (a run waiting for this subscriber goes on) and
        ends the channel: a reader's ``async for`` finishes after the events already
        buffered. Closing the agent ends every subscription the same way.

        Do not ``await agent.prompt()`` inside the loop that reads the channel: the new
        run would wait for that very reader. Start it in another task (it may be started
        as soon as ``AgentEnd`` arrives: the state is final by then).

        Raises:
            AgentUsageError: the agent is closed.
        """
        self._check_open()
        return self._delivery.subscribe(buffer, drop_updates, self._check_open)

    def _check_open(self) -> None:
        self._slot.check_open()

    def _finalize_from(self, active: ActiveRun) -> None:
        """The run's state is final (called just before its ``AgentEnd`` goes out)."""
        run = active.run
        self._slot.finalize(active, run.result if run is not None else None)

    # --- runs -------------------------------------------------------------------------

    @overload
    async def prompt(
        self,
        message: str | Message | Sequence[Message],
        *,
        output_type: None = None,
        output_retries: int | None = None,
    ) -> AgentRunResult[None]: ...

    @overload
    async def prompt(
        self,
        message: str | Message | Sequence[Message],
        *,
        output_type: type[T] | StructuredOutput[T],
        output_retries: int | None = None,
    ) -> AgentRunResult[T]: ...

    @overload
    async def prompt(
        self,
        message: str | Message | Sequence[Message],
        *,
        output_type: Any,
        output_retries: int | None = None,
    ) -> AgentRunResult[Any]: ...

    async def prompt(
        self,
        message: str | Message | Sequence[Message],
        *,
        output_type: Any = None,
        output_retries: int | None = None,
    ) -> AgentRunResult[Any]:
        """Send a message and run until the model is done; returns how the run ended.

        ``message`` is a text (sent as a user message), a message, or several. Queued
        steering messages are delivered ahead of it, in the same request; queued
        follow-ups when the model would otherwise stop.

        ``output_type`` asks this run for a structured output, as for
        :func:`run_agent_loop` (the result's ``output`` is the validated value); it
        holds for this prompt, and :meth:`continue_` asks for it again. A prompt without
        one asks for none. ``output_retries`` is how many times an invalid answer is
        sent back before the run ends ``output_invalid``; None (the default) means the
        ``retries=`` of a ``StructuredOutput``, else the agent's ``output_retries``.
        Giving both, with different counts, is an ``AgentUsageError``;
        :meth:`continue_` and :meth:`resume` keep the count with the output type.

        A model error ends the run with reason ``error`` (``state.error_message`` set);
        an abort with reason ``aborted``. Cancelling the call aborts the run: the paired
        transcript is kept, then ``Cancelled`` propagates.

        Raises:
            AgentBusyError: a run is active (queue with steer()/follow_up() instead).
            AgentUsageError: no message given, the agent is closed, a tool has the
                final-answer tool's name, or ``output_retries`` contradicts
                ``output_type`` (or comes without it).
            TypeError: ``output_type`` has no JSON Schema.
            ValueError: ``output_retries`` is not an int >= 0.
            AgentRunError: a hook raised or a bug ended the run; ``state.messages``
                holds the paired transcript, ``__cause__`` the original error.
        """
        prompts = as_agent_prompts(message)
        spec = as_structured_output(
            output_type, output_retries, default_retries=self.output_retries
        )
        output = plan_output(spec, (t.name for t in self.tools))
        active = await self._slot.begin("prompt")
        self._output_type = spec
        return await self._run(active, self._slot.prompt_messages(active, prompts), output)

    async def continue_(self) -> AgentRunResult[Any]:
        """Run again from the transcript as it stands (to retry, or to answer the queues).

        The run asks for the structured output the last :meth:`prompt` asked for (none
        if it asked for none).

        From a transcript ending in a user, tool-result or custom message, the model is
        asked again (queued steering joins at the run's first poll). From an assistant
        message, the queued steering is delivered (by ``steering_mode``), else the
        queued follow-ups (by ``follow_up_mode``). An empty transcript has nothing to
        continue (as in pi): use :meth:`prompt`, which also delivers queued steering.

        Raises:
            AgentBusyError: a run is active.
            AgentUsageError: the transcript is empty, or ends in an assistant message and
                nothing is queued.
            AgentRunError: as for :meth:`prompt`.
        """
        output = plan_output(self._output_type, (t.name for t in self.tools))
        active = await self._slot.begin("continue_")
        return await self._run(active, self._slot.continue_messages(active), output)

    async def resume(
        self,
        decisions: Mapping[str, CallDecision],
        *,
        transcript: DeferredSource | None = None,
    ) -> AgentRunResult:
        """Answer the calls the last run left waiting (:attr:`deferred`), then go on
        with the loop; as :func:`trio_agent.resume`, with the agent's model, tools,
        system prompt, config and queues.

        The run asks for the last prompt's ``output_type`` again, as :meth:`continue_`
        does. Every waiting call is answered before the first request: ``Approve()`` runs it,
        ``Deny(reason)`` gives it an error result with the reason, ``Result(content)``
        gives it that result; the results its batch held back enter with them, in
        declaration order. Subscribers get the run's events, among them the
        ``RecordMarker`` with the decisions before any approved call runs (a subscriber
        writing a ``JsonlTranscript`` records it: see ``resume`` for exactly once).

        Args:
            decisions: call id -> decision, one per waiting call.
            transcript: resume this instead of the agent's own deferral: a loaded
                transcript (``load_transcript(path)``) or a run's result; the agent's
                messages become its transcript first.

        Raises:
            AgentBusyError: a run is active.
            AgentUsageError: nothing waits, or the decisions do not answer the waiting
                calls exactly (unknown id, answered twice, missing): raised before
                anything runs, the transcript unchanged.
            TypeError: a decision that is not one.
            AgentRunError: as for :meth:`prompt`.
        """
        if transcript is not None:
            messages, plan = plan_for(transcript, decisions)
        else:
            deferral = self._deferral
            if deferral is None:
                raise AgentUsageError("nothing to resume: no call of the agent waits")
            plan = plan_resume(in_memory(self._view.messages, deferral), decisions)
        # The run goes on asking for the last prompt's structured output, as continue_().
        output = plan_output(self._output_type, (t.name for t in self.tools))
        active = await self._slot.begin("resume")
        if transcript is not None:
            self._view.replace(list(messages))  # checked where it was loaded
        return await self._run(active, [], output, plan)

    async def _run(
        self,
        active: ActiveRun,
        prompts: list[Message],
        output: OutputPlan | None,
        plan: ResumePlan | None = None,
    ) -> AgentRunResult[Any]:
        # The agent's fields were checked when assigned, its transcript as it entered.
        context = trusted_context(self.system_prompt, tuple(self._view.messages), self.tools)
        runner: Runner | None = None
        error: AgentRunError | None = None
        try:
            # ``state`` reads the run directly while it runs; the run builds and
            # delivers events only while someone subscribes (the delivery is
            # listening). Its AgentEnd goes out once the state is final.
            delivery = self._delivery
            delivery.finalize = functools.partial(self._finalize_from, active)
            runner = Runner(
                prompts,
                context,
                self.model,
                self.config,
                polls=(
                    functools.partial(self._slot.poll_steering, active),
                    functools.partial(self._slot.take, active, "follow_up"),
                ),
                delivery=delivery,
                plan=plan,
                output=output,
            )
            self._slot.attach(active, runner)
            # The run goes on in this task: a cancel of the caller reaches it at its
            # checkpoints (it ends the run as an abort does), and nothing is awaited
            # between taking the queued messages and the run's first step.
            try:
                await runner.run()
            except AgentRunError as exc:
                error = exc
            if delivery.listening:
                # An unbuffered subscriber handed AgentEnd at once has not run since: it
                # takes the event now, while the slot is still held (a next prompt
                # waits), so that it reads the state of the run that ended. The slot is
                # freed after, and this call returns in the same step, so whoever waits
                # for the slot finds this call returned.
                await trio.lowlevel.cancel_shielded_checkpoint()
        finally:
            result = error.result if error is not None else runner.result if runner else None
            self._deferral = None if result is None else result.deferral
            self._slot.finish(active, result, error)
        if error is not None:
            raise error
        assert result is not None
        return result


@asynccontextmanager
async def open_agent(
    model: Model,
    *,
    tools: Sequence[Tool] = (),
    system_prompt: str = "",
    config: LoopConfig | None = None,
    steering_mode: QueueMode = "one_at_a_time",
    follow_up_mode: QueueMode = "one_at_a_time",
    messages: Sequence[Message] = (),
    context: ContextPolicy | None = None,
    output_retries: int = DEFAULT_RETRIES,
) -> AsyncIterator[Agent]:
    """Open an :class:`Agent`::

        async with open_agent(model, tools=tools, system_prompt="...") as agent:
            result = await agent.prompt("Read README.md and tell me the project name")

    Args:
        model: what streams the replies.
        tools: the tools the model may call.
        system_prompt: sent with every request.
        config: hooks and limits for every run; it must not set
            ``get_steering_messages``/``get_follow_up_messages`` (the agent's queues
            are those polls).
        steering_mode: ``"one_at_a_time"`` (default) or ``"all"``: how many queued
            steering messages one poll delivers.
        follow_up_mode: the same for follow-up messages.
        messages: the transcript to start from (for example a loaded session).
        context: a context policy for every run (``trio_agent.context``); sets
            ``config.context`` (the agent keeps one policy for all its runs, so what it
            learned — a summary — carries over).
        output_retries: how many times an invalid structured output is sent back
            before a run ends ``output_invalid``, for a prompt that gives no retries of
            its own (see :meth:`Agent.prompt`); default 2.

    The agent owns every run made through it: leaving the block aborts the active run
    and waits for it to end (at most ``config.cleanup_timeout`` with the subscribers
    still served, as long again without them), then ends every subscription. After
    that the agent refuses new work (:class:`AgentUsageError`); ``state`` stays readable.

    Raises:
        AgentUsageError: ``config`` sets a steering or follow-up hook.
        ValueError: an unknown queue mode, or ``output_retries`` is not an int >= 0.
    """
    agent = Agent(
        model=model,
        tools=tools,
        system_prompt=system_prompt,
        config=(
            attrs.evolve(config or LoopConfig(), context=context)
            if context is not None
            else config or LoopConfig()
        ),
        steering_mode=steering_mode,
        follow_up_mode=follow_up_mode,
        messages=list(messages),
        output_retries=output_retries,
    )
    try:
        yield agent
    finally:
        # close() waits only under shielded, bounded scopes of its own.
        await agent._slot.close(agent.config.cleanup_timeout)  # noqa: ASYNC102
