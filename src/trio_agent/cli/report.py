"""``trio-agent report``: a self-contained HTML page of transcripts or of a fleet folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .._bench import positive
from .._core import TranscriptFormatError

if TYPE_CHECKING:
    from ..report import Prices

__all__ = ["add_arguments", "parse_prices", "run"]


def parse_prices(text: str) -> Prices:
    """``IN,OUT[,CACHE_READ[,CACHE_WRITE]]`` dollars per million tokens.

    Raises:
        argparse.ArgumentTypeError: not two to four non-negative numbers.
    """
    from ..report import Prices

    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not 2 <= len(values) <= 4 or any(not v >= 0 for v in values):
        raise argparse.ArgumentTypeError(
            f"expected IN,OUT[,CACHE_READ[,CACHE_WRITE]] dollars per million tokens, got {text!r}"
        )
    names = ("input", "output", "cache_read", "cache_write")
    return Prices(**dict(zip(names, values, strict=False)))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Write one self-contained HTML page (no network, no external script or font) of "
        "JSONL transcripts: the pairing check's verdict, each run as a timeline of model "
        "requests and tool calls (when the transcript has timings, as the trio-agent "
        "commands write them), the batches' statistics, usage and cost, "
        "and the conversation. Given a fleet's output folder instead (one holding "
        "results.jsonl), a summary page of its tasks, with the slowest and failed ones "
        "linking to their own reports (written into OUT's stem + '-tasks/')."
    )
    parser.epilog = "Exit codes: 0 written, 1 a file could not be read or written, 2 bad usage."
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="TRANSCRIPT",
        type=Path,
        help="JSONL transcripts, or one fleet output folder",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path("report.html"),
        help="the HTML file to write (default report.html)",
    )
    parser.add_argument(
        "--prices",
        type=parse_prices,
        metavar="IN,OUT[,CR[,CW]]",
        help="dollars per million input, output, cache-read and cache-write "
        "tokens, to price every request with (default: each request's model priced "
        "from the genai-prices table when it knows it; a request it does not know "
        "shows no cost)",
    )
    parser.add_argument(
        "--slowest",
        type=positive,
        default=10,
        metavar="N",
        help="fleet folder: how many of the slowest tasks to list (default 10)",
    )


def _complain(text: str) -> int:
    print(f"trio-agent report: {text}", file=sys.stderr)
    return 1


def run(args: argparse.Namespace) -> int:
    from ..report import fleet_report, is_fleet_folder, transcript_report

    paths: list[Path] = args.paths
    folders = [p for p in paths if p.is_dir()]
    try:
        if folders:
            if len(paths) != 1 or not is_fleet_folder(folders[0]):
                print(
                    "trio-agent report: give either transcripts or one fleet output folder "
                    "(a folder holding results.jsonl)",
                    file=sys.stderr,
                )
                return 2
            written = fleet_report(
                folders[0], args.output, prices=args.prices, slowest=args.slowest
            )
            print(f"report: {written[0]} ({len(written) - 1} task reports beside it)")
            return 0
        page = transcript_report(paths, prices=args.prices)
        args.output.write_text(page, encoding="utf-8")
    except (OSError, TranscriptFormatError, ValueError) as exc:
        return _complain(str(exc))
    print(f"report: {args.output}")
    return 0
