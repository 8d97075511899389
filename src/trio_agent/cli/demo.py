"""``trio-agent demo``: an offline scripted session on the current folder, shown live.

A scripted model (no key, no network) tours the folder through the real workspace tools
— ls, two reads in parallel, grep (and ``wc`` through bash unless ``--no-bash``), then an
answer — and the run is shown as it happens. The demo only reads: it gives the model no
tool that writes. Every finished message goes to a JSONL transcript outside the folder,
whose path is the last line of output (with ``--json``, the last JSON line:
``{"type": "transcript", "path": ...}``); the line before it says where the run's HTML
report was written (next to the transcript, ``.html`` for ``.jsonl``) and how to open it.

Ctrl-C aborts the run (the transcript stays paired) and exits 130; a second Ctrl-C exits
at once. A reader that goes away (``trio-agent demo --json | head``) ends the run quietly.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from contextlib import nullcontext
from functools import partial
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, TextIO

import attrs
import trio

from .._core import AgentRunError, AgentUsageError, Context, TranscriptFormatError, UserMessage
from .._run import AgentRun, open_agent_loop
from .._store import JsonlTranscript
from ..report import transcript_report
from ..tools import workspace
from ._common import first_error, holds_a_transcript, replace_unprintable, state_file
from ._demo_script import SYSTEM_PROMPT, PacedModel, demo_model, prompt_for
from ._render import JsonView, LiveView, Output, wants_color

if TYPE_CHECKING:
    import argparse
    from collections.abc import AsyncIterator

__all__ = ["add_arguments", "default_transcript_path", "run", "run_demo"]

READ_ONLY_TOOLS = ("read", "ls", "find", "grep", "bash")
DEFAULT_PACE = 0.012


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run an offline scripted session on the current folder and show it live: a "
        "scripted model (no API key, no network) lists the folder, reads two files in "
        "parallel, searches it and answers, through the real workspace tools. It only "
        "reads; the folder is never written to."
    )
    parser.epilog = (
        "The transcript (one JSON line per message) goes to $XDG_STATE_HOME/trio-agent/"
        "demo/ (default ~/.local/state/...) unless --transcript is given; the output "
        "ends with the line 'transcript: PATH' and then a line telling where the run's "
        "HTML report was written (PATH with .html) and how to open it (with --json, the "
        'last line is the JSON line {"type": "transcript", "path": PATH}). '
        f"Defaults: --pace {DEFAULT_PACE} (0 with --json), the bash tool given. "
        "Exit codes: 0 the run ended normally, 1 it did not (or the transcript could not "
        "be written), 2 bad usage (also: --transcript naming an existing transcript), "
        "130 interrupted by Ctrl-C (the run is aborted, its "
        "transcript kept)."
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the run's events as JSON lines instead, one per line and nothing else on "
        "stdout; message_update lines carry only their stream event (a delta); unpaced "
        "unless --pace is given",
    )
    parser.add_argument(
        "--transcript",
        metavar="PATH",
        type=Path,
        help="write the JSONL transcript to this new file (an existing transcript is refused)",
    )
    parser.add_argument(
        "--no-bash", action="store_true", help="do not give the model the bash tool"
    )
    parser.add_argument(
        "--pace",
        metavar="SECONDS",
        type=float,
        default=None,
        help=f"seconds per streamed chunk of text (default {DEFAULT_PACE}, with --json 0; "
        "0: full speed)",
    )


def default_transcript_path() -> Path:
    """A new file under ``$XDG_STATE_HOME/trio-agent/demo`` (``~/.local/state``)."""
    return state_file("demo")


def _prepare_transcript(chosen: Path | None) -> Path:
    """The transcript path, its folder created; falls back to the temp folder when the
    state folder cannot be made (a read-only home)."""
    path = chosen if chosen is not None else default_transcript_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        if chosen is not None:
            raise
        path = Path(tempfile.mkdtemp(prefix="trio-agent-demo-")) / path.name
    return path


@attrs.define
class _Interrupt:
    count: int = 0


async def _abort_on_sigint(
    signals: AsyncIterator[int], run: AgentRun, interrupt: _Interrupt
) -> None:
    """First Ctrl-C: abort the run (it ends paired). Second: raise KeyboardInterrupt."""
    async for _ in signals:
        interrupt.count += 1
        if interrupt.count > 1:
            raise KeyboardInterrupt
        run.abort("interrupted by Ctrl-C")


async def run_demo(
    folder: str,
    out: TextIO,
    *,
    transcript: Path,
    as_json: bool = False,
    bash: bool = True,
    pace: float = DEFAULT_PACE,
    live: bool | None = None,
    handle_sigint: bool = False,
) -> int:
    """Play the demo session on ``folder``, writing the display to ``out``.

    Returns the exit code (0 stop, 1 another end, 130 aborted by Ctrl-C). The output
    ends with ``transcript: PATH`` and then the line that tells how to open the run's
    HTML report, written next to the transcript (with ``as_json``, the last line is the
    JSON line ``{"type": "transcript", "path": PATH}``), unless the reader went away.

    Raises:
        AgentRunError: a bug ended the run.
        TranscriptFormatError, OSError: the transcript cannot be written.
    """
    name = PurePath(folder).name or folder
    tools = tuple(t for t in workspace(folder, allow_bash=bash) if t.name in READ_ONLY_TOOLS)
    model = PacedModel(demo_model(name, bash=bash), pace)
    context = Context(system_prompt=SYSTEM_PROMPT, tools=tools)
    output = Output(out)
    if live is None:
        live = out.isatty()
    view: LiveView | JsonView
    if as_json:
        view = JsonView(output)
    else:
        view = LiveView(output, live=live, color=live and wants_color(out))
        view.header(folder, [t.name for t in tools], bash)
    interrupt = _Interrupt()
    began = trio.current_time()
    # The handler is in place before the run starts: no Ctrl-C falls between the two.
    with trio.open_signal_receiver(signal.SIGINT) if handle_sigint else nullcontext() as signals:
        async with (
            JsonlTranscript(transcript, fsync="turn", timings=True) as sink,
            open_agent_loop([UserMessage.text(prompt_for(name))], context, model) as run,
            trio.open_nursery() as nursery,
        ):
            if signals is not None:
                nursery.start_soon(_abort_on_sigint, signals, run, interrupt)
            if isinstance(view, LiveView) and live:
                nursery.start_soon(view.spin)
            async for event in run.events:
                # Every event reaches the transcript, also after the reader went away:
                # the abort's clean-up results keep it paired.
                await sink.write_event(event)
                if output.broken:
                    run.abort("the output was closed")
                else:
                    view.show(event)
            nursery.cancel_scope.cancel()
    result = run.result
    assert result is not None
    if isinstance(view, LiveView):
        view.footer(result.reason, result.steps, len(result.messages), trio.current_time() - began)
    if isinstance(view, JsonView):
        view.transcript(transcript)
    else:
        output.line(f"transcript: {transcript}")
        if not output.broken:
            output.line(await _write_report(transcript))
    if output.broken:
        return 0
    if interrupt.count:
        print("interrupted: the run was aborted; its transcript is kept", file=sys.stderr)
        return 130
    return 0 if result.reason == "stop" else 1


async def _write_report(transcript: Path) -> str:
    """Write the run's HTML report next to its transcript (``.html`` for ``.jsonl``);
    the line that tells how to open it (or how to write it, when it could not be)."""
    page = transcript.with_suffix(".html")
    try:
        text = await trio.to_thread.run_sync(transcript_report, [transcript])
        await trio.Path(page).write_text(text, encoding="utf-8")
    except (OSError, TranscriptFormatError) as exc:
        return f"report: not written ({exc}); write it with: trio-agent report {transcript}"
    return f"report: open {page.resolve().as_uri()} in a browser (the run's timeline)"


def pace_of(args: argparse.Namespace) -> float:
    """The pace asked for: ``--pace``, else none with ``--json``, else the default."""
    if args.pace is not None:
        return max(0.0, float(args.pace))
    return 0.0 if args.json else DEFAULT_PACE


def _complain(text: str) -> None:
    print(f"trio-agent demo: {text}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    replace_unprintable(sys.stdout)
    if args.transcript is not None and holds_a_transcript(args.transcript):
        # A second session appended to it would break it (two conversations, the same
        # call ids): each demo gets a file of its own.
        _complain(
            f"the transcript {args.transcript} exists already: give --transcript a new "
            "path (or leave it out)"
        )
        return 2
    try:
        transcript = _prepare_transcript(args.transcript)
    except OSError as exc:
        _complain(f"cannot create the folder of the transcript: {exc}")
        return 1
    demo = partial(
        run_demo,
        os.getcwd(),
        sys.stdout,
        transcript=transcript,
        as_json=bool(args.json),
        bash=not args.no_bash,
        pace=pace_of(args),
        handle_sigint=True,
    )
    code = 1
    # A failure inside the run's nursery arrives as a group; these are the expected ones.
    try:
        code = trio.run(demo)
    except* (TranscriptFormatError, AgentUsageError, OSError) as group:
        _complain(f"cannot write the transcript {transcript}: {first_error(group)}")
    except* AgentRunError as group:
        _complain(f"the run failed: {first_error(group)}")
    return code
