"""``trio-agent bench``: run the benchmark suite (``benchmarks/`` of a source checkout).

The suite is not part of the installed package: it lives next to ``src/`` in a checkout
and needs the floors and workloads written there. This command finds it — importable
already, in the current folder, or beside the ``src/`` this package was installed from
in editable mode — and runs ``benchmarks.suite.main``.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse
    from types import ModuleType

# Keep in step with benchmarks/suite.py: the parser is built for every trio-agent
# command, so it must not import the suite (slow, and absent outside a checkout).
WORKLOADS = ("W1", "W2", "W3", "W4", "W5", "transcript")


def _positive(text: str) -> int:
    import argparse

    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
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
    parser.add_argument("--repeats", type=_positive, help="repeats per size (default 7, quick 2)")
    parser.add_argument("--json", metavar="OUT", help="also write the results as JSON to OUT")
    parser.add_argument(
        "--no-peers", action="store_true", help="skip the peers even when they are installed"
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-RSS subprocesses")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def _is_suite(module: ModuleType) -> bool:
    return callable(getattr(module, "main", None)) and hasattr(module, "WORKLOADS")


def find_suite() -> ModuleType | None:
    """``benchmarks.suite`` from the path, the current folder, or the source checkout."""
    candidates = [None, Path.cwd(), Path(__file__).resolve().parents[2]]
    for folder in candidates:
        if folder is not None:
            if not (folder / "benchmarks" / "suite.py").is_file():
                continue
            sys.modules.pop("benchmarks", None)
            sys.path.insert(0, str(folder))
        try:
            module = importlib.import_module("benchmarks.suite")
        except ModuleNotFoundError as exc:
            if exc.name not in ("benchmarks", "benchmarks.suite"):
                raise
            continue
        if _is_suite(module):
            return module
        sys.modules.pop("benchmarks.suite", None)
    return None


def run(args: argparse.Namespace) -> int:
    suite = find_suite()
    if suite is None:
        print(
            "trio-agent bench: the benchmarks/ folder was not found. It ships with the "
            "source: run this command from the root of a trio-agent checkout.",
            file=sys.stderr,
        )
        return 2
    code: int = suite.main(args)
    return code
