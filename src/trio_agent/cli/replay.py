"""``trio-agent replay FILE``: re-run a recorded session offline and say whether it
still goes the same way.

The cassette (written by ``trio-agent chat --record FILE``) stands in for the model; the
workspace tools run for real on ``--folder``. The user's messages are read back from the
recorded requests, every request is matched strictly against the recorded one, and the
first that differs is printed with its differing fields.

Exit codes: 0 every request matched the cassette; 1 the replay diverged, or the cassette
cannot be read; 2 bad usage.
"""

from __future__ import annotations

import os
import sys
from functools import partial
from typing import TYPE_CHECKING

import trio

from ..replay import CassetteFormatError, load_cassette, replay_session
from ..tools import workspace
from ._common import replace_unprintable
from ._render import LiveView, Output, wants_color
from .check import load_or_complain

if TYPE_CHECKING:
    import argparse

    from ..replay import Cassette, SessionReplay

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Re-run a session recorded with 'trio-agent chat --record FILE', offline: the "
        "recorded replies stand in for the model, the workspace tools run for real on "
        "--folder. Every request is compared with the recorded one; the first that "
        "differs is printed, field by field."
    )
    parser.epilog = (
        "The tools given to the model are the workspace tools the recorded session had. "
        "Defaults: --folder ., --timing none. Exit codes: 0 the replay went exactly as "
        "recorded, 1 it diverged (or the cassette cannot be read), 2 bad usage."
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


async def _replay(cassette: Cassette, folder: str, view: LiveView, timing: str) -> SessionReplay:
    names = [t.name for t in cassette.records[0].request.tools] if cassette.records else []
    by_name = {t.name: t for t in workspace(folder)}
    tools = [by_name[n] for n in names if n in by_name]
    return await replay_session(
        cassette,
        tools,
        timing="clock" if timing == "clock" else "none",
        on_event=view.show,
    )


def run(args: argparse.Namespace) -> int:
    replace_unprintable(sys.stdout)
    file: str = args.file
    if not os.path.isdir(args.folder):
        print(f"trio-agent replay: no such folder: {args.folder}", file=sys.stderr)
        return 2
    cassette = load_or_complain(load_cassette, file, CassetteFormatError)
    if cassette is None:
        return 1
    output = Output(sys.stdout)
    live = sys.stdout.isatty()
    view = LiveView(output, live=live, color=live and wants_color(sys.stdout))
    folder = os.path.abspath(args.folder)
    report = trio.run(partial(_replay, cassette, folder, view, args.timing))
    if report.divergence is not None:
        view.line(f"{file}: diverged: {report.divergence}")
        return 1
    view.line(f"{file}: {report.requests} requests replayed, identical")
    return 0
