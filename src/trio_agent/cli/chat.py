"""``trio-agent chat``: an interactive session with a real model, on the Agent.

Type a message and press Enter: the agent answers, with the workspace tools on
``--folder`` (read, write, edit, ls, find, grep and bash) and those of the MCP servers
given with ``--mcp`` / ``--mcp-url`` (their list as it was at start). Text typed while
it works is sent as steering — the model reads it after its current step. Ctrl-C aborts the run in
progress (the transcript stays paired); a second Ctrl-C in a row exits. End of input
(Ctrl-D) or ``/exit`` leaves once the current run is over. Every finished message goes
to a JSONL transcript, whose path is the last line of output.

Errors go to stderr: a model or transport error (a closed port, a 401, a 500) ends
that run, and the session's exit code is then 1. A missing API key for the provider's
own API is found before the first prompt (exit 2). Calls of ``write``, ``edit`` and
``bash`` wait for a ``y`` typed at the terminal unless ``--yes``; with stdin not a
terminal and no ``--yes`` they are refused (the model reads why).

Theory of operation: one task reads stdin (a worker thread per line) into a channel;
:func:`run_chat` takes a line when the agent is idle and ``prompt()``\\ s it, while a
second task turns the lines typed during that run into ``steer()`` calls (only once the
run has begun, so a steering message never overtakes the prompt it follows). A third
task shows the agent's events and writes them to the transcript; a fourth turns SIGINT
into ``abort()`` or, the second time, into leaving.
"""

from __future__ import annotations

import io
import math
import os
import re
import signal
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import attrs
import trio

from .. import _events as ev
from .._agent import Agent, open_agent
from .._config import BeforeToolCallContext, BeforeToolCallResult, LoopConfig
from .._errors import AgentRunError, AgentUsageError, TranscriptFormatError
from .._jsonl import JsonlTranscript
from .._messages import UserMessage
from .._model import ModelOptions
from ..providers import Anthropic, OpenAIChat
from ..replay import RecordingModel
from ..tools import workspace
from ._common import state_file
from ._render import LiveView, Output, describe_call, wants_color

if TYPE_CHECKING:
    import argparse
    from collections.abc import AsyncIterator, Collection, Sequence

    from .._model import Model
    from .._observer import Observer
    from .._tools import Tool
    from ..mcp import McpServer

__all__ = ["add_arguments", "run", "run_chat"]

SYSTEM_PROMPT = (
    "You are a coding agent working in the folder {folder}. Use the tools to look at and "
    "change files there. Be concise."
)
EXIT_WORDS = ("/exit", "/quit")
DEFAULT_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
KEY_ENVS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
CONFIRMED_TOOLS = ("write", "edit", "bash")
"""Workspace tools that change things: each call waits for the user's ``y``."""
YES = ("y", "yes")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Chat with a real model (an OpenAI-compatible server — OpenAI, vLLM, llama.cpp, "
        "Ollama — or Anthropic) that can use the workspace tools on a folder. Text typed "
        "during a run steers it; Ctrl-C aborts the run, a second Ctrl-C exits; Ctrl-D or "
        "/exit leaves after the current run."
    )
    parser.epilog = (
        "The API key comes from --api-key-file, else OPENAI_API_KEY or ANTHROPIC_API_KEY; "
        "it is checked before the first prompt when --base-url is the provider's own API "
        "(a local server may need none). Calls of write, edit and bash are shown and wait "
        "for 'y' unless --yes; when stdin is not a terminal they are refused without --yes. "
        "The transcript (one JSON line per message) goes to $XDG_STATE_HOME/"
        "trio-agent/chat/ (default ~/.local/state/...) unless --transcript is given; the "
        "last line of output is 'transcript: PATH'. Errors go to stderr. Defaults: "
        "--provider openai, --folder ., all workspace tools, the provider's own API. "
        "Exit codes: 0 normal end, 1 a run ended with a model or transport error (or the "
        "transcript could not be written), 2 bad usage or a missing API key, 130 left "
        "with Ctrl-C."
    )
    parser.add_argument(
        "--provider",
        choices=("openai", "anthropic"),
        default="openai",
        help="the API's dialect (default: openai)",
    )
    parser.add_argument("--model", required=True, metavar="NAME", help="the model name")
    parser.add_argument(
        "--base-url",
        metavar="URL",
        help="the API root (default: the provider's; e.g. http://localhost:8000/v1 for vLLM)",
    )
    parser.add_argument(
        "--folder", default=".", metavar="DIR", help="the tools' workspace (default: .)"
    )
    parser.add_argument("--no-tools", action="store_true", help="give the model no workspace tools")
    parser.add_argument("--no-bash", action="store_true", help="leave out the bash tool")
    parser.add_argument(
        "--api-key-file",
        metavar="FILE",
        type=Path,
        help="read the API key from FILE (its first line) instead of the environment",
    )
    parser.add_argument(
        "--yes",
        action="store_true",
        help="run write, edit and bash calls without asking first",
    )
    parser.add_argument("--system", metavar="TEXT", help="the system prompt")
    parser.add_argument("--reasoning", metavar="LEVEL", help="minimal, low, medium or high")
    parser.add_argument("--max-tokens", metavar="N", type=int, help="longest reply, in tokens")
    parser.add_argument(
        "--transcript", metavar="PATH", type=Path, help="write the JSONL transcript here"
    )
    parser.add_argument(
        "--record",
        metavar="FILE",
        type=Path,
        help="record every request and streamed reply to the cassette FILE (replaced), "
        "for 'trio-agent replay FILE'; no API key is written",
    )
    parser.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="'CMD ARGS'",
        help=(
            "also give the model the tools of this MCP server, run as a subprocess over "
            "stdio (repeatable; needs 'trio-agent[mcp]'). 'NAME=CMD ARGS' prefixes its tool "
            "names with NAME__. Its stderr goes to the transcript's path + .mcp.log"
        ),
    )
    parser.add_argument(
        "--mcp-url",
        action="append",
        default=[],
        metavar="URL",
        help="also give the model the tools of the MCP server at this streamable-HTTP URL "
        "(repeatable; 'NAME=URL' prefixes its tool names)",
    )
    parser.add_argument(
        "--otel-console",
        action="store_true",
        help="print an OpenTelemetry span per run, model request and tool call on stderr "
        "(needs 'trio-agent[otel]' and opentelemetry-sdk). Without it, spans go where "
        "'opentelemetry-instrument' set up from the OTEL_* variables, if it did",
    )


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
            if event.reason == "error":
                # A model or transport error (its text went to the error stream).
                session.exit_code = session.exit_code or 1
            if event.reason not in ("stop", "terminated", "aborted"):
                view.line(view.s.dim(f"  (the run ended: {event.reason})"))


def _approval(
    session: _Session,
    view: LiveView,
    confirm: Collection[str],
    can_ask: bool,
    then: Any,
) -> Any:
    """A ``before_tool_call`` hook: a call of a tool in ``confirm`` runs only after the
    user types ``y`` (the next line read); any other answer blocks it. Without
    ``can_ask`` such calls are blocked at once. One question at a time; an abort while
    waiting cancels the question with the run. ``then`` (another hook) runs after."""
    lock = trio.Lock()

    async def before(ctx: BeforeToolCallContext) -> BeforeToolCallResult | None:
        name = ctx.tool_call.name
        if name in confirm:
            label = describe_call(name, ctx.args)
            if not can_ask:
                view.line(view.s.red(f"  refused (no terminal to ask, no --yes): {label}"))
                return BeforeToolCallResult(
                    block=True,
                    reason=f"{name} needs the user's approval, and there is no terminal to "
                    "ask on: run trio-agent chat from a terminal, or with --yes",
                )
            async with lock:
                send, receive = trio.open_memory_channel[str](1)
                session.answer = send
                try:
                    view.line(view.s.bold(f"  allow {label}? [y/N]"))
                    with receive:
                        answer = (await receive.receive()).strip().lower()
                finally:
                    session.answer = None
            if answer not in YES:
                return BeforeToolCallResult(block=True, reason="the user declined this call")
        if then is None:
            return None
        result = then(ctx)
        if hasattr(result, "__await__"):
            result = await result
        return result  # type: ignore[no-any-return]

    return before


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
            return
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
                result = await agent.prompt(text)
                # Steering typed after the run's last poll waits in the queue: answer it
                # now rather than with the next prompt.
                while (
                    result.reason != "aborted" and not session.leaving and agent.has_queued_messages
                ):
                    session.run_started = trio.Event()
                    result = await agent.continue_()
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
) -> int:
    """Hold a chat session: each line of ``lines`` is a prompt, or steering during a run.

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
        config = config if config is not None else LoopConfig()
        hook = _approval(session, view, confirm, can_ask, config.before_tool_call)
        config = attrs.evolve(config, before_tool_call=hook)
    if title:
        view.line(s.bold("trio-agent chat") + s.dim(f" · {title}"))
    view.line(s.dim(f"tools: {', '.join(t.name for t in tools) or 'none'}"))
    view.line(s.dim("type a message and press Enter; typing during a run steers it; Ctrl-C aborts"))
    async with (
        open_agent(model, tools=tools, system_prompt=system_prompt, config=config) as agent,
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


async def _read_stdin(send: trio.MemorySendChannel[str]) -> None:
    with send:
        while True:
            # A worker thread per line: stdin stays blocking (a shared terminal would
            # see O_NONBLOCK otherwise); the thread is abandoned on exit.
            line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            if not line:
                return
            await send.send(line)


def _transcript_path(chosen: Path | None) -> Path:
    if chosen is not None:
        chosen.parent.mkdir(parents=True, exist_ok=True)
        return chosen
    path = state_file("chat")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _api_key(args: argparse.Namespace) -> str | None:
    """The key from ``--api-key-file`` (its first line), else from the provider's
    environment variable; None when neither gives one.

    Raises:
        ValueError: the provider's own API needs a key and none is set, or the key
            file cannot be read; the message names the variable and the flag.
    """
    env = KEY_ENVS[args.provider]
    if args.api_key_file is not None:
        try:
            text = args.api_key_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read the API key file: {exc}") from None
        key: str | None = (text.splitlines() or [""])[0].strip()
    else:
        key = (os.environ.get(env) or "").strip()
    if not key:
        key = None
    if key is None and args.base_url is None:
        raise ValueError(
            f"no API key for {DEFAULT_URLS[args.provider]}: set {env} or pass "
            "--api-key-file FILE (a local server: --base-url URL)"
        )
    return key


def _model(args: argparse.Namespace) -> OpenAIChat | Anthropic:
    """The model the arguments name. Raises ValueError for a bad ``--base-url`` or a
    missing key (see :func:`_api_key`)."""
    base_url = args.base_url or DEFAULT_URLS[args.provider]
    key = _api_key(args)
    if args.provider == "openai":
        return OpenAIChat(args.model, base_url=base_url, api_key=key)
    return Anthropic(args.model, base_url=base_url, api_key=key)


_PREFIXED = re.compile(r"([A-Za-z][A-Za-z0-9_-]*)=(.*)", re.S)


def _mcp_servers(args: argparse.Namespace, transcript: Path) -> list[McpServer]:
    """The ``--mcp`` and ``--mcp-url`` servers. Raises ValueError for a bad one, and
    ImportError when the MCP extra is not installed (only when one is asked for)."""
    if not args.mcp and not args.mcp_url:
        return []
    from ..mcp import StdioServer, StreamableHttpServer

    servers: list[McpServer] = []
    stderr = f"{transcript}.mcp.log"
    for line in args.mcp:
        prefixed = _PREFIXED.fullmatch(line.strip())
        prefix, command = prefixed.groups() if prefixed else (None, line)
        servers.append(StdioServer.from_command_line(command, prefix=prefix, stderr=stderr))
    for url in args.mcp_url:
        prefixed = _PREFIXED.fullmatch(url.strip())
        prefix, url = prefixed.groups() if prefixed else (None, url)
        servers.append(StreamableHttpServer(url.strip(), prefix=prefix))
    return servers


async def _main(
    args: argparse.Namespace,
    model: OpenAIChat | Anthropic,
    folder: str,
    transcript: Path,
    servers: Sequence[McpServer] = (),
) -> int:
    if not servers:
        return await _chat(args, model, folder, transcript, ())
    from ..mcp import McpServerError, open_mcp_tools

    try:
        # Every server process ends with this block, also on Ctrl-C.
        async with open_mcp_tools(*servers) as mcp:
            return await _chat(args, model, folder, transcript, mcp.tools)
    except McpServerError as exc:  # raised on entry only: a server did not start
        _complain(str(exc))
        return 2


async def _chat(
    args: argparse.Namespace,
    model: OpenAIChat | Anthropic,
    folder: str,
    transcript: Path,
    extra_tools: Sequence[Tool],
) -> int:
    tools = () if args.no_tools else workspace(folder, allow_bash=not args.no_bash)
    taken = {t.name for t in tools}
    clashes = sorted(t.name for t in extra_tools if t.name in taken)
    if clashes:
        _complain(
            f"an MCP server offers tools named like workspace tools ({', '.join(clashes)}): "
            "give it a prefix ('NAME=CMD ARGS') or use --no-tools"
        )
        return 2
    tools = (*tools, *extra_tools)
    system = args.system if args.system is not None else SYSTEM_PROMPT.format(folder=folder)
    config = LoopConfig(
        model_options=ModelOptions(reasoning=args.reasoning, max_tokens=args.max_tokens),
        observer=getattr(args, "observer", None),
    )
    send, lines = trio.open_memory_channel[str](math.inf)
    title = f"{args.provider} {args.model} at {model.base_url} · folder {folder}"
    talk_to: Model = model if args.record is None else RecordingModel(model, args.record)
    # The handler is in place before anything runs: no Ctrl-C falls outside it.
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async with JsonlTranscript(transcript, fsync="turn") as sink, model:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_read_stdin, send)
                code = await run_chat(
                    talk_to,
                    lines=lines,
                    out=sys.stdout,
                    sink=sink,
                    tools=tools,
                    system_prompt=system,
                    config=config,
                    signals=signals,
                    title=title,
                    errors=sys.stderr,
                    confirm=() if args.yes or args.no_tools else CONFIRMED_TOOLS,
                    can_ask=sys.stdin.isatty(),
                )
                nursery.cancel_scope.cancel()
    return code


def _observer(console: bool) -> Observer | None:
    """Spans for the session: on the console, or where ``OTEL_*`` set up (see
    ``trio_agent.telemetry._setup``); None without OpenTelemetry installed."""
    try:
        from ..telemetry._setup import command_line_observer
    except ImportError:
        if console:
            raise ImportError(
                "--otel-console needs OpenTelemetry: pip install 'trio-agent[otel]' "
                "opentelemetry-sdk"
            ) from None
        return None
    return command_line_observer(console, agent_name="trio-agent chat")


def _complain(text: str) -> None:
    print(f"trio-agent chat: {text}", file=sys.stderr)


def _first(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def run(args: argparse.Namespace) -> int:
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="replace")
    if not os.path.isdir(args.folder):
        _complain(f"no such folder: {args.folder}")
        return 2
    if args.record is not None and not args.record.parent.is_dir():
        _complain(f"no such folder for the cassette: {args.record.parent}")
        return 2
    try:
        model = _model(args)
    except ValueError as exc:
        _complain(str(exc))
        return 2
    try:
        transcript = _transcript_path(args.transcript)
    except OSError as exc:
        _complain(f"cannot create the folder of the transcript: {exc}")
        return 1
    try:
        servers = _mcp_servers(args, transcript)
        args.observer = _observer(args.otel_console)
    except (ValueError, ImportError) as exc:
        _complain(str(exc))
        return 2
    try:
        return trio.run(
            partial(_main, args, model, os.path.abspath(args.folder), transcript, servers)
        )
    except (TranscriptFormatError, AgentUsageError, OSError) as exc:
        _complain(f"cannot write the transcript {transcript}: {exc}")
        return 1
    except Exception as exc:
        # Ctrl-C (KeyboardInterrupt) is the command line's to report; anything else ends
        # the session with one line, not a traceback.
        first = _first(exc)
        if isinstance(first, OSError | TranscriptFormatError):
            _complain(f"cannot write the transcript {transcript}: {first}")
        else:
            _complain(f"the session stopped: {type(first).__name__}: {first}")
        return 1
