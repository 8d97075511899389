"""``trio-agent bench``: run the benchmark suite against a bare trio floor.

The workloads and their floors ship inside the package (``trio_agent._bench``), so an
installed wheel needs no checkout. The peer comparisons (``benchmarks/peer_*.py``) live
in the source checkout only: run from its root (or from an editable install of it), the
command puts the checkout on ``sys.path`` so the peers that are installed run too.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._bench import positive

if TYPE_CHECKING:
    import argparse

# Keep in step with trio_agent/_bench/suite.py: the parser is built for every trio-agent
# command, so it must not import the suite (slow).
WORKLOADS = ("W1", "W2", "W3", "W4", "W5", "transcript", "context")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "Defaults: every workload at every size, 7 interleaved repeats (2 with --quick), "
        "W2 and W3 with every repeat in a fresh process (ours and the floor alternating), "
        "peak RSS measured in subprocesses, the installed peers compared when run from a "
        "source checkout, progress on stderr. Exit codes: 0 the suite ran, 1 the JSON "
        "could not be written or a measurement failed, 2 bad usage (an unknown workload) "
        "or, with --instructions, valgrind missing."
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="WORKLOAD",
        help=f"run only this workload (repeatable): {', '.join(WORKLOADS)}",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: smallest size of each workload, few repeats, no peers",
    )
    parser.add_argument(
        "--repeats",
        type=positive,
        help="repeats per size, medians shown (default 7, quick 2); for W2 and W3 the "
        "number of fresh processes per contender",
    )
    parser.add_argument("--json", metavar="OUT", help="also write the results as JSON to OUT")
    parser.add_argument(
        "--html",
        metavar="OUT",
        help="also write the results as a self-contained HTML page of charts to OUT: per "
        "workload and size, ours and the peers as ratios to the bare trio floor",
    )
    parser.add_argument(
        "--no-peers", action="store_true", help="skip the peers even when they are installed"
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-RSS subprocesses")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="measure W2 and W3 in this process like the other workloads (warmed up, heap "
        "frozen): lower figures than a fresh process sees, for comparison",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions under valgrind's callgrind instead of timing (a fresh "
        "process per contender, trio's scheduler seeded, imports subtracted by a process "
        "that runs nothing): W1 per turn, W3 per run and the Agent without and with one "
        "subscriber, ours ÷ the floor against each target. W1 at T = 200 (quick 20), W3 "
        "at R = 1,000 (quick 100), --repeats 1 by default; needs valgrind",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def find_checkout() -> Path | None:
    """The source checkout whose ``benchmarks/`` holds the peers: the current folder,
    or the one this package was installed from in editable mode; None outside one."""
    for folder in (Path.cwd(), Path(__file__).resolve().parents[3]):
        if (folder / "benchmarks" / "peer_langgraph.py").is_file():
            return folder
    return None


def run(args: argparse.Namespace) -> int:
    if args.instructions:
        if args.html:
            print("trio-agent bench: --html does not apply to --instructions", file=sys.stderr)
            return 2
        if args.in_process:
            print(
                "trio-agent bench: --in-process does not apply to --instructions", file=sys.stderr
            )
            return 2
        from .._bench.instructions import run as count

        return count(
            only=args.only,
            quick=args.quick,
            repeats=args.repeats,
            json_out=args.json,
            quiet=args.quiet,
        )
    checkout = find_checkout()
    if checkout is not None and str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))
    from .._bench import main

    code: int = main(args, also=partial(write_html, args.html) if args.html else None)
    return code


def write_html(path: str, results: dict[str, Any]) -> bool:
    """Write the page of ``results`` (the JSON ``--json`` writes) to ``path`` and say so;
    False (the reason on stderr) when it could not be written."""
    from ..report import bench_report

    try:
        Path(path).write_text(bench_report(results), encoding="utf-8")
    except OSError as exc:
        print(f"trio-agent bench: cannot write {path}: {exc}", file=sys.stderr)
        return False
    print(f"HTML written to {path}")
    return True
