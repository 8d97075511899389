"""The overhead ratios counted in instructions: ``trio-agent bench --instructions``.

Wall-clock ratios on a shared machine move by ±0.2× between runs; the number of machine
instructions a workload executes does not. This module counts them with valgrind's
callgrind tool and prints, ours ÷ the floor, each against its target:

- **W1 per turn** (≤ 1.75×): T one-call turns (200 by default) through
  ``run_agent_loop`` with no event consumer, against the bare loop (stream a reply, run
  its calls in a nursery);
- **W3 per run** (≤ 2×): R runs at once (1,000 by default), one 10 ms tool call each,
  against R bare loops in one nursery;
- **the Agent, no subscriber** (≤ 1.1×): ``Agent.prompt`` on the W1 script, against
  ``run_agent_loop``;
- **the Agent, one subscriber** (≤ 1.15×): the same with one subscriber reading every
  event, against the events floor (the bare loop handing as many events to a consumer
  task through a buffer-0 channel).

The workloads and floors are the ``Case`` s of ``bench_turns`` and ``bench_runs``, the
very functions ``trio-agent bench`` times, so both measures always measure the same code.

Theory of operation: every count is one fresh interpreter under
``valgrind --tool=callgrind --callgrind-out-file=/dev/null``, which prints the
instructions the whole process executed (``Collected``). To count only the workload, each
contender's process does the preamble of its workload — import the workload modules, run
each of the workload's selected contenders once at its smallest size (lazy imports,
caches, the interpreter's specialisation), prepare every input, ``gc.collect()`` and
``gc.freeze()`` as the wall-clock harness does — then runs its contender ``repeats``
times (``gc.collect()`` before each, each a whole ``trio.run``), and leaves through
``os._exit`` (no interpreter teardown). One more process per workload does the same
preamble and zero repeats; its count is subtracted from the others'. (One preamble for
both workloads would put W3's warm-up, which sleeps on the real clock, into W1's counts.)
What is left is the repeats alone: the cost per unit is
(count − zero-repeat count) ÷ (repeats × size). Each repeat is a whole ``trio.run``, so a
run's fixed costs (the event loop's start, the run's set-up and result, the final text
turn) are spread over its turns, as in the wall-clock figures. A function that is a side
of two ratios (``run_agent_loop``: ours in W1, the floor of the Agent row) is counted once.

The counts are repeatable: every process runs with ``PYTHONHASHSEED=0`` (string hashes,
hence set and dict order, fixed) and seeds trio's scheduler (``trio._core._run._r``, the
random source that orders each batch of runnable tasks) before its first ``trio.run``, so
two runs of the same code agree to about a thousand instructions in 1.6 G (W1). W3's
tools sleep 10 ms on the real clock, so how many scheduler passes wait for them depends a
little on timing: a few hundred thousand instructions per process, within 0.06% of its
counts.

Most of each process's time under valgrind is the interpreter's start-up and imports
(about 1.6 G instructions, 20 s of CPU here), which every process pays and the
subtraction removes: a whole count (nine processes, two at a time) takes about three
minutes on an idle 2-CPU machine, whatever the sizes.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trio_agent._bench._cli import positive, write_json

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["RATIOS", "Count", "Ratio", "Report", "count_instructions", "main"]

TURNS = 200
RUNS = 1_000
QUICK_TURNS = 20
QUICK_RUNS = 100


@dataclass(frozen=True)
class Ratio:
    """One ratio: the ``ours`` and ``floor`` sides of one workload case.

    Attributes:
        key: a short name (``"W1"``, ``"agent"``...), used in the JSON.
        title: how the table names it.
        workload: ``"W1"`` (sized by turns) or ``"W3"`` (sized by runs).
        module / case: the workload module and the key of its ``Case``: its ``ours``
            and ``floor`` are the two sides.
        target: the ratio not to exceed.
    """

    key: str
    title: str
    workload: str
    module: str
    case: str
    target: float


_MODULE = "trio_agent._bench.instructions"
_COMMAND = "trio-agent bench --instructions"
_TURNS_MODULE = "trio_agent._bench.bench_turns"
_RUNS_MODULE = "trio_agent._bench.bench_runs"

RATIOS = (
    Ratio(
        "W1",
        "W1 per turn: run_agent_loop ÷ the bare floor",
        "W1",
        _TURNS_MODULE,
        "W1:no consumer",
        1.75,
    ),
    Ratio(
        "W3",
        "W3 per run: R runs at once ÷ R bare loops",
        "W3",
        _RUNS_MODULE,
        "W3:many runs",
        2.0,
    ),
    Ratio(
        "agent",
        "the Agent, no subscriber ÷ run_agent_loop (per turn)",
        "W1",
        _TURNS_MODULE,
        "W1:via the Agent vs run_agent_loop",
        1.1,
    ),
    Ratio(
        "subscriber",
        "the Agent, one subscriber ÷ the events floor (per turn)",
        "W1",
        _TURNS_MODULE,
        "W1:via the Agent, one subscriber, vs events floor",
        1.15,
    ),
)
"""Every ratio the mode prints, in order."""

_UNIT = {"W1": "turn", "W3": "run"}


# --- the counted process ---------------------------------------------------------------


@dataclass(frozen=True)
class _Contender:
    """One function counted: a side (``"ours"`` / ``"floor"``) of a case."""

    workload: str
    module: str
    case: str
    side: str

    @property
    def label(self) -> str:
        return f"{self.case} {self.side}"


def _case(module_name: str, key: str) -> Any:
    import importlib

    module = importlib.import_module(module_name)
    cases = {case.key: case for case in module.CASES}
    if key not in cases:
        raise LookupError(f"{module_name} has no case {key!r} (it has {', '.join(cases)})")
    return cases[key]


def _child(spec: dict[str, Any]) -> None:
    """The process valgrind counts: the shared preamble, then ``repeats`` repeats of one
    contender; leaves through ``os._exit`` so that no teardown is counted."""
    import trio

    # The random source trio orders each batch of runnable tasks with: seeded, every
    # process schedules the same tasks in the same order.
    trio._core._run._r.seed(0)
    sizes: dict[str, int] = spec["sizes"]
    contenders = [_Contender(**c) for c in spec["contenders"]]
    functions: list[tuple[Callable[[int, Any], Any], int, Any]] = []
    for contender in contenders:
        case = _case(contender.module, contender.case)
        function = getattr(case, contender.side)
        warm = case.quick_sizes[0]
        function(warm, case.prepare(warm))
        size = sizes[contender.workload]
        functions.append((function, size, case.prepare(size)))
    function, size, inputs = functions[spec["measure"]]
    gc.collect()
    gc.freeze()
    for _ in range(spec["repeats"]):
        gc.collect()
        function(size, inputs)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# --- counting ----------------------------------------------------------------------------


class CountError(RuntimeError):
    """A counted process failed, or valgrind printed no count."""


_COLLECTED = re.compile(r"^==\d+== Collected : (\d+)\s*$", re.MULTILINE)


def _env() -> dict[str, str]:
    from trio_agent._bench._harness import child_env

    # String hashes, hence the order of sets and dicts, the same in every process.
    return {**child_env(), "PYTHONHASHSEED": "0"}


def _count_process(valgrind: str, spec: dict[str, Any]) -> int:
    command = [
        valgrind,
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        "-m",
        _MODULE,
        "--child",
        json.dumps(spec, sort_keys=True),
    ]
    done = subprocess.run(command, env=_env(), capture_output=True, text=True, check=False)
    found = _COLLECTED.findall(done.stderr)
    if done.returncode != 0 or not found:
        tail = "\n".join(done.stderr.strip().splitlines()[-30:])
        raise CountError(
            f"the counted process exited with {done.returncode}"
            f"{'' if found else ' and printed no count'}:\n{tail}"
        )
    return int(found[-1])


@dataclass(frozen=True)
class Count:
    """Instructions of one contender's repeats.

    Attributes:
        label: the case and side (``"W1:no consumer ours"``).
        workload / size / repeats: what ran.
        total: instructions of its process.
        baseline: instructions of the zero-repeat process.
    """

    label: str
    workload: str
    size: int
    repeats: int
    total: int
    baseline: int

    @property
    def counted(self) -> int:
        """Instructions of the repeats alone."""
        return self.total - self.baseline

    @property
    def per_unit(self) -> float:
        """Instructions per turn (W1) or per run (W3)."""
        return self.counted / (self.repeats * self.size)


@dataclass
class Report:
    """The counts and the ratios made of them."""

    ratios: list[Ratio]
    counts: dict[str, Count]
    meta: dict[str, Any] = field(default_factory=dict)

    def sides(self, ratio: Ratio) -> tuple[Count, Count]:
        return self.counts[f"{ratio.case} ours"], self.counts[f"{ratio.case} floor"]

    def value(self, ratio: Ratio) -> float:
        ours, floor = self.sides(ratio)
        return ours.per_unit / floor.per_unit

    def text(self) -> str:
        from trio_agent._bench._harness import _render

        meta = self.meta
        head = (
            f"trio-agent instructions — {meta.get('date', '')}, commit "
            f"{meta.get('commit') or 'unknown'}, Python {meta.get('python', '')}, "
            f"trio {meta.get('trio', '')}, {meta.get('valgrind', 'valgrind')}"
        )
        how = (
            f"T = {meta['turns']:,} turns, R = {meta['runs']:,} runs, {meta['repeats']} "
            f"repeat(s) each; instructions of the repeats (callgrind, PYTHONHASHSEED=0, "
            f"trio's scheduler seeded) minus a process with zero repeats"
        )
        body = []
        for ratio in self.ratios:
            ours, floor = self.sides(ratio)
            value = self.value(ratio)
            unit = _UNIT[ratio.workload]
            body.append(
                [
                    ratio.title,
                    f"{_kilo(ours.per_unit)} / {unit}",
                    f"{_kilo(floor.per_unit)} / {unit}",
                    f"{value:.3f}×",
                    f"≤ {ratio.target:g}×",
                    "met" if value <= ratio.target else "NOT MET",
                ]
            )
        table = _render(["measure", "ours", "floor", "ratio", "target", ""], body, right={1, 2, 3})
        raw = _render(
            ["contender", "size", "repeats", "instructions counted", "per unit"],
            [
                [
                    c.label,
                    f"{'T' if c.workload == 'W1' else 'R'}={c.size:,}",
                    str(c.repeats),
                    f"{c.counted:,}",
                    f"{c.per_unit:,.0f}",
                ]
                for c in self.counts.values()
            ],
            right={2, 3, 4},
        )
        baselines = {c.workload: c.baseline for c in self.counts.values()}
        zero = ", ".join(f"{w} {n:,}" for w, n in baselines.items())
        return "\n".join(
            [
                head,
                how,
                "",
                table,
                "",
                f"Raw counts (the zero-repeat processes: {zero} instructions):",
                "",
                raw,
            ]
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "meta": self.meta,
            "ratios": {
                r.key: {
                    "title": r.title,
                    "case": r.case,
                    "ratio": self.value(r),
                    "target": r.target,
                    "ours_per_unit": self.sides(r)[0].per_unit,
                    "floor_per_unit": self.sides(r)[1].per_unit,
                    "unit": _UNIT[r.workload],
                }
                for r in self.ratios
            },
            "counts": {
                label: {
                    "workload": c.workload,
                    "size": c.size,
                    "repeats": c.repeats,
                    "total": c.total,
                    "baseline": c.baseline,
                    "counted": c.counted,
                    "per_unit": c.per_unit,
                }
                for label, c in self.counts.items()
            },
        }


def _kilo(value: float) -> str:
    return f"{value / 1000:,.1f} k"


def _plan(ratios: Sequence[Ratio]) -> tuple[list[_Contender], dict[str, str]]:
    """The distinct functions to count, and each side's label → the label it is counted
    under: one function can be a side of two cases (``run_agent_loop`` is the W1 row's
    ``ours`` and the Agent row's ``floor``), and is counted once."""
    contenders: list[_Contender] = []
    counted_as: dict[tuple[str, str], str] = {}
    aliases: dict[str, str] = {}
    for ratio in ratios:
        case = _case(ratio.module, ratio.case)
        for side in ("ours", "floor"):
            function = getattr(case, side)
            key = (function.__module__, function.__qualname__)
            if key not in counted_as:
                contender = _Contender(ratio.workload, ratio.module, ratio.case, side)
                contenders.append(contender)
                counted_as[key] = contender.label
            aliases[f"{ratio.case} {side}"] = counted_as[key]
    return contenders, aliases


def _processes(
    contenders: Sequence[_Contender], sizes: dict[str, int], repeats: int
) -> tuple[list[dict[str, Any]], list[str], list[_Contender | None]]:
    """The processes to count: per workload, its zero-repeat process then one per contender.

    Returns:
        Each process's spec (what ``--child`` reads), its name for the progress lines,
        and what it counts (None for a zero-repeat process).
    """
    # One preamble per workload: W3's warm-up sleeps on the real clock, so it would add
    # a timing-dependent few hundred thousand instructions to W1's exact counts.
    specs: list[dict[str, Any]] = []
    names: list[str] = []
    # Per process, what it counts: None for a workload's zero-repeat process.
    measured: list[_Contender | None] = []
    for workload in dict.fromkeys(c.workload for c in contenders):
        group = [c for c in contenders if c.workload == workload]
        base = {"sizes": sizes, "contenders": [c.__dict__ for c in group]}
        # The zero-repeat process names the first contender, so that its command line
        # is the others' but for the digits of "measure" and "repeats".
        specs.append({**base, "measure": 0, "repeats": 0})
        names.append(f"{workload}'s zero-repeat process")
        measured.append(None)
        specs += [{**base, "measure": i, "repeats": repeats} for i in range(len(group))]
        names += [c.label for c in group]
        measured += group
    return specs, names, measured


def count_instructions(
    ratios: Sequence[Ratio] = RATIOS,
    *,
    turns: int = TURNS,
    runs: int = RUNS,
    repeats: int = 1,
    jobs: int = 2,
    valgrind: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Count the instructions of every side of ``ratios``; blocks until done.

    Runs one valgrind process per distinct contender plus one zero-repeat process per
    workload, ``jobs`` at a time.

    Raises:
        FileNotFoundError: valgrind is not installed (or not at ``valgrind``).
        CountError: a counted process failed (its stderr's tail is in the message).
        ValueError: a size or count below 1.
    """
    if min(turns, runs, repeats, jobs) < 1:
        raise ValueError("turns, runs, repeats and jobs must each be at least 1")
    tool = valgrind or shutil.which("valgrind")
    if tool is None or not os.path.exists(tool):
        raise FileNotFoundError(
            "valgrind is not installed (the instruction counts need it: apt-get install "
            "valgrind, or your system's package)"
        )
    contenders, aliases = _plan(ratios)
    sizes = {"W1": turns, "W3": runs}
    specs, names, measured = _processes(contenders, sizes, repeats)
    totals = [0] * len(specs)
    say = progress or (lambda line: None)
    say(f"counting {len(specs)} processes under callgrind, {jobs} at a time")
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(_count_process, tool, spec): i for i, spec in enumerate(specs)}
        for done, future in enumerate(as_completed(futures), start=1):
            index = futures[future]
            if future.exception() is not None:
                # A failed process fails the count: the processes not started yet never
                # start; those running are waited for.
                pool.shutdown(cancel_futures=True)
            totals[index] = future.result()
            say(
                f"[{done}/{len(specs)}] {names[index]}: {totals[index]:,} instructions "
                f"({time.monotonic() - started:.0f} s)"
            )
    counted: dict[str, Count] = {}
    baseline = 0
    # Each workload's zero-repeat process comes before its contenders' processes.
    for c, total in zip(measured, totals, strict=True):
        if c is None:
            baseline = total
        else:
            counted[c.label] = Count(
                c.label, c.workload, sizes[c.workload], repeats, total, baseline
            )
    counts = {label: counted[alias] for label, alias in aliases.items()}
    return Report(ratios=list(ratios), counts=counts)


# --- the command line ----------------------------------------------------------------------


def _meta(valgrind: str | None, turns: int, runs: int, repeats: int) -> dict[str, Any]:
    import platform

    import trio

    from trio_agent._bench.suite import _commit

    version = None
    if valgrind is not None:
        try:
            version = subprocess.run(
                [valgrind, "--version"], capture_output=True, text=True, check=False, timeout=30
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            version = None
    return {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "commit": _commit(),
        "python": platform.python_version(),
        "trio": trio.__version__,
        "valgrind": version,
        "turns": turns,
        "runs": runs,
        "repeats": repeats,
    }


def select(only: Sequence[str] | None) -> list[Ratio]:
    """The ratios of the workloads named (``W1``, ``W3``; any case), or all of them.

    Raises:
        ValueError: a name that is not W1 or W3.
    """
    if not only:
        return list(RATIOS)
    wanted = {name.upper() for name in only}
    unknown = wanted - set(_UNIT)
    if unknown:
        raise ValueError(
            f"unknown workload {', '.join(sorted(unknown))}: the instruction counts cover "
            f"{' and '.join(_UNIT)}"
        )
    return [r for r in RATIOS if r.workload in wanted]


def run(
    *,
    only: Sequence[str] | None = None,
    quick: bool = False,
    turns: int | None = None,
    runs: int | None = None,
    repeats: int | None = None,
    jobs: int = 2,
    json_out: str | None = None,
    quiet: bool = False,
) -> int:
    """Count, print the table, write the JSON if asked; the exit code.

    0: counted; 1: a counted process failed or the JSON could not be written; 2: bad
    usage or no valgrind. ``trio-agent bench --instructions`` calls this with its own
    ``--only``, ``--quick``, ``--repeats``, ``--json`` and ``--quiet``.
    """

    def say(line: str) -> None:
        if not quiet:
            print(line, file=sys.stderr, flush=True)

    turns = turns if turns is not None else (QUICK_TURNS if quick else TURNS)
    runs = runs if runs is not None else (QUICK_RUNS if quick else RUNS)
    repeats = repeats if repeats is not None else 1
    started = time.monotonic()
    try:
        ratios = select(only)
        report = count_instructions(
            ratios, turns=turns, runs=runs, repeats=repeats, jobs=jobs, progress=say
        )
    except (ValueError, FileNotFoundError) as exc:
        print(f"{_COMMAND}: {exc}", file=sys.stderr)
        return 2
    except CountError as exc:
        print(f"{_COMMAND}: {exc}", file=sys.stderr)
        return 1
    report.meta = _meta(shutil.which("valgrind"), turns, runs, repeats)
    report.meta["seconds"] = round(time.monotonic() - started, 1)
    print(report.text())
    say(f"took {report.meta['seconds']:.0f} s")
    if json_out and not write_json(json_out, report.to_json(), _COMMAND):
        return 1
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m trio_agent._bench.instructions",
        description=(
            "Count the instructions (valgrind callgrind) of the W1 and W3 workloads and "
            "the Agent rows, and print ours ÷ the floor for each."
        ),
        epilog=(
            "Exit codes: 0 counted, 1 a counted process failed or the JSON could not be "
            "written, 2 bad usage or valgrind missing."
        ),
    )
    p.add_argument(
        "--only", action="append", metavar="WORKLOAD", help="W1 or W3 (repeatable); default both"
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"small sizes: T = {QUICK_TURNS}, R = {QUICK_RUNS} (unless given)",
    )
    p.add_argument("--turns", type=positive, help=f"W1 turns (default {TURNS})")
    p.add_argument("--runs", type=positive, help=f"W3 runs (default {RUNS:,})")
    p.add_argument(
        "--repeats", type=positive, help="times each workload runs in the count (default 1)"
    )
    p.add_argument(
        "--jobs", type=positive, default=2, help="valgrind processes at a time (default 2)"
    )
    p.add_argument("--json", metavar="OUT", help="also write the figures as JSON to OUT")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--child", help=argparse.SUPPRESS)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.child is not None:
        _child(json.loads(args.child))
    return run(
        only=args.only,
        quick=args.quick,
        turns=args.turns,
        runs=args.runs,
        repeats=args.repeats,
        jobs=args.jobs,
        json_out=args.json,
        quiet=args.quiet,
    )


if __name__ == "__main__":
    sys.exit(main())
