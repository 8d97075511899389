"""The Agent: a long-lived session over the loop, with queues that never lose a message.

Theory of operation
-------------------
An :class:`Agent` holds a transcript, two FIFO queues (steering and follow-up) and a list
of subscribers. ``prompt()`` and ``continue_()`` make one run of the loop (the runner
behind :func:`run_agent_loop`) in a task of their own and wait for it. The agent holds
the run itself, not a channel of its events:

- while the run is active, ``state`` is read from the run's own state (its transcript,
  the reply it is streaming, its tool batch), which the run updates synchronously
  *before* it emits any event about it. So whatever runs after an event — a tool, a
  ``before_tool_call`` hook, a subscriber, another task — finds a state that already
  includes it: a running tool finds its own call in ``pending_tool_calls``, a
  subscriber holding ``MessageEnd`` finds the message in ``messages`` (it may also find
  what the run did after that event: the run goes on once a subscriber has taken an
  event). Nothing is done per event for the state; a snapshot is built when read.
- the run builds and delivers events only while someone subscribes; ``_fanout`` hands
  each one to every subscriber in turn, awaited, and keeps what a cancel interrupted
  owed to the clean-up.
- the loop reads the queues through two synchronous poll hooks; ``_queues`` takes the
  messages and puts back, at the front, each one taken that did not reach the
  transcript: a queued message is delivered exactly once, in FIFO order, or is still
  queued.

The state is final — ``is_running`` false, ``messages`` the run's transcript, the queues
restored — by the time the run's ``AgentEnd`` reaches the subscribers (as in pi), and
only once the events before it were handed over. The
run's task still finishes delivering that event afterwards; a ``prompt()`` or
``continue_()`` called in that short tail waits for it instead of raising
:class:`AgentBusyError`.

Exception policy: a model's failure is data (the run ends ``error``, ``state.error_message``
set). A hook failure or a bug raises :class:`AgentRunError` out of ``prompt()``, after the
paired transcript was stored in ``state.messages``. A cancel of the task running
``prompt()`` aborts the run: the transcript is paired and stored, the closing events go
to the subscribers within ``LoopConfig.cleanup_timeout``, then ``Cancelled`` propagates.
``abort()`` ends the run within ``cleanup_timeout`` too, even while a subscriber takes
nothing. Nothing is wrapped in an exception group (the run's task is the only one the
agent starts, and its failure is re-raised as it is).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, final

import attrs
import trio

from ._config import Context, LoopConfig
from ._errors import AgentBusyError, AgentRunError, AgentUsageError
from ._fanout import Fanout
from ._messages import MESSAGE_TYPES, AssistantMessage, Message, Usage, describe_value
from ._model import Model
from ._queues import MODES, Kind, MessageQueues, QueueMode, as_message
from ._runner import Runner
from ._tools import Tool, as_tools
from ._util import representative

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable

    from . import _events as ev
    from ._config import AgentRunResult

__all__ = ["Agent", "AgentState", "QueueMode", "open_agent"]


@attrs.frozen(kw_only=True)
class AgentState:
    """A snapshot of an :class:`Agent` (it never changes; read ``agent.state`` again).

    Attributes:
        messages: the transcript: finished messages only, in order.
        is_running: a run is active (false again once its ``AgentEnd`` is announced).
        streaming_message: the assistant reply being streamed, as it stands; None when no
            reply is streaming.
        pending_tool_calls: ids of the tool calls started and not yet finished.
        error_message: why the last run failed — the model's error, or the message of the
            :class:`AgentRunError` that ``prompt()`` raised; None otherwise.
    """

    messages: tuple[Message, ...] = ()
    is_running: bool = False
    streaming_message: AssistantMessage | None = None
    pending_tool_calls: frozenset[str] = frozenset()
    error_message: str | None = None


def _check_config(_agent: Any, _attribute: Any, config: LoopConfig) -> None:
    for hook, method in (
        ("get_steering_messages", "steer"),
        ("get_follow_up_messages", "follow_up"),
    ):
        if getattr(config, hook) is not None:
            raise AgentUsageError(
                f"LoopConfig.{hook} is set, but the Agent owns that queue: queue messages "
                f"with agent.{method}() instead (or drive run_agent_loop yourself to use "
                "your own hook)"
            )


def _tools(tools: Iterable[Tool]) -> tuple[Tool, ...]:
    return as_tools(tools, "Agent.tools")


class _View:
    """Caches of the agent's state (see ``Agent.state``)."""

    __slots__ = ("live_count", "live_run", "messages_tuple", "state")

    def __init__(self) -> None:
        self.state: AgentState | None = None
        # The transcript as a tuple; during a run (`live_run`), with that run's first
        # `live_count` new messages.
        self.messages_tuple: tuple[Message, ...] | None = None
        self.live_run: Runner | None = None
        self.live_count = 0


@attrs.define(eq=False)
class _ActiveRun:
    """The bookkeeping of one run, from ``prompt()`` to its return."""

    skip_first_poll: bool = False
    taken: list[tuple[Kind, Message]] = attrs.field(factory=list)
    run: Runner | None = None
    error: AgentRunError | None = None
    abort_reason: str | None = None
    abort_requested: bool = False
    finalized: bool = False
    done: trio.Event = attrs.field(factory=trio.Event)


@final
@attrs.define(eq=False)
class Agent:
    """A stateful agent session; build one with :func:`open_agent`.

    ``model``, ``tools``, ``system_prompt`` and ``config`` may be reassigned; a run in
    progress keeps what it started with. ``steering_mode`` and ``follow_up_mode`` may be
    reassigned too and apply from the next poll.

    Methods that are not ``async`` are not checkpoints and may be called from any task of
    the agent's trio loop; the ``*_from_thread`` variants serve other threads.
    """

    model: Model
    tools: tuple[Tool, ...] = attrs.field(default=(), converter=_tools)
    system_prompt: str = ""
    config: LoopConfig = attrs.field(factory=LoopConfig, validator=_check_config)
    steering_mode: QueueMode = attrs.field(
        default="one_at_a_time", validator=attrs.validators.in_(MODES)
    )
    follow_up_mode: QueueMode = attrs.field(
        default="one_at_a_time", validator=attrs.validators.in_(MODES)
    )
    _messages: list[Message] = attrs.field(factory=list, alias="messages")
    _token: trio.lowlevel.TrioToken = attrs.field(
        factory=trio.lowlevel.current_trio_token, alias="token", repr=False
    )
    _queues: MessageQueues = attrs.field(init=False, factory=MessageQueues, repr=False)
    _fanout: Fanout = attrs.field(
        init=False,
        default=attrs.Factory(
            lambda self: Fanout(on_change=self._listen, check_open=self._check_open),
            takes_self=True,
        ),
        repr=False,
    )
    _active: _ActiveRun | None = attrs.field(init=False, default=None, repr=False)
    _running: bool = attrs.field(init=False, default=False, repr=False)
    _error_message: str | None = attrs.field(init=False, default=None, repr=False)
    _resets: int = attrs.field(init=False, default=0, repr=False)
    _closed: bool = attrs.field(init=False, default=False, repr=False)
    _usage: Usage = attrs.field(init=False, factory=Usage, repr=False)
    _view: _View = attrs.field(init=False, factory=_View, repr=False)

    # --- state ------------------------------------------------------------------------

    @property
    def state(self) -> AgentState:
        """An immutable snapshot of the agent's state (see :class:`AgentState`).

        During a run it is read from the run itself, which updates its state before it
        emits any event about it: whoever reads ``state`` after an event — a tool, a
        hook, a subscriber, another task — finds the event already in it.
        """
        active = self._active
        if active is not None and not active.finalized and active.run is not None:
            return self._live_state(active.run)
        state = self._view.state
        if state is None:
            if self._view.messages_tuple is None:
                self._view.messages_tuple = tuple(self._messages)
            self._view.state = state = AgentState(
                messages=self._view.messages_tuple,
                is_running=self._running,
                error_message=self._error_message,
            )
        return state

    @property
    def usage(self) -> Usage:
        """The token counts of every run this agent made, summed (cache tokens included),
        the active run's replies so far included. Not reset by anything."""
        active = self._active
        if active is not None and not active.finalized and active.run is not None:
            return self._usage + active.run.usage
        return self._usage

    def _live_state(self, run: Runner) -> AgentState:
        """The state of a running agent, read from its run (built only when read)."""
        view = self._view
        new = run.new_messages
        if view.live_run is not run or view.messages_tuple is None:
            view.live_run = run
            view.messages_tuple = tuple(self._messages)
            view.live_count = 0
        if view.live_count != len(new):
            view.messages_tuple += tuple(new[view.live_count :])
            view.live_count = len(new)
        acc = run.acc
        batch = run.batch
        return AgentState(
            messages=view.messages_tuple,
            is_running=True,
            # The partial reply is built only here, when someone looks: streaming N
            # deltas stays O(total size).
            streaming_message=(
                acc.snapshot().materialize() if acc is not None and acc.started else None
            ),
            pending_tool_calls=(
                frozenset(
                    st.call.id for st in batch.states if st.start_emitted and st.result is None
                )
                if batch is not None
                else frozenset()
            ),
        )

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

    def _changed(self, *, messages: bool = False) -> None:
        self._view.state = None
        if messages:
            self._view.messages_tuple = None
            self._view.live_run = None

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
        queues = self._queues
        if not interrupt:
            queues.steering.append(message)
            return
        queues.steering.appendleft(message)
        active = self._active
        if active is None or active.finalized:
            return
        queues.interrupting = message
        if active.run is not None and active.run.interrupt():
            queues.interrupting = None

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

    def _take(self, active: _ActiveRun, kind: Kind) -> list[Message]:
        if active.finalized:
            return []
        mode = self.steering_mode if kind == "steering" else self.follow_up_mode
        return self._queues.take(active.taken, kind, mode)

    def _poll_steering(self, active: _ActiveRun) -> list[Message]:
        if active.skip_first_poll:
            # The run's prompts already carry the steering this poll would deliver;
            # skipping it keeps "one_at_a_time" to one message per turn.
            active.skip_first_poll = False
            return []
        return self._take(active, "steering")

    def _put_back(self, active: _ActiveRun, delivered: Sequence[Message]) -> None:
        """Return every message taken during the run that is not in ``delivered``."""
        self._queues.put_back(active.taken, delivered)

    # --- control ----------------------------------------------------------------------

    def abort(self, reason: str | None = None, *, grace: float | None = None) -> None:
        """Abort the active run; does nothing when none is active. Not a checkpoint.

        The run ends with reason ``aborted`` (see :meth:`AgentRun.abort`: the partial
        reply is kept, finished calls keep their results, the others get ``aborted``
        results; with ``grace``, running tools may finish for up to ``grace`` seconds).
        Messages taken from the queues but not delivered go back to their front.

        A run that has ended but still hands its last events to a subscriber that does
        not take them finishes within ``config.cleanup_timeout``.
        """
        active = self._active
        if active is None:
            return
        if active.run is not None:
            active.run.abort(reason, grace=grace)
        elif not active.finalized:
            active.abort_requested = True
            active.abort_reason = reason

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
        self._check_idle("reset()")
        self._resets += 1
        self._messages = []
        self._queues.clear()
        self._error_message = None
        self._changed(messages=True)

    def replace_messages(self, messages: Iterable[Message]) -> None:
        """Replace the transcript, for example to drop a failed reply before
        :meth:`continue_`. Not a checkpoint.

        Raises:
            AgentBusyError: a run is active.
        """
        self._check_idle("replace_messages()")
        self._messages = list(messages)
        self._changed(messages=True)

    def _check_idle(self, what: str) -> None:
        active = self._active
        if active is not None and not active.finalized:
            raise AgentBusyError(
                f"cannot call {what} while the agent is running: call abort(), then "
                f"await wait_for_idle(), then {what}"
            )

    async def wait_for_idle(self) -> None:
        """Wait until no run is active (returns at once when idle). A checkpoint.

        Cancelling the wait does not affect the run.
        """
        await trio.lowlevel.checkpoint()
        while self._active is not None:
            await self._active.done.wait()

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
        return self._fanout.subscribe(buffer, drop_updates)

    def _finalize_from(self, active: _ActiveRun) -> None:
        run = active.run
        self._finalize(active, run.result if run is not None else None)

    def _listen(self) -> None:
        """Tell the active run whether anyone listens (it builds no event otherwise)."""
        active = self._active
        if active is not None and active.run is not None and not active.finalized:
            active.run.listen(bool(self._fanout.subscribers))

    # --- runs -------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise AgentUsageError("the agent is closed (its open_agent block was left)")

    async def _begin(self, what: str) -> _ActiveRun:
        """Take the run slot, or raise :class:`AgentBusyError`."""
        await trio.lowlevel.checkpoint()
        while True:
            self._check_open()
            active = self._active
            if active is None:
                break
            if not active.finalized:
                if what == "prompt":
                    hint = (
                        "queue the message with steer() or follow_up(), or await "
                        "wait_for_idle() before prompt()"
                    )
                else:
                    hint = "await wait_for_idle() before continue_()"
                raise AgentBusyError(f"the agent is already running: {hint}")
            # The previous run has ended and only delivers its AgentEnd: wait for it.
            await active.done.wait()
        active = _ActiveRun()
        self._active = active
        self._running = True
        self._error_message = None
        self._queues.interrupting = None
        self._changed()
        return active

    async def prompt(self, message: str | Message | Sequence[Message]) -> AgentRunResult:
        """Send a message and run until the model is done; returns how the run ended.

        ``message`` is a text (sent as a user message), a message, or several. Queued
        steering messages are delivered ahead of it, in the same request; queued
        follow-ups when the model would otherwise stop.

        A model error ends the run with reason ``error`` (``state.error_message`` set);
        an abort with reason ``aborted``. Cancelling the call aborts the run: the paired
        transcript is kept, then ``Cancelled`` propagates.

        Raises:
            AgentBusyError: a run is active (queue with steer()/follow_up() instead).
            AgentUsageError: no message given, or the agent is closed.
            AgentRunError: a hook raised or a bug ended the run; ``state.messages``
                holds the paired transcript, ``__cause__`` the original error.
        """
        given: object = message  # checked at run time, whatever the annotations say
        if isinstance(given, (str, *MESSAGE_TYPES)):
            prompts = [as_message(given)]
        elif isinstance(given, Sequence) and not isinstance(given, bytes | bytearray):
            prompts = [as_message(m) for m in given]
        else:
            raise TypeError(
                "prompt() takes a str, a message or a sequence of them, not "
                f"{describe_value(given)}"
            )
        if not prompts:
            raise AgentUsageError("prompt() needs a message; to resume, call continue_()")
        active = await self._begin("prompt")
        steering = self._take(active, "steering")
        active.skip_first_poll = bool(steering)
        return await self._run(active, [*steering, *prompts])

    async def continue_(self) -> AgentRunResult:
        """Run again from the transcript as it stands (to retry, or to answer the queues).

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
        active = await self._begin("continue_")
        prompts: list[Message] = []
        if not self._messages:
            self._finish(active, None, None)
            raise AgentUsageError(
                "nothing to continue from: the transcript is empty (call prompt(); it also "
                "delivers queued steering)"
            )
        if type(self._messages[-1]) is AssistantMessage:
            prompts = self._take(active, "steering")
            active.skip_first_poll = bool(prompts)
            if not prompts:
                prompts = self._take(active, "follow_up")
            if not prompts:
                self._finish(active, None, None)
                raise AgentUsageError(
                    "cannot continue from an assistant message with nothing queued: call "
                    "prompt(), or queue a message with steer() or follow_up() first"
                )
        return await self._run(active, prompts)

    async def _run(self, active: _ActiveRun, prompts: list[Message]) -> AgentRunResult:
        config = attrs.evolve(
            self.config,
            get_steering_messages=functools.partial(self._poll_steering, active),
            get_follow_up_messages=functools.partial(self._take, active, "follow_up"),
        )
        context = Context(
            system_prompt=self.system_prompt, messages=tuple(self._messages), tools=self.tools
        )
        runner: Runner | None = None
        error: AgentRunError | None = None
        try:
            # ``state`` reads the run directly while it runs; the run builds and
            # delivers events only while someone subscribes.
            runner = Runner(
                prompts,
                context,
                self.model,
                config,
                on_event=functools.partial(
                    self._fanout.on_event, functools.partial(self._finalize_from, active)
                ),
            )
            runner.listen(bool(self._fanout.subscribers))
            active.run = runner
            if active.abort_requested:
                runner.abort(active.abort_reason)
            try:
                # The run has a task of its own (one per run, not per event): its first
                # step is a scheduling point after prompt() took the queued messages,
                # where an abort finds them taken and puts them back.
                async with trio.open_nursery() as nursery:  # noqa: ASYNC112
                    nursery.start_soon(self._drive, active, runner)
            except BaseException as group:  # noqa: ASYNC103, ASYNC104 - re-raised, unwrapped
                raise representative(group) from None  # noqa: ASYNC104 - unwrapped
            error = active.error
        except AgentRunError as exc:
            error = exc
        finally:
            result = error.result if error is not None else runner.result if runner else None
            self._finish(active, result, error)
        if error is not None:
            raise error
        assert result is not None
        return result

    @staticmethod
    async def _drive(active: _ActiveRun, runner: Runner) -> None:
        try:
            await runner.run()
        except AgentRunError as exc:
            active.error = exc

    def _finalize(self, active: _ActiveRun, result: AgentRunResult | None) -> None:
        if active.finalized:
            return
        active.finalized = True
        if result is None:
            self._put_back(active, ())
        else:
            self._put_back(active, result.messages)
            self._usage += result.usage
            self._messages = list(result.transcript)
            self._error_message = result.error_message
        self._running = False
        self._queues.interrupting = None
        self._changed(messages=True)

    def _finish(
        self, active: _ActiveRun, result: AgentRunResult | None, error: AgentRunError | None
    ) -> None:
        resets = self._resets
        self._finalize(active, result)
        # What the run's bounded clean-up could not hand over in time is dropped (a
        # subscriber that took nothing for cleanup_timeout): never to the next run.
        self._fanout.drop_owed()
        if error is not None and self._resets == resets:
            self._error_message = str(error)
            self._changed()
        self._active = None
        # The run's hooks point back at `active`: without this link the finished run
        # is freed at once, not left for the garbage collector.
        active.run = None
        active.done.set()

    def _start_closing(self) -> _ActiveRun | None:
        """Refuse new work and abort the active run; returns it (to wait for)."""
        self._closed = True
        self.abort("the agent was closed")
        return self._active

    def _end_subscriptions(self) -> None:
        self._fanout.end()


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
        steering_mode / follow_up_mode: ``"one_at_a_time"`` (default) or ``"all"``.
        messages: the transcript to start from (for example a loaded session).

    The agent owns every run made through it: leaving the block aborts the active run
    and waits for it to end (at most ``config.cleanup_timeout`` with the subscribers
    still served, as long again without them), then ends every subscription. After
    that the agent refuses new work (:class:`AgentUsageError`); ``state`` stays readable.

    Raises:
        AgentUsageError: ``config`` sets a steering or follow-up hook.
        ValueError: an unknown queue mode.
    """
    agent = Agent(
        model=model,
        tools=tools,
        system_prompt=system_prompt,
        config=config or LoopConfig(),
        steering_mode=steering_mode,
        follow_up_mode=follow_up_mode,
        messages=list(messages),
    )
    try:
        yield agent
    finally:
        active = agent._start_closing()
        bound = agent.config.cleanup_timeout
        if active is not None:
            # First with the subscribers still served, so that they see the run end...
            with trio.move_on_after(bound, shield=True):
                await active.done.wait()
        agent._end_subscriptions()
        if active is not None and not active.done.is_set():
            # ...then without them, if one was too slow to take the last events.
            with trio.move_on_after(bound, shield=True):
                await active.done.wait()
