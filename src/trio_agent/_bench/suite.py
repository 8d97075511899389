"""The suite: which workloads exist, how to run them, and the report.

It ships inside the package (``trio-agent bench`` needs no checkout). Workloads W1–W4
are :class:`~trio_agent._bench._harness.Case` s defined in the ``bench_*`` files next to
their floors. W5 (argument validation) and the transcript benchmark belong to
``bench_validation.py`` and ``bench_transcript.py``; the suite calls their ``run(...)``
when it exists and turns what it returns into rows.

W2 and W3 (sleep-bound, judged in wall time) run every repeat in a fresh interpreter;
the other workloads run in this process (see :mod:`trio_agent._bench._harness`).

Peers (pydantic-ai, the OpenAI Agents SDK, LangGraph) run in a second phase, after every
row of our own: importing them grows the heap every later full garbage collection walks,
so they must not tax the rows measured against the floor. Each peer row measures ours
again, interleaved with the peers (in fresh processes for W2 and W3, in this one for
W1).
"""

from __future__ import annotations

import importlib
import inspect
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio

from trio_agent._bench._cli import write_json
from trio_agent._bench._harness import FRESH, Case, Progress, Row, measure_case, tables

if TYPE_CHECKING:
    import argparse

__all__ = ["WORKLOADS", "Report", "main", "run_suite"]

CASE_MODULES = (
    "trio_agent._bench.bench_turns",
    "trio_agent._bench.bench_batch",
    "trio_agent._bench.bench_runs",
    "trio_agent._bench.bench_stream",
    # Last: it imports OpenTelemetry, whose modules no earlier row should have to walk.
    "trio_agent._bench.bench_telemetry",
)

WORKLOADS = {
    "W1": "turn overhead: T turns of one no-op call",
    "W2": "wide batch: one turn of N calls sleeping 10 ms",
    "W3": "many runs: R runs at once, one 10 ms call each",
    "W4": "streaming: one reply of N text deltas",
    "W5": "argument validation (trio_agent/_bench/bench_validation.py)",
    "transcript": "transcripts on disk (trio_agent/_bench/bench_transcript.py)",
    "context": "context policies: compaction per turn (trio_agent/_bench/bench_context.py)",
}

REPEATS = 7
QUICK_REPEATS = 2
PEER_REPEATS = 3


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        head = (
            f"trio-agent benchmarks — {self.meta.get('date', '')}, commit "
            f"{self.meta.get('commit') or 'unknown'}, Python {self.meta.get('python', '')}, "
            f"trio {self.meta.get('trio', '')}, {self.meta.get('machine', '')}"
        )
        lines = [head, f"medians of {self.meta.get('repeats')} interleaved repeats"]
        start, end = self.meta.get("load_average"), self.meta.get("load_average_end")
        if start and end:
            lines.append(
                f"load average (1 min) {start[0]:.2f} at the start, {end[0]:.2f} at the end,"
                f" on {os.cpu_count()} CPUs"
            )
        if any(r.extra.get("method") == FRESH for r in self.rows):
            lines.append("W2, W3: every repeat in a fresh process (ours and the floor alternating)")
        lines.append("")
        lines.append(tables(self.rows))
        if self.skipped:
            lines.append("")
            lines.extend(f"skipped: {s}" for s in self.skipped)
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "meta": self.meta,
            "rows": [r.to_json() for r in self.rows],
            "skipped": list(self.skipped),
        }


def _cases() -> list[Case]:
    cases: list[Case] = []
    for name in CASE_MODULES:
        cases.extend(importlib.import_module(name).CASES)
    return cases


def _commit() -> str | None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}{'+dirty' if dirty else ''}"


def _meta(repeats: int, quick: bool, in_process: bool) -> dict[str, Any]:
    return {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "commit": _commit(),
        "python": platform.python_version(),
        "trio": trio.__version__,
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        "repeats": repeats,
        "quick": quick,
        "in_process": in_process,
        "load_average": _load_average(),
    }


def _load_average() -> list[float] | None:
    """The machine's load average over 1, 5 and 15 minutes, where the system has one."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def _wanted(only: list[str] | None) -> set[str]:
    if not only:
        return set(WORKLOADS)
    known = {k.lower(): k for k in WORKLOADS}
    out = set()
    for item in only:
        key = known.get(item.lower())
        if key is None:
            raise ValueError(f"unknown workload {item!r}: choose from {', '.join(WORKLOADS)}")
        out.add(key)
    return out


def run_suite(
    *,
    only: list[str] | None = None,
    quick: bool = False,
    repeats: int | None = None,
    peers: bool = True,
    memory: bool = True,
    in_process: bool = False,
    progress: Progress | None = None,
) -> Report:
    """Run the workloads and return the report (rows in the order run).

    W2 and W3 run every repeat in a fresh process unless ``in_process`` is set (then
    like the others: warmed up, heap frozen, all repeats in this process).

    Raises:
        ValueError: an unknown workload name in ``only``.
    """
    wanted = _wanted(only)
    progress = progress or Progress(enabled=False)
    reps = repeats if repeats is not None else (QUICK_REPEATS if quick else REPEATS)
    report = Report(meta=_meta(reps, quick, in_process))
    cases = [c for c in _cases() if c.workload in wanted]
    for case in cases:
        for size in case.quick_sizes if quick else case.sizes:
            report.rows.append(
                measure_case(
                    case,
                    size,
                    repeats=reps,
                    memory=memory,
                    in_process=in_process,
                    progress=progress,
                )
            )
    if "W5" in wanted:
        _external(report, "W5", "trio_agent._bench.bench_validation", quick, reps, progress)
    if "transcript" in wanted:
        _external(report, "transcript", "trio_agent._bench.bench_transcript", quick, reps, progress)
    if "context" in wanted:
        _external(report, "context", "trio_agent._bench.bench_context", quick, 3, progress)
    if peers and not quick:
        _peer_phase(report, cases, reps, memory, in_process, progress)
    elif quick and peers:
        report.skipped.append("peers: not run in --quick mode")
    report.meta["load_average_end"] = _load_average()
    progress.done()
    return report


def _peer_phase(
    report: Report,
    cases: list[Case],
    repeats: int,
    memory: bool,
    in_process: bool,
    progress: Progress,
) -> None:
    from trio_agent._bench._peers import missing_peers, peers_for

    for line in missing_peers():
        report.skipped.append(line)
        progress.line(f"skipped: {line}")
    for case in cases:
        contenders = peers_for(case)
        if not contenders:
            continue
        for size in case.peer_sizes:
            row = measure_case(
                case,
                size,
                repeats=min(repeats, PEER_REPEATS),
                peers=contenders,
                peer_repeats=PEER_REPEATS,
                memory=memory,
                in_process=in_process,
                progress=progress,
            )
            row.extra["phase"] = "peers"
            report.rows.append(row)


# --- workloads written by other files: W5 and the transcript benchmark -----------------


def _external(
    report: Report, tag: str, module_name: str, quick: bool, repeats: int, progress: Progress
) -> None:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        report.skipped.append(f"{tag}: {module_name} does not exist yet")
        return
    run = getattr(module, "run", None)
    if run is None:
        report.skipped.append(
            f"{tag}: {module_name} has no run(); run it alone with python -m {module_name}"
        )
        return
    progress(f"{tag} ({module_name})")
    offered = {"quick": quick, "repeats": repeats, "progress": progress}
    params = inspect.signature(run).parameters
    kwargs = {k: v for k, v in offered.items() if k in params}
    if tag == "W5" and "repeats" in params and quick:
        kwargs["repeats"] = 1
    result = run(**kwargs)
    report.rows.extend(_rows_from(tag, result))


def _rows_from(tag: str, result: Any) -> list[Row]:
    """Rows from what an external ``run`` returned: rows, mappings, or figures."""
    if isinstance(result, Row):
        return [result]
    if isinstance(result, Mapping):
        if any(k.endswith("_per_s") for k in result):
            return _rate_rows(tag, result)
        return [_row_from_mapping(tag, result)]
    if isinstance(result, list | tuple):
        out: list[Row] = []
        for item in result:
            out.extend(_rows_from(tag, item))
        return out
    return [Row(workload=tag, case="", size="", note=str(result))]


def _rate_rows(tag: str, figures: Mapping[str, Any]) -> list[Row]:
    """``{"<case>_per_s": rate, "floor_per_s": rate}`` → one row per case, in seconds."""
    floor = figures.get("floor_per_s")
    rows = []
    for key, rate in figures.items():
        if not key.endswith("_per_s") or key == "floor_per_s" or not rate:
            continue
        name = key[: -len("_per_s")]
        samples = {"ours": [1 / rate]}
        if floor:
            samples["floor"] = [1 / floor]
        rows.append(
            Row(
                workload=tag,
                case=name,
                size="1 call",
                unit="call",
                samples=samples,
                note=f"{rate:,.0f} calls/s",
                extra={"per_s": rate, "floor_per_s": floor},
            )
        )
    return rows


def _row_from_mapping(tag: str, data: Mapping[str, Any]) -> Row:
    samples: dict[str, list[float]] = {}
    for who in ("ours", "floor"):
        value = data.get(who, data.get(f"{who}_s"))
        if isinstance(value, int | float):
            samples[who] = [float(value)]
    known = {"workload", "case", "size", "ours", "ours_s", "floor", "floor_s", "n", "unit"}
    return Row(
        workload=str(data.get("workload", tag)),
        case=str(data.get("case", "")),
        size=str(data.get("size", "")),
        n=int(data.get("n", 1)),
        unit=str(data.get("unit", "")),
        samples=samples,
        note=str(data.get("note", "")),
        extra={k: v for k, v in data.items() if k not in known},
    )


# --- the command line ---------------------------------------------------------------------


def main(args: argparse.Namespace, *, also: Callable[[dict[str, Any]], bool] | None = None) -> int:
    """Run the suite as the command line asked; print the table; exit code.

    ``also``, when given, is called with the results as the JSON holds them (after the
    table is printed and the JSON written); it returns False when it failed (exit 1).
    """
    progress = Progress(enabled=not args.quiet)
    try:
        report = run_suite(
            only=args.only,
            quick=args.quick,
            repeats=args.repeats,
            peers=not args.no_peers,
            memory=not args.no_memory,
            in_process=args.in_process,
            progress=progress,
        )
    except ValueError as exc:
        print(f"trio-agent bench: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        # A fresh process's workload failed its own checks, or could not run.
        print(f"trio-agent bench: {exc}", file=sys.stderr)
        return 1
    print(report.text())
    if args.json and not write_json(args.json, report.to_json(), "trio-agent bench"):
        return 1
    if also is not None and not also(report.to_json()):
        return 1
    return 0
