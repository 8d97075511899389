"""``trio-agent resume TRANSCRIPT``: answer the tool calls a run left waiting, and go on.

A run whose calls wait for a decision (a tool declared ``approval="always"``, or
``before_tool_call`` returned ``Defer``) ends ``deferred`` and records the waiting calls
in its JSONL transcript. Without decisions this command lists them (id, tool, arguments,
reason). With ``--approve ID`` / ``--deny ID [--reason TEXT]`` for every waiting call it
resumes the run from the file alone: approved calls run now (with the workspace tools on
``--folder``, as ``trio-agent chat`` gives them), denied ones get an error result with
the reason, every result enters the transcript in declaration order, and the loop goes
on with the model named by ``--model`` (the options mean what they mean for ``chat``).
Output shows the run as it goes; the last line is ``transcript: PATH``.

Exactly once: the decisions are written to the transcript before an approved call runs,
so a resume that a crash stopped is resumed again without deciding (a call approved
then has no result: it gets one saying it was not run again).

Exit codes: 0 resumed (or listed), also when the run ends ``deferred`` again (the new
waiting calls are listed); 1 the run ended with a model or transport error, or the
transcript could not be read or written; 2 bad usage: nothing waits in the file, a
decision for an unknown or answered id, a waiting call without a decision, no
``--model``.
"""

from __future__ import annotations

import json
import os
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from .._core import (
    AgentUsageError,
    Approve,
    Deny,
    LoopConfig,
    TranscriptFormatError,
    open_deferral,
)
from .._run import plan_for, resume
from .._store import JsonlTranscript, load_transcript
from ..tools import workspace
from ._chat_options import DEFAULT_URLS, make_model
from ._common import first_error, replace_unprintable
from ._render import LiveView, Output

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

    from .._core import CallDecision, DeferredCall
    from .._core import events as ev
    from .._store import LoadedTranscript

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` the command's options."""
    parser.description = (
        "Answer the tool calls a run left waiting for approval (recorded in its JSONL "
        "transcript), then go on with the run. Without --approve/--deny: list them."
    )
    parser.epilog = (
        "Every waiting call needs exactly one decision. Approved calls run with the "
        "workspace tools on --folder; the model options are those of 'trio-agent chat' "
        "(the API key from --api-key-file, else OPENAI_API_KEY or ANTHROPIC_API_KEY). "
        "Exit codes: 0 resumed or listed (also when the run waits again), 1 a model or "
        "transport error or an unreadable transcript, 2 bad usage."
    )
    parser.add_argument("transcript", type=Path, metavar="TRANSCRIPT", help="the JSONL file")
    parser.add_argument(
        "--approve", action="append", default=[], metavar="ID", help="run this call (repeatable)"
    )
    parser.add_argument(
        "--deny",
        action="append",
        default=[],
        metavar="ID",
        help="refuse this call: its result is an error with --reason (repeatable)",
    )
    parser.add_argument(
        "--reason", metavar="TEXT", help="what a denied call's result says (the model reads it)"
    )
    parser.add_argument(
        "--provider", choices=("openai", "anthropic"), default="openai", help="the API's dialect"
    )
    parser.add_argument("--model", metavar="NAME", help="the model that goes on with the run")
    parser.add_argument("--base-url", metavar="URL", help="the API root")
    parser.add_argument("--api-key-file", metavar="FILE", type=Path, help="read the key here")
    parser.add_argument("--folder", default=".", metavar="DIR", help="the tools' workspace")
    parser.add_argument("--no-bash", action="store_true", help="leave out the bash tool")
    parser.add_argument("--system", metavar="TEXT", help="the system prompt")


def _complain(text: str) -> None:
    print(f"trio-agent resume: {text}", file=sys.stderr)


def _describe(call: DeferredCall) -> str:
    args = json.dumps(dict(call.arguments), ensure_ascii=False, sort_keys=True)
    why = f" — {call.reason}" if call.reason else ""
    return f"  {call.id}: {call.name} {args}{why}"


def _listing(out: Output, calls: Sequence[DeferredCall], path: Path) -> None:
    out.line(f"{len(calls)} call{'s' if len(calls) != 1 else ''} wait for a decision:")
    for call in calls:
        out.line(_describe(call))
    out.line(f"answer with: trio-agent resume {path} --approve ID --deny ID [--reason TEXT]")


def _decisions(args: argparse.Namespace) -> dict[str, CallDecision]:
    both = sorted(set(args.approve) & set(args.deny))
    if both:
        raise ValueError(f"approved and denied at once: {', '.join(both)}")
    decisions: dict[str, CallDecision] = {cid: Approve() for cid in args.approve}
    decisions.update({cid: Deny(args.reason) for cid in args.deny})
    return decisions


async def _resume(
    args: argparse.Namespace, loaded: LoadedTranscript, decisions: dict[str, CallDecision]
) -> int:
    model = make_model(args)
    out = Output(sys.stdout)
    view = LiveView(out, live=False, color=False, errors=Output(sys.stderr))
    failed = False

    async with JsonlTranscript(args.transcript) as transcript, model:

        async def show(event: ev.AgentEvent) -> None:
            nonlocal failed
            await transcript.write_event(event)
            view.show(event)
            if event.type == "agent_end" and event.reason == "error":
                failed = True

        result = await resume(
            loaded,
            decisions,
            model=model,
            tools=workspace(args.folder, allow_bash=not args.no_bash),
            system_prompt=args.system or "",
            config=LoopConfig(),
            on_event=show,
        )
    if result.reason == "deferred":
        _listing(out, result.deferred, args.transcript)
    out.line(f"transcript: {args.transcript}")
    return 1 if failed else 0


def run(args: argparse.Namespace) -> int:
    """Run ``trio-agent resume`` with the parsed ``args``; returns the exit code (see the
    module's docstring). Blocks until the resumed run ends."""
    replace_unprintable(sys.stdout)
    path: Path = args.transcript
    try:
        loaded = load_transcript(path)
        waiting = loaded.waiting
    except FileNotFoundError:
        _complain(f"no transcript at {path}")
        return 2
    except (OSError, TranscriptFormatError) as exc:
        _complain(f"cannot read {path}: {exc}")
        return 1
    if not waiting:
        _complain(f"nothing to resume: no call waits for a decision in {path}")
        return 2
    try:
        decisions = _decisions(args)
    except ValueError as exc:
        _complain(str(exc))
        return 2
    found = open_deferral(loaded.messages, loaded.markers)
    assert found is not None  # something waits
    undecided = [c for c in found.deferral.calls if c.id not in found.recorded]
    if not decisions and undecided:
        _listing(Output(sys.stdout), undecided, path)
        return 0
    # (No decision and none undecided: a resume that a crash stopped decided them all.)
    try:
        plan_for(loaded, decisions)  # every problem with the decisions, before anything
    except (AgentUsageError, TypeError) as exc:
        _complain(str(exc))
        return 2
    if args.model is None:
        _complain(
            "--model is needed to go on with the run (the API at "
            f"{DEFAULT_URLS[args.provider]} unless --base-url)"
        )
        return 2
    if not os.path.isdir(args.folder):
        _complain(f"no such folder: {args.folder}")
        return 2
    args.folder = os.path.abspath(args.folder)
    try:
        make_model(args)  # a missing key is a usage error before anything runs
    except ValueError as exc:
        _complain(str(exc))
        return 2
    try:
        return trio.run(partial(_resume, args, loaded, decisions))
    except Exception as exc:
        first = first_error(exc)
        if isinstance(first, AgentUsageError):  # the file is held by another writer
            _complain(str(first))
            return 2
        if isinstance(first, OSError | TranscriptFormatError):
            _complain(f"cannot write the transcript {path}: {first}")
        else:
            _complain(f"the run stopped: {type(first).__name__}: {first}")
        return 1
