"""The ``trio-agent`` command.

Exit codes: 0 success; 1 the command ran and found a problem (``check``: a transcript
that does not load or is not paired; ``replay``: a session that diverges from its
cassette); 2 bad usage; 130 interrupted by Ctrl-C.

Each sub-command lives in its own module ``trio_agent.cli.<name>`` with two functions:
``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import TYPE_CHECKING

from ._common import INTERRUPTED

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import ModuleType

__all__ = ["main"]

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("trio_agent.cli.demo", "run an offline scripted session and show it live"),
    "check": ("trio_agent.cli.check", "check (and repair) a JSONL transcript"),
    "bench": ("trio_agent.cli.bench", "run the benchmarks against a bare trio floor"),
    "chat": ("trio_agent.cli.chat", "chat with a real model that uses the workspace tools"),
    "replay": (
        "trio_agent.cli.replay",
        "re-run a recorded chat offline, report divergence",
    ),
    "fleet": ("trio_agent.cli.fleet", "run a JSONL file of tasks to completion, resumably"),
    "report": ("trio_agent.cli.report", "write a self-contained HTML report of transcripts"),
    "resume": (
        "trio_agent.cli.resume",
        "answer the tool calls a run left waiting for approval, and go on",
    ),
}


def _module(name: str) -> ModuleType:
    return importlib.import_module(COMMANDS[name][0])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trio-agent",
        description="A trio-native agent loop runtime.",
        epilog="exit codes: 0 ok, 1 problem found, 2 bad usage, 130 interrupted",
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"trio-agent {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (_, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        _module(name).add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    try:
        # Building the parser imports every sub-command: Ctrl-C may come that early.
        args = build_parser().parse_args(argv)
        code: int = _module(args.command).run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return INTERRUPTED
    except BaseExceptionGroup as group:
        if group.subgroup(KeyboardInterrupt) is not None:
            print("interrupted", file=sys.stderr)
            return INTERRUPTED
        raise
    return code
