"""Self-contained HTML reports: a transcript's run, a fleet's results, benchmark results.

::

    from trio_agent.report import transcript_report

    Path("report.html").write_text(transcript_report(["run.jsonl"]), encoding="utf-8")

(``trio-agent report run.jsonl -o report.html`` on the command line.) A page needs
nothing but itself: no network, no external script or font; its figures are inline SVG
drawn by a little inline script. Everything in it that came from a transcript (model
output, file contents, arguments) is embedded as escaped JSON and shown as text, never
as markup.

A transcript written with timings (``JsonlTranscript(..., timings=True)``, what the
command line writes) is shown as a timeline of each run: model requests and tool calls
as bars on one time axis, the calls of a batch stacked one per lane so that what ran at
once overlaps. One without timings is shown without a timeline.
"""

from ._pages import (
    Prices,
    bench_report,
    fleet_report,
    is_fleet_folder,
    transcript_report,
)

__all__ = ["Prices", "bench_report", "fleet_report", "is_fleet_folder", "transcript_report"]
