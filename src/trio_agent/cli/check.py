"""``trio-agent check FILE``: does a JSONL transcript load whole and keep the pairing
invariant? ``--repair OUT`` writes a copy that a run can resume from.

Exit codes: 0 the transcript loads whole and is paired (with ``--repair``: the copy
written is paired); 1 a torn last line, a breach of the invariant, a file that does not
load, or a file that cannot be read or written.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, TypeVar

from .._core import AgentUsageError, TranscriptFormatError, repair, transcript_violations
from .._store import load_transcript, write_transcript

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

T = TypeVar("T")

# transcript_violations names messages by index: ``messages[3]``, ``messages[4..6]``.
_REF = re.compile(r"messages\[(\d+)(?:\.\.(\d+))?\]")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "Defaults: check only, nothing written. Exit codes: 0 the transcript loads whole "
        "and is paired (with --repair: the copy written is paired); 1 a torn last line, a "
        "breach of the pairing, a file that does not load, or one that cannot be read or "
        "written; 2 bad usage."
    )
    parser.add_argument("file", metavar="FILE", help="a JSONL transcript (JsonlTranscript)")
    parser.add_argument(
        "--repair",
        metavar="OUT",
        help="write a repaired copy to OUT: the torn last line dropped, every tool call "
        "without a result given an aborted one (OUT may be FILE: replaced atomically)",
    )


def _line_ref(match: re.Match[str]) -> str:
    first = int(match.group(1)) + 2  # messages[0] is on line 2, after the header
    if match.group(2) is None:
        return f"line {first}"
    return f"lines {first}-{int(match.group(2)) + 2}"


def describe(violation: str, file: str) -> str:
    """One violation as ``FILE:LINE: text``, message indexes turned into line numbers."""
    lead = _REF.match(violation)
    if lead is not None and lead.group(2) is None and violation[lead.end() :].startswith(": "):
        line = int(lead.group(1)) + 2
        rest = violation[lead.end() + 2 :]
    else:
        line = int(lead.group(1)) + 2 if lead is not None else 1
        rest = violation
    return f"{file}:{line}: {_REF.sub(_line_ref, rest)}"


def torn_notice(file: str, line: int, reason: str | None) -> str:
    """How a torn last line, left out when the file was loaded, is reported."""
    return f"{file}:{line}: torn last line dropped (a crash while it was written?): {reason}"


def load_or_complain(
    load: Callable[[str], T], file: str, format_error: type[Exception]
) -> T | None:
    """``load(file)``; on a format error or an unreadable file, say so on stderr and
    return None."""
    try:
        return load(file)
    except format_error as exc:
        print(f"{exc}", file=sys.stderr)
        print(f"{file}: does not load", file=sys.stderr)
    except OSError as exc:
        print(f"{file}: cannot read: {exc.strerror or exc}", file=sys.stderr)
    return None


def run(args: argparse.Namespace) -> int:
    file: str = args.file
    loaded = load_or_complain(load_transcript, file, TranscriptFormatError)
    if loaded is None:
        return 1

    problems = 0
    if loaded.torn_line is not None:
        problems += 1
        print(torn_notice(file, loaded.torn_line, loaded.torn_reason))
    messages = loaded.messages
    try:
        # Calls that wait for a decision (a deferred run): the transcript waits, it is
        # not broken; `trio-agent resume` answers them.
        waiting = loaded.waiting
    except TranscriptFormatError as exc:
        print(f"{file}: {exc}")
        return 1
    if args.repair is not None:
        repaired = repair(messages, waiting=waiting)
        added = len(repaired) - len(messages)
        try:
            # The marker lines stay where they were when nothing was inserted.
            write_transcript(args.repair, repaired, markers=() if added else loaded.markers)
        except OSError as exc:
            print(f"{args.repair}: cannot write: {exc.strerror or exc}", file=sys.stderr)
            return 1
        except AgentUsageError as exc:  # a run still appends to it
            print(f"{args.repair}: cannot write: {exc}", file=sys.stderr)
            return 1
        remaining = transcript_violations(repaired, waiting=waiting if not added else ())
        for v in remaining:
            print(describe(v, args.repair))
        print(
            f"{args.repair}: wrote {len(repaired)} messages ({added} aborted "
            f"result{'s' if added != 1 else ''} added"
            f"{', torn line dropped' if loaded.torn_line is not None else ''})"
            + (f"; {len(remaining)} problem(s) repair cannot fix" if remaining else "; paired")
        )
        return 1 if remaining else 0

    violations = transcript_violations(messages, waiting=waiting)
    for v in violations:
        print(describe(v, file))
    if waiting:
        print(
            f"{file}: {len(waiting)} call(s) wait for a decision "
            f"({', '.join(sorted(waiting))}): answer them with 'trio-agent resume {file}'"
        )
    problems += len(violations)
    status = "ok" if not problems else f"{problems} problem{'s' if problems != 1 else ''}"
    print(f"{file}: {len(messages)} messages, {status}")
    return 0 if not problems else 1
