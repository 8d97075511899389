"""The report pages: a transcript's, a fleet folder's summary, the benchmarks'."""

from __future__ import annotations

import datetime
import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from .._core import NO_USAGE
from .._store import JsonLines, load_transcript
from ..fleet import TaskResult
from ._html import page
from ._transcript import Prices, transcript_data

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = ["Prices", "bench_report", "fleet_report", "is_fleet_folder", "transcript_report"]


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def transcript_report(
    paths: Iterable[str | os.PathLike[str]],
    *,
    prices: Prices | None = None,
    title: str | None = None,
) -> str:
    """The HTML page of the transcripts at ``paths``, one section each. Blocks (reads
    the files).

    A transcript that does not pass the pairing check is still shown, with the check's
    verdict (every breach) at the top of its section; a torn last line is left out and
    said so.

    Raises:
        TranscriptFormatError: a file is not a transcript (as ``load_transcript``).
        OSError: a file cannot be read.
    """
    sections = []
    names = []
    for path in paths:
        sections.append(transcript_data(path, load_transcript(path), prices))
        names.append(Path(path).name)
    data: dict[str, Any] = {"generated": _now(), "transcripts": sections}
    return page(title or f"trio-agent report: {', '.join(names)}", "transcript", data)


# --- a fleet's output folder -----------------------------------------------------------

RESULTS = "results.jsonl"


def is_fleet_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a fleet's output folder (it holds ``results.jsonl``)."""
    return (Path(path) / RESULTS).is_file()


def _results(folder: Path) -> list[TaskResult]:
    """The last line of each task in ``results.jsonl`` (a torn last line left out)."""
    where = os.fspath(folder / RESULTS)
    last: dict[str, TaskResult] = {}
    with open(where, "rb") as f:
        for number, item in JsonLines(f, where, first_line=1):
            try:
                result = TaskResult.from_json(item)
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(
                    f"{where}:{number}: not a result line of a fleet ({type(exc).__name__}: {exc})"
                ) from None
            last[result.id] = result
    return list(last.values())


def fleet_report(
    folder: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    prices: Prices | None = None,
    slowest: int = 10,
    failed: int = 50,
) -> list[Path]:
    """Write the summary page of the fleet output folder ``folder`` to ``out``, and the
    report of each task it links to (the ``slowest`` slowest and the first ``failed``
    failed ones) into the folder ``<out's stem>-tasks`` beside it. Blocks (file I/O).

    The summary shows how the tasks ended (counts per end reason), histograms of their
    wall times and steps, and the slowest and failed tasks, each linking to its own
    report when its transcript is there.

    Returns:
        The files written, the summary first.

    Raises:
        ValueError: a line of ``results.jsonl`` is not a task's result.
        TranscriptFormatError: a linked task's transcript is not a transcript.
        OSError: a file cannot be read or written.
    """
    folder, out = Path(folder), Path(out)
    results = _results(folder)
    tasks_dir = out.parent / f"{out.stem}-tasks"
    written: list[Path] = []

    def row(result: TaskResult) -> dict[str, Any]:
        transcript = folder / result.transcript
        link = None
        if result.transcript and transcript.is_file():
            # The transcript's name is already a safe file name for the task (the
            # fleet's own, distinct per id).
            name = Path(result.transcript).with_suffix(".html").name
            tasks_dir.mkdir(parents=True, exist_ok=True)
            target = tasks_dir / name
            target.write_text(
                transcript_report([transcript], prices=prices, title=f"task {result.id}"),
                encoding="utf-8",
            )
            written.append(target)
            link = f"{tasks_dir.name}/{name}"
        return {
            "id": result.id,
            "reason": result.reason,
            "steps": result.steps,
            "wall_time": result.wall_time,
            "error": result.error,
            "link": link,
        }

    by_time = sorted(results, key=lambda r: -r.wall_time)
    bad = [r for r in results if r.failed]
    reasons = Counter(r.reason for r in results)
    data = {
        "generated": _now(),
        "folder": os.fspath(folder),
        "tasks": len(results),
        "reasons": dict(reasons.most_common()),
        "wall_times": [r.wall_time for r in results],
        "steps": [r.steps for r in results],
        "tokens": attrs.asdict(sum((r.usage for r in results), NO_USAGE)),
        "slowest": [row(r) for r in by_time[:slowest]],
        "failed": [row(r) for r in bad[:failed]],
        "failed_total": len(bad),
    }
    out.write_text(page(f"trio-agent fleet: {folder.name}", "fleet", data), encoding="utf-8")
    return [out, *written]


# --- benchmark results -------------------------------------------------------------------


def bench_report(results: Mapping[str, Any]) -> str:
    """The HTML page of benchmark results as ``trio-agent bench --json`` writes them
    (``{"meta": ..., "rows": [...], "skipped": [...]}``): per workload and size, the
    ratio of ours to the bare-trio floor, and the peers' beside it where they ran."""
    data = {
        "generated": _now(),
        "meta": dict(results.get("meta") or {}),
        "rows": list(results.get("rows") or []),
        "skipped": list(results.get("skipped") or []),
    }
    return page("trio-agent benchmarks", "bench", data)
