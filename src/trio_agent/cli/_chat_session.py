"""The conversation of ``trio-agent chat``: prompts, steering, approval and Ctrl-C.

Theory of operation: one task reads stdin (a worker thread per line) into a channel;
:func:`run_chat` takes a line when the agent is idle and ``prompt()``\\ s it, while a
second task turns the lines typed during that run into ``steer()`` calls (only once the
run has begun, so a steering message never overtakes the prompt it follows). A third
task shows the agent's events and writes them to the transcript; a fourth turns SIGINT
into ``abort()`` or, the second time, into leaving. While a call of a tool that needs
approval waits, the next line typed is its answer, not steering.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TextIO

import attrs
import trio

from .._agent import Agent, open_agent
from .._core import (
    AgentRunError,
    Approve,
    BeforeToolCallContext,
    BeforeToolCallResult,
    DeferredCall,
    Deny,
    LoopConfig,
    Message,
    UserMessage,
    total_cost,
)
from .._core import events as ev
from ._chat_options import KEY_ENVS
from ._render import LiveView, Output, describe_call, wants_color

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Collection, Sequence

    from .._core import AgentRunResult, Approver, CallDecision, Model, Tool
    from .._store import JsonlTranscript

__all__ = ["CONFIRMED_TOOLS", "EXIT_WORDS", "approval_hook", "read_stdin", "run_chat"]

EXIT_WORDS = ("/exit", "/quit")
CONFIRMED_TOOLS = ("write", "edit", "bash")
"""Workspace tools that change things: each call waits for the user's ``y``."""
YES = ("y", "yes")


@attrs.define
class _Session:
    interrupts: int = 0
    exit_code: int = 0
    leaving: bool = False
    aborting: bool = False
    """The run in progress was aborted: what is typed now is the next prompt."""
    pending: list[str] = attrs.field(factory=list)
    """Lines taken during a run that are prompts for after it."""
    run_started: trio.Event = attrs.field(factory=trio.Event)
    answer: trio.MemorySendChannel[str] | None = None
    """Set while a tool call waits for the user's y/n: the next line typed goes there."""
    reading: bool = True
    """False once the input ended or ``/exit`` was typed: nothing more is read, so a
    call that needs approval is declined instead of waiting for an answer."""
    output_schema: Mapping[str, Any] | None = None
    """``--output-schema``: what every prompt asks for (None: plain text)."""


async def _display(
    events: trio.MemoryReceiveChannel[ev.AgentEvent],
    sink: JsonlTranscript,
    view: LiveView,
    session: _Session,
) -> None:
    async for event in events:
        await sink.write_event(event)
        if type(event) is ev.AgentStart:
            session.run_started.set()
        view.show(event)
        if type(event) is ev.AgentEnd:
            if event.reason == "error" or event.reason == "context_overflow":
                # A model or transport error, or a request too long for the model's
                # context window (its text went to the error stream).
                session.exit_code = session.exit_code or 1
            if event.reason not in ("stop", "terminated", "aborted"):
                view.line(view.s.dim(f"  (the run ended: {event.reason})"))
            cost = total_cost(event.messages)
            if cost:  # None (not priced) and 0 (no tokens counted) show nothing
                view.line(view.s.dim(f"  cost ${cost:.4f}"))


def _approver(
    session: _Session, view: LiveView, can_ask: bool, command: str = "trio-agent chat"
) -> Approver:
    """The y/N prompt as a ``LoopConfig.approver``: a call that waits for a decision
    runs only after the user types ``y`` (the next line read); any other answer denies
    it. Without ``can_ask`` such calls are denied at once (the reason names
    ``command``). One question at a time; an abort while waiting cancels the question
    with the run (the call gets an ``aborted`` result)."""
    lock = trio.Lock()

    async def approver(waiting: DeferredCall) -> CallDecision:
        name = waiting.name
        label = describe_call(name, waiting.arguments)
        if not can_ask:
            view.line(view.s.red(f"  refused (no terminal to ask, no --yes): {label}"))
            return Deny(
                f"{name} needs the user's approval, and there is no terminal to ask on: "
                f"run {command} from a terminal, or with --yes"
            )
        async with lock:
            answer = await _ask(session, view, label)
        if answer is None:
            view.line(view.s.red(f"  refused (no answer: the input ended): {label}"))
            return Deny("the user left before answering whether to allow it")
        if answer not in YES:
            return Deny("the user declined this call")
        return Approve()

    return approver


def _asking(tools: Sequence[Tool], confirm: Collection[str]) -> tuple[Tool, ...]:
    """``tools``, those named in ``confirm`` made to wait for approval."""
    return tuple(attrs.evolve(t, approval="always") if t.name in confirm else t for t in tools)


async def _ask(session: _Session, view: LiveView, label: str) -> str | None:
    """Ask whether to allow the call ``label``; the answer is the next line read
    (stripped, lower case), or None when nothing more will be read (the input ended,
    or ``/exit`` was typed, before or while it waits)."""
    if not session.reading:
        return None
    send, receive = trio.open_memory_channel[str](1)
    session.answer = send
    try:
        view.asking = True
        view.line(view.s.bold(f"  allow {label}? [y/N]"))
        with receive:
            try:
                return (await receive.receive()).strip().lower()
            except trio.EndOfChannel:  # _steer stopped reading
                return None
    finally:
        session.answer = None
        view.asking = False


def approval_hook(
    view: LiveView, confirm: Collection[str], *, can_ask: bool, command: str
) -> tuple[Any, Callable[[str | None], bool]]:
    """Chat's approval prompt, for another command (``command`` names it in the reason
    a refused call gives): the ``before_tool_call`` hook, and a function that hands it a
    line the user typed — it returns False, and the line is not taken, when no question
    waits for an answer — or None at the end of input: every question, the one waiting
    and those to come, is then answered no."""
    session = _Session()

    def answer(line: str | None) -> bool:
        if line is None:
            session.reading = False
            if session.answer is not None:
                session.answer.close()  # the question waiting is answered: no answer
            return True
        if session.answer is None:
            return False
        try:
            session.answer.send_nowait(line)
        except (trio.WouldBlock, trio.BrokenResourceError):
            return False  # answered already: this line came after the answer
        return True

    approver = _approver(session, view, can_ask, command)

    async def before(ctx: BeforeToolCallContext) -> BeforeToolCallResult | None:
        # The approver, where a before_tool_call hook is what the command takes.
        if ctx.tool_call.name not in confirm:
            return None
        call = ctx.tool_call
        decision = await approver(DeferredCall(id=call.id, name=call.name, arguments=ctx.args))
        if isinstance(decision, Deny):
            return BeforeToolCallResult(block=True, reason=decision.reason)
        return None

    return before, answer


async def _on_interrupt(
    signals: AsyncIterator[Any],
    agent: Agent,
    session: _Session,
    view: LiveView,
    conversation: trio.CancelScope,
) -> None:
    async for _ in signals:
        session.interrupts += 1
        if session.interrupts > 1:
            session.exit_code = 130
            session.leaving = True
            view.line(view.s.dim("exiting"))
            # A run still ending is let to end: cancelling prompt() while the agent hands
            # an event to the display would keep that event (say, the aborted reply)
            # out of the transcript. The wait is bounded; then the conversation stops.
            agent.abort("interrupted by Ctrl-C")
            with trio.move_on_after(2 * agent.config.cleanup_timeout):
                await agent.wait_for_idle()
            conversation.cancel()
            return
        if agent.state.is_running:
            session.aborting = True
            agent.abort("interrupted by Ctrl-C")
            view.line(view.s.dim("aborted — press Ctrl-C again to exit"))
        else:
            view.line(view.s.dim("press Ctrl-C again (or Ctrl-D, or type /exit) to exit"))


async def _steer(
    lines: trio.MemoryReceiveChannel[str], agent: Agent, session: _Session, view: LiveView
) -> None:
    async for line in lines:
        if session.answer is not None:
            # A tool call waits for y/n: this line is the answer, not steering.
            session.answer.send_nowait(line)
            continue
        text = line.strip()
        if not text:
            continue
        if text in EXIT_WORDS:
            # Leave once this run is over: nothing else is read.
            session.leaving = True
            break
        if session.aborting:
            session.pending.append(text)
            continue
        if not session.run_started.is_set():
            # A message queued before the run begins would go ahead of its prompt. If
            # the wait is cancelled (the run is over), the line is the next prompt.
            steered = False
            try:
                await session.run_started.wait()
                steered = True
            finally:
                if not steered:
                    session.pending.append(text)
        session.interrupts = 0
        agent.steer(UserMessage.text(text))
        view.line(view.s.dim("  (steering: the model reads this after its current step)"))
    # The input ended (or /exit): a call waiting for an answer, or asking later in this
    # run, gets none — it is declined, rather than waiting for ever.
    session.reading = False
    if session.answer is not None:
        session.answer.close()


def _show_output(result: AgentRunResult[Any], session: _Session, view: LiveView) -> None:
    """``--output-schema``: the run's validated value as JSON, or why it has none."""
    if result.reason == "stop":
        view.line(json.dumps(result.output, ensure_ascii=False, indent=2))
    elif result.reason == "output_invalid":
        session.exit_code = session.exit_code or 1
        message = f"output invalid: {result.error_message}"
        if view.errors is None:
            view.line(view.s.red(f"  error: {message}"))
        else:
            view.errors.line(f"error: {message}")


async def _converse(
    lines: trio.MemoryReceiveChannel[str], agent: Agent, session: _Session, view: LiveView
) -> None:
    while not session.leaving:
        if session.pending:
            text = session.pending.pop(0)
        else:
            try:
                text = (await lines.receive()).strip()
            except trio.EndOfChannel:
                return
        if not text:
            continue
        if text in EXIT_WORDS:
            return
        session.interrupts = 0
        session.aborting = False
        session.run_started = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_steer, lines, agent, session, view)
            try:
                result = await agent.prompt(text, output_type=session.output_schema)
                # Steering typed after the run's last poll waits in the queue: answer it
                # now rather than with the next prompt.
                while (
                    result.reason != "aborted" and not session.leaving and agent.has_queued_messages
                ):
                    session.run_started = trio.Event()
                    result = await agent.continue_()
                if session.output_schema is not None:
                    _show_output(result, session, view)
            except AgentRunError as exc:
                session.exit_code = session.exit_code or 1
                if view.errors is None:
                    view.line(view.s.red(f"  error: {exc}"))
                else:
                    view.errors.line(f"error: {exc}")
            nursery.cancel_scope.cancel()


async def run_chat(
    model: Model,
    *,
    lines: trio.MemoryReceiveChannel[str],
    out: TextIO,
    sink: JsonlTranscript,
    tools: Sequence[Tool] = (),
    system_prompt: str = "",
    config: LoopConfig | None = None,
    signals: AsyncIterator[Any] | None = None,
    title: str = "",
    errors: TextIO | None = None,
    confirm: Collection[str] = (),
    can_ask: bool = True,
    history: Sequence[Message] = (),
    notes: Sequence[str] = (),
    output_schema: Mapping[str, Any] | None = None,
) -> int:
    """Hold a chat session: each line of ``lines`` is a prompt, or steering during a run.

    The conversation starts from ``history`` (a resumed session's messages, already in
    ``sink``'s file; empty for a new one); ``notes`` are lines shown before the first
    prompt (what was done to resume it). With ``output_schema`` (a JSON Schema) every
    prompt asks for a structured output: the validated value is written as indented
    JSON when its run ends; an answer still invalid after the retries is an error
    (exit code 1).

    Ends when ``lines`` ends (after the current run) or at a second item of ``signals``
    in a row (the first aborts the run in progress). Every event goes to ``sink`` (an
    open transcript). A model or transport error is written to ``errors`` (default
    ``sys.stderr``). A call of a tool named in ``confirm`` waits for the next line
    read: ``y`` or ``yes`` runs it, anything else blocks it (the model reads that the
    user declined); with ``can_ask`` false such calls are blocked without asking.
    Returns the exit code: 0; 1 when a run ended with a model or transport error; 130
    when left by a signal. The last line written is ``transcript: PATH``.

    Raises:
        OSError: the transcript cannot be written (inside an exception group).
    """
    session = _Session()
    session.output_schema = output_schema
    output = Output(out)
    live = out.isatty()
    view = LiveView(
        output,
        live=live,
        color=live and wants_color(out),
        errors=_ErrorOutput(errors if errors is not None else sys.stderr),
    )
    s = view.s
    if confirm:
        # The tools that change things wait for approval; the prompt is the approver.
        config = config if config is not None else LoopConfig()
        config = attrs.evolve(config, approver=_approver(session, view, can_ask))
        tools = _asking(tools, confirm)
    if title:
        view.line(s.bold("trio-agent chat") + s.dim(f" · {title}"))
    view.line(s.dim(f"tools: {', '.join(t.name for t in tools) or 'none'}"))
    if history:
        n = len(history)
        view.line(s.dim(f"resuming {sink.path}: {n} message{'s' if n != 1 else ''}"))
    for note in notes:
        view.line(s.dim(f"  ({note})"))
    view.line(s.dim("type a message and press Enter; typing during a run steers it; Ctrl-C aborts"))
    async with (
        open_agent(
            model, tools=tools, system_prompt=system_prompt, config=config, messages=history
        ) as agent,
        agent.subscribe() as events,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(_display, events, sink, view, session)
        # A second Ctrl-C cancels the conversation only: the run it cancels still hands
        # its closing events (the aborted reply, its skipped results) to the display,
        # which writes them to the transcript.
        conversation = trio.CancelScope()
        if signals is not None:
            nursery.start_soon(_on_interrupt, signals, agent, session, view, conversation)
        with conversation:
            await _converse(lines, agent, session, view)
        await agent.wait_for_idle()
        nursery.cancel_scope.cancel()
    output.line(f"transcript: {sink.path}")
    return session.exit_code


class _ErrorOutput(Output):
    """stderr for the command line: the providers' key hint names the CLI's flag."""

    def line(self, text: str = "") -> None:
        for env in KEY_ENVS.values():
            text = text.replace(
                f"pass api_key= or set {env}", f"set {env} or pass --api-key-file FILE"
            )
        super().line(text)


async def read_stdin(send: trio.MemorySendChannel[str]) -> None:
    """Send each line of stdin (its newline kept) to ``send`` until end of input, then
    close ``send``. Cancellable at any time: a line being read is then lost."""
    with send:
        while True:
            # A worker thread per line: stdin stays blocking (a shared terminal would
            # see O_NONBLOCK otherwise); the thread is abandoned on exit.
            line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            if not line:
                return
            await send.send(line)
