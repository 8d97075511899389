"""``trio-agent chat``: an interactive session with a real model, on the Agent.

Type a message and press Enter: the agent answers, with the workspace tools on
``--folder`` (read, write, edit, ls, find, grep and bash) and those of the MCP servers
given with ``--mcp`` / ``--mcp-url`` (their list as it was at start). Text typed while
it works is sent as steering — the model reads it after its current step. Ctrl-C aborts the run in
progress (the transcript stays paired); a second Ctrl-C in a row exits. End of input
(Ctrl-D) or ``/exit`` leaves once the current run is over. Every finished message goes
to a JSONL transcript, whose path is the last line of output: a new file, or with
``--resume PATH`` the transcript of an earlier session, whose conversation goes on (the
file is repaired first if a crash left it torn or with unanswered calls). A
``--transcript`` that names an existing transcript is refused (exit 2): appending a
second session to it would break it.

Errors go to stderr: a model or transport error (a closed port, a 401, a 500) ends
that run, and the session's exit code is then 1. A missing API key for the provider's
own API is found before the first prompt (exit 2). With ``--output-schema FILE.json``
every prompt asks for a JSON value matching that schema, and the validated value is
printed as JSON (indented) once the run ends; an answer still invalid after the retries
is an error (exit 1). Calls of ``write``, ``edit`` and
``bash`` wait for a ``y`` typed at the terminal unless ``--yes``; with stdin not a
terminal and no ``--yes`` they are refused (the model reads why).

Where things are: the options and what is built from them (the model, its key, the MCP
servers, the observer) in :mod:`._chat_options`; the conversation (prompts, steering,
approval, Ctrl-C) in :mod:`._chat_session`; here, the command itself: it checks the
options, opens the MCP servers, the transcript and the model, and runs the session.
"""

from __future__ import annotations

import math
import os
import signal
import sys
from functools import partial
from typing import TYPE_CHECKING

import trio

from .._core import AgentUsageError, LoopConfig, ModelOptions, TranscriptFormatError
from .._store import JsonlTranscript
from ..replay import RecordingModel
from ..tools import workspace
from ._chat_options import (
    SYSTEM_PROMPT,
    ChatTranscript,
    add_arguments,
    context_policy,
    make_model,
    make_observer,
    mcp_servers,
    output_schema,
    session_transcript,
)
from ._chat_session import CONFIRMED_TOOLS, read_stdin, run_chat
from ._common import first_error, replace_unprintable

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

    from .._core import Model, Tool
    from ..mcp import McpServer
    from ..providers import Anthropic, Gemini, OpenAIChat, OpenAIResponses

__all__ = ["add_arguments", "run", "run_chat"]


async def _main(
    args: argparse.Namespace,
    model: OpenAIChat | OpenAIResponses | Anthropic | Gemini,
    folder: str,
    session: ChatTranscript,
    servers: Sequence[McpServer] = (),
) -> int:
    if not servers:
        return await _chat(args, model, folder, session, ())
    from ..mcp import McpServerError, open_mcp_tools

    try:
        # Every server process ends with this block, also on Ctrl-C.
        async with open_mcp_tools(*servers) as mcp:
            return await _chat(args, model, folder, session, mcp.tools)
    except McpServerError as exc:  # raised on entry only: a server did not start
        _complain(str(exc))
        return 2


async def _chat(
    args: argparse.Namespace,
    model: OpenAIChat | OpenAIResponses | Anthropic | Gemini,
    folder: str,
    session: ChatTranscript,
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
        model_options=ModelOptions(
            reasoning=args.reasoning,
            max_tokens=args.max_tokens,
            context_window=getattr(args, "context_window", None),
        ),
        observer=getattr(args, "observer", None),
        context=context_policy(args, session),
    )
    send, lines = trio.open_memory_channel[str](math.inf)
    title = f"{args.provider} {args.model} at {model.base_url} · folder {folder}"
    talk_to: Model = model if args.record is None else RecordingModel(model, args.record)
    # The handler is in place before anything runs: no Ctrl-C falls outside it.
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async with JsonlTranscript(session.path, fsync="turn", timings=True) as sink, model:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(read_stdin, send)
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
                    history=session.history,
                    notes=session.notes,
                    output_schema=args.schema,
                )
                nursery.cancel_scope.cancel()
    return code


def _complain(text: str) -> None:
    print(f"trio-agent chat: {text}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Run ``trio-agent chat`` with the parsed ``args``; returns the exit code (see the
    module's docstring). Blocks until the session ends."""
    replace_unprintable(sys.stdout)
    if not os.path.isdir(args.folder):
        _complain(f"no such folder: {args.folder}")
        return 2
    if args.record is not None and not args.record.parent.is_dir():
        _complain(f"no such folder for the cassette: {args.record.parent}")
        return 2
    try:
        model = make_model(args)
        args.schema = output_schema(args)
    except ValueError as exc:
        _complain(str(exc))
        return 2
    try:
        session = session_transcript(args)
    except ValueError as exc:
        _complain(str(exc))
        return 2
    except (OSError, AgentUsageError) as exc:
        _complain(f"cannot write the transcript: {exc}")
        return 1
    transcript = session.path
    try:
        servers = mcp_servers(args, transcript)
        args.observer = make_observer(args.otel_console)
    except (ValueError, ImportError) as exc:
        _complain(str(exc))
        return 2
    try:
        return trio.run(partial(_main, args, model, os.path.abspath(args.folder), session, servers))
    except (TranscriptFormatError, AgentUsageError, OSError) as exc:
        _complain(f"cannot write the transcript {transcript}: {exc}")
        return 1
    except Exception as exc:
        # Ctrl-C (KeyboardInterrupt) is the command line's to report; anything else ends
        # the session with one line, not a traceback.
        first = first_error(exc)
        if isinstance(first, OSError | TranscriptFormatError):
            _complain(f"cannot write the transcript {transcript}: {first}")
        else:
            _complain(f"the session stopped: {type(first).__name__}: {first}")
        return 1
