"""The public entry points of a run: ``run_agent_loop`` and ``open_agent_loop``.

The loop itself — its state, pi's two-level loop and the clean-up that keeps the
transcript paired whatever stops it — is ``_runner.Runner``; see the theory of operation
there. This module only starts a runner in the caller's task (``run_agent_loop``) or in a
task of its own with a memory channel for the events (``open_agent_loop``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, final, overload

import attrs
import trio
from typing_extensions import TypeVar

from .._core import AgentRunError, AgentRunResult, Context, LoopConfig, check_run, plan_output
from .._core import events as ev
from ._cancel import representative
from ._runner import OnEvent, Runner

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import TracebackType

    from .._core import Message, Model, StructuredOutput

__all__ = ["AgentRun", "AgentRunResult", "open_agent_loop", "run_agent_loop"]

T = TypeVar("T")
R = TypeVar("R", default=Any)


@overload
async def run_agent_loop(
    prompts: Sequence[Message] | str,
    context: Context,
    model: Model,
    config: LoopConfig | None = None,
    on_event: OnEvent | None = None,
    *,
    output_type: None = None,
    output_retries: int | None = None,
) -> AgentRunResult[None]: ...


@overload
async def run_agent_loop(
    prompts: Sequence[Message] | str,
    context: Context,
    model: Model,
    config: LoopConfig | None = None,
    on_event: OnEvent | None = None,
    *,
    output_type: type[T] | StructuredOutput[T],
    output_retries: int | None = None,
) -> AgentRunResult[T]: ...


@overload
async def run_agent_loop(
    prompts: Sequence[Message] | str,
    context: Context,
    model: Model,
    config: LoopConfig | None = None,
    on_event: OnEvent | None = None,
    *,
    output_type: Any,
    output_retries: int | None = None,
) -> AgentRunResult[Any]: ...


async def run_agent_loop(
    prompts: Sequence[Message] | str,
    context: Context,
    model: Model,
    config: LoopConfig | None = None,
    on_event: OnEvent | None = None,
    *,
    output_type: Any = None,
    output_retries: int | None = None,
) -> AgentRunResult[Any]:
    """Run the agent loop to its end and return how it ended.

    Args:
        prompts: messages to append first, or one ``str`` (one user message); may be
            empty to continue from ``context`` (which must then end in a user,
            tool-result or custom message).
        context: system prompt, transcript and tools; never mutated.
        model: what streams the replies.
        config: hooks and limits (:class:`LoopConfig`).
        on_event: called with every event, in order; an awaitable it returns is awaited
            (a slow sink slows the run).
        output_type: the structured output the run must end with: a type (an attrs
            class, a dataclass, a ``TypedDict``, a primitive, ``list[...]``,
            ``Literal[...]``, a union), a JSON Schema ``dict``, or a
            :class:`StructuredOutput` choosing the mode and retries. The result's
            ``output`` is then the validated value; an answer that stays invalid after
            the retries ends the run ``output_invalid``.
        output_retries: how many times an invalid answer is sent back, saying what was
            wrong, before the run ends ``output_invalid``; None (the default) means
            2, or the ``retries=`` of a :class:`StructuredOutput`. Giving both, with
            different counts, is an ``AgentUsageError``; so is ``output_retries``
            without ``output_type``.

    Every event reaches ``on_event`` exactly once, in order, whatever cancels the run: a
    call that a cancel interrupted part-way counts as delivered (the sink may already
    hold the event) and is never made again.

    A model's or a tool's failure is data in the result. If the caller's cancel scope
    fires, the transcript is paired under a bounded shield (the closing events still
    delivered if ``on_event`` takes them within ``LoopConfig.cleanup_timeout``) and
    ``Cancelled`` propagates.

    A call id already used earlier in the transcript (some servers restart at
    ``call_0`` every turn) is renamed before the reply enters the transcript: ``call_0``
    becomes ``call_0~2`` (then ``~3``..., the first suffix free in the transcript and the
    reply), in the reply and in its result, so each call runs once and the transcript
    stays paired. ``MessageUpdate`` events, shown while the reply streams, still carry
    the id the model sent.

    A reply cut short (an abort, a stream that fails or ends early) is kept with its
    partial content; a tool call whose arguments never finished streaming is dropped
    from it and named in its ``error_message`` (``...; unfinished tool call(s) dropped:
    <name> (<id>)``), and each finished call gets a skipped result.

    Raises:
        TypeError: before anything runs, when ``prompts`` is not a ``str`` or a
            sequence of messages (a bare message, bytes, a list holding a non-message).
        AgentUsageError: nothing to continue from, a tool has the final-answer
            tool's name, or ``output_retries`` contradicts ``output_type`` (see above).
        ValueError: ``output_retries`` is not an int >= 0.
        AgentRunError: a hook or ``on_event`` raised, or a bug; ``.result`` holds the
            paired transcript, ``__cause__`` the original error.
    """
    config = LoopConfig() if config is None else config
    checked = check_run(prompts, context, model, config)
    output = plan_output(output_type, (t.name for t in context.tools), output_retries)
    # Nothing outside can abort or interrupt this run: it needs no cancel scopes of its
    # own (the caller's still stop it).
    runner = Runner(
        checked, context, model, config, on_event=on_event, controlled=False, output=output
    )
    return await runner.run()


@final
@attrs.define(eq=False)
class AgentRun(Generic[R]):
    """A run started by :func:`open_agent_loop`: its events, its state, and its controls.

    Read ``events`` to follow the run; ``abort()`` and ``interrupt()`` steer it from any
    task of its trio loop. ``result``, ``messages`` and ``steps`` can be read at any time,
    also after the ``async with`` block was left — by an exception, an abort or a cancel
    from outside: the transcript they show is then paired (every tool call has its
    result).

    Attributes:
        events: the run's events (a trio memory channel, ``buffer`` events deep); it
            closes after ``AgentEnd``. Closing it early aborts the run.
        result: the run's ``AgentRunResult`` once it ended (reason ``aborted`` after a
            cancel from outside); None while it runs.
        messages: the messages the run has appended so far, in order (all of them,
            once it ended); read at any time.
        steps: the number of model requests made so far.
    """

    events: trio.MemoryReceiveChannel[ev.AgentEvent]
    _runner: Runner = attrs.field(alias="runner", repr=False)

    @property
    def result(self) -> AgentRunResult[R] | None:
        """How the run ended; ``None`` while it runs."""
        return self._runner.result

    @property
    def messages(self) -> tuple[Message, ...]:
        """The messages the run has appended so far (all of them, once it ended)."""
        return tuple(self._runner.new_messages)

    @property
    def steps(self) -> int:
        """Model requests made so far."""
        return self._runner.steps

    def abort(self, reason: str | None = None, *, grace: float | None = None) -> None:
        """Stop the run; callable from any task of the run's trio loop. Not a checkpoint.

        The partial reply is kept (stop reason ``aborted``; a tool call whose arguments
        were still streaming is dropped from it and named in its ``error_message``),
        finished calls keep their results, every other call gets an ``aborted``
        result, no new request is made, and the run ends with reason ``aborted``.
        With ``grace``, running tools may finish for up to ``grace`` seconds first. The
        closing events are delivered within ``LoopConfig.cleanup_timeout``: a consumer
        that stopped reading cannot keep the run from ending. Aborting a run that has
        ended changes nothing in its result; if it is still delivering its closing
        events, what is left of them goes out within ``cleanup_timeout``.
        """
        self._runner.abort(reason, grace)

    def abort_from_thread(self, reason: str | None = None) -> None:
        """:meth:`abort`, from a thread that is not running the trio loop."""
        trio.from_thread.run_sync(self._runner.abort, reason, None, trio_token=self._runner.token)

    def interrupt(self) -> bool:
        """Cancel the running tool batch or reply, and go on with the run.

        Unfinished calls get ``skipped: interrupted by user`` results; an interrupted
        reply is kept with stop reason ``aborted``. The next steering poll's messages
        are delivered next. Returns False when neither a batch nor a reply was running.
        """
        return self._runner.interrupt()


class open_agent_loop(Generic[R]):
    """Start a run in the background and iterate its events::

        async with open_agent_loop(prompts, context, model, config) as run:
            async for event in run.events:
                ...
        result = run.result

    The event channel holds ``buffer`` events (default 0: a slow consumer slows the run,
    nothing is dropped). An event the channel takes at once — the consumer is already
    waiting for it, or the buffer has room — is handed over without a scheduling point
    (the run's own checkpoints are enough); otherwise the run waits for the consumer.
    Leaving the block before ``AgentEnd``, or closing
    ``run.events``, aborts the run (clean-up as for :meth:`AgentRun.abort`). An exception
    raised in the block propagates unchanged. ``prompts`` and the rest mean what they
    mean for :func:`run_agent_loop` (a ``str`` is one user message; reused call ids are
    renamed; an unfinished tool call of a cut-short reply is dropped and named in its
    ``error_message``).

    ``on_event`` (optional) gets every event too, as in :func:`run_agent_loop`, in the
    run's task, just *before* the event is sent on the channel — so a sink such as a
    :class:`JsonlTranscript` has written a message by the time the consumer reads its
    ``MessageEnd``::

        async with JsonlTranscript("run.jsonl") as transcript:
            async with open_agent_loop(prompts, context, model, on_event=transcript) as run:
                async for event in run.events:
                    ...

    Each event reaches each of the two exactly once: a cancel that interrupts the sink
    counts as delivered to it; a ``send`` it interrupts delivered nothing and is retried
    in the clean-up. After an abort (or an outer cancel) the closing events are delivered
    within ``LoopConfig.cleanup_timeout``: a consumer that stopped reading cannot keep
    the run from ending. An ``on_event`` that raises ends the run with
    ``AgentRunError``; the consumer still receives the closing events.

    ``output_type`` (and ``output_retries``) ask for a structured output, as for
    :func:`run_agent_loop`; the run's ``result.output`` is then the validated value,
    and ``OutputUpdate`` events show the answer as it streams.

    Raises:
        TypeError: on entry, before anything runs, when ``prompts`` is not a ``str`` or
            a sequence of messages.
        AgentUsageError: on entry, when there is nothing to continue from, a tool has
            the final-answer tool's name, or ``output_retries`` contradicts
            ``output_type``.
        ValueError: on entry, when ``output_retries`` is not an int >= 0.
        AgentRunError: on exit, when a hook raised or a bug ended the run.
    """

    @overload
    def __init__(
        self: open_agent_loop[None],
        prompts: Sequence[Message] | str,
        context: Context,
        model: Model,
        config: LoopConfig | None = None,
        *,
        buffer: int = 0,
        on_event: OnEvent | None = None,
        output_type: None = None,
        output_retries: int | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self: open_agent_loop[T],
        prompts: Sequence[Message] | str,
        context: Context,
        model: Model,
        config: LoopConfig | None = None,
        *,
        buffer: int = 0,
        on_event: OnEvent | None = None,
        output_type: type[T] | StructuredOutput[T],
        output_retries: int | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self: open_agent_loop[Any],
        prompts: Sequence[Message] | str,
        context: Context,
        model: Model,
        config: LoopConfig | None = None,
        *,
        buffer: int = 0,
        on_event: OnEvent | None = None,
        output_type: Any,
        output_retries: int | None = None,
    ) -> None: ...

    def __init__(
        self,
        prompts: Sequence[Message] | str,
        context: Context,
        model: Model,
        config: LoopConfig | None = None,
        *,
        buffer: int = 0,
        on_event: OnEvent | None = None,
        output_type: Any = None,
        output_retries: int | None = None,
    ) -> None:
        config = LoopConfig() if config is None else config
        # At once, not in the run's task; the runner trusts what it is given.
        self._args = (check_run(prompts, context, model, config), context, model, config)
        self._output = plan_output(output_type, (t.name for t in context.tools), output_retries)
        self._buffer = buffer
        self._on_event = on_event
        self._nursery_cm: Any = None
        self._run: AgentRun[R] | None = None
        self._error: AgentRunError | None = None

    async def __aenter__(self) -> AgentRun[R]:
        send, receive = trio.open_memory_channel[ev.AgentEvent](self._buffer)
        prompts, context, model, config = self._args
        try:
            runner = Runner(
                prompts,
                context,
                model,
                config,
                send=send,
                on_event=self._on_event,
                output=self._output,
            )
        except BaseException:
            send.close()
            receive.close()
            raise
        self._run = AgentRun[R](events=receive, runner=runner)
        self._nursery_cm = trio.open_nursery()
        nursery = await self._nursery_cm.__aenter__()
        nursery.start_soon(self._drive, runner, send)
        return self._run

    async def _drive(self, runner: Runner, send: trio.MemorySendChannel[ev.AgentEvent]) -> None:
        with send:
            try:
                await runner.run()
            except AgentRunError as exc:
                self._error = exc

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        assert self._run is not None
        runner = self._run._runner
        if not runner.ended:
            runner.abort("the consumer left the open_agent_loop block")
        self._run.events.close()
        try:
            # Waiting for the run is the point of this exit; the run bounds its own
            # clean-up (LoopConfig.cleanup_timeout) once cancelled.
            await self._nursery_cm.__aexit__(None, None, None)  # noqa: ASYNC102
        except BaseException as group:  # noqa: ASYNC103, ASYNC104 - re-raised, unwrapped
            leaf = representative(group)
            if exc is not None and isinstance(leaf, trio.Cancelled):
                return False  # noqa: ASYNC104 - the body's own exception propagates instead
            raise leaf from None  # noqa: ASYNC104 - the group's representative, unwrapped
        if exc is not None:
            return False
        if self._error is not None:
            raise self._error
        return False
