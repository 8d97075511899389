"""``trio-agent replay FILE``: re-run a recorded session offline and say whether it
still goes the same way.

The cassette (written by ``trio-agent chat --record FILE``) stands in for the model; the
workspace tools run for real on ``--folder``. The user's messages are read back from the
recorded requests, every request is matched strictly against the recorded one, and the
first that differs is printed with its differing fields.

A cassette is data from whoever wrote it, and the tool calls in it are run: each
``bash`` call waits for a ``y`` typed at the terminal, as in ``chat``, unless ``--yes``;
``--no-bash`` refuses them all without asking, and so does a stdin that is not a
terminal without ``--yes`` (each refusal is shown). A refused call's result is not the
recorded one, so the replay then diverges at the next request. ``write`` and ``edit``
run without asking: like every workspace tool, they cannot reach outside ``--folder``.

A session that had tools replay cannot run (those of MCP servers, given to ``chat`` with
``--mcp`` / ``--mcp-url``) is refused before anything runs. A torn last record (a crash
or a full disk while recording) is reported, and the records before it are replayed.

Exit codes: 0 every request matched the cassette; 1 the replay diverged, or the cassette
cannot be read or replayed; 2 bad usage.
"""

from __future__ import annotations

import math
import os
import sys
from functools import partial
from typing import TYPE_CHECKING, Literal

import trio

from .._core import BeforeToolCallContext, BeforeToolCallResult
from ..replay import CassetteFormatError, load_cassette, replay_session
from ..tools import workspace
from ._chat_session import approval_hook, read_stdin
from ._common import replace_unprintable
from ._render import LiveView, Output, describe_call, wants_color
from .check import load_or_complain, torn_notice

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

    from .._core import Tool
    from ..replay import Cassette, SessionReplay

__all__ = ["add_arguments", "run"]

CONFIRMED = ("bash",)
"""The workspace tools whose recorded calls wait for the user's ``y``."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Re-run a session recorded with 'trio-agent chat --record FILE', offline: the "
        "recorded replies stand in for the model, the workspace tools run for real on "
        "--folder. Every request is compared with the recorded one; the first that "
        "differs is printed, field by field."
    )
    parser.epilog = (
        "The tools given to the model are the workspace tools the recorded session had; "
        "a session that also had MCP tools (chat --mcp) cannot be replayed and is refused "
        "at once. A cassette comes from whoever wrote it: each bash call it makes is "
        "shown and waits for 'y' unless --yes; with --no-bash, or when stdin is not a "
        "terminal and --yes is not given, bash calls are refused (and the replay then "
        "diverges). Defaults: --folder ., --timing none, ask before each bash call. "
        "Exit codes: 0 the replay went exactly as recorded, 1 it diverged (or the "
        "cassette cannot be read or replayed), 2 bad usage."
    )
    parser.add_argument("file", metavar="FILE", help="a cassette (JSON lines)")
    parser.add_argument(
        "--folder", default=".", metavar="DIR", help="the tools' workspace (default: .)"
    )
    parser.add_argument(
        "--timing",
        choices=("none", "clock"),
        default="none",
        help="none: as fast as possible (default); clock: at the recorded pace",
    )
    bash = parser.add_mutually_exclusive_group()
    bash.add_argument(
        "--yes", action="store_true", help="run the cassette's bash calls without asking"
    )
    bash.add_argument(
        "--no-bash", action="store_true", help="refuse every bash call, without asking"
    )


def _recorded_tools(cassette: Cassette) -> list[str]:
    """The names of the tools the recorded session gave the model, in order."""
    names: dict[str, None] = {}
    for record in cassette.records:
        names.update((t.name, None) for t in record.request.tools)
    return list(names)


def _refuse_bash(view: LiveView) -> Callable[[BeforeToolCallContext], BeforeToolCallResult | None]:
    def before(ctx: BeforeToolCallContext) -> BeforeToolCallResult | None:
        name = ctx.tool_call.name
        if name not in CONFIRMED:
            return None
        view.line(view.s.red(f"  refused (--no-bash): {describe_call(name, ctx.args)}"))
        return BeforeToolCallResult(block=True, reason=f"{name} is off in this replay (--no-bash)")

    return before


async def _replay(
    cassette: Cassette, tools: Sequence[Tool], view: LiveView, args: argparse.Namespace
) -> SessionReplay:
    timing: Literal["clock", "none"] = "clock" if args.timing == "clock" else "none"
    replay = partial(replay_session, cassette, tools, timing=timing, on_event=view.show)
    if args.yes or not any(t.name in CONFIRMED for t in tools):
        return await replay()
    if args.no_bash:
        return await replay(before_tool_call=_refuse_bash(view))
    can_ask = sys.stdin.isatty()
    hook, answer = approval_hook(view, CONFIRMED, can_ask=can_ask, command="trio-agent replay")
    if not can_ask:
        return await replay(before_tool_call=hook)
    send, lines = trio.open_memory_channel[str](math.inf)

    async def answers() -> None:
        # Lines typed while no question waits are not answers: they are dropped.
        async for line in lines:
            answer(line)
        answer(None)  # end of input (Ctrl-D): no more bash calls run

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_stdin, send)
        nursery.start_soon(answers)
        report = await replay(before_tool_call=hook)
        nursery.cancel_scope.cancel()
    return report


def run(args: argparse.Namespace) -> int:
    replace_unprintable(sys.stdout)
    file: str = args.file
    if not os.path.isdir(args.folder):
        print(f"trio-agent replay: no such folder: {args.folder}", file=sys.stderr)
        return 2
    cassette = load_or_complain(load_cassette, file, CassetteFormatError)
    if cassette is None:
        return 1
    folder = os.path.abspath(args.folder)
    by_name = {t.name: t for t in workspace(folder)}
    names = _recorded_tools(cassette)
    foreign = [n for n in names if n not in by_name]
    if foreign:
        print(
            f"trio-agent replay: {file}: cannot be replayed: the session had tools that are "
            f"not workspace tools ({', '.join(foreign)}) — an MCP server's, given to chat "
            "with --mcp or --mcp-url — and replay runs the workspace tools only",
            file=sys.stderr,
        )
        return 1
    if cassette.torn_line is not None:
        print(torn_notice(file, cassette.torn_line, cassette.torn_reason))
    output = Output(sys.stdout)
    live = sys.stdout.isatty()
    view = LiveView(output, live=live, color=live and wants_color(sys.stdout))
    tools = [by_name[n] for n in names]
    report = trio.run(partial(_replay, cassette, tools, view, args))
    if report.divergence is not None:
        view.line(f"{file}: diverged: {report.divergence}")
        return 1
    view.line(f"{file}: {report.requests} requests replayed, identical")
    return 0
