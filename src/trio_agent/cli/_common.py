"""What the sub-commands share: exit codes, where their files go by default, how they
report a failure in one line, and a stdout that does not crash on an odd character."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path
from typing import TextIO

__all__ = [
    "INTERRUPTED",
    "OK",
    "PROBLEM",
    "USAGE",
    "first_error",
    "replace_unprintable",
    "state_file",
]

OK = 0
"""The command did what was asked."""
PROBLEM = 1
"""The command ran and found a problem (a transcript that does not load, a diverging
replay, a run that did not end with ``stop``, a file that could not be written)."""
USAGE = 2
"""Bad usage: wrong options or arguments."""
INTERRUPTED = 130
"""Interrupted by Ctrl-C (128 + SIGINT, as shells report it)."""


def state_file(command: str) -> Path:
    """A new file name under ``$XDG_STATE_HOME/trio-agent/<command>`` (default
    ``~/.local/state``): ``<command>-<date>-<time>-<pid>.jsonl``. Creates nothing."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    name = f"{command}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.jsonl"
    return Path(base) / "trio-agent" / command / name


def first_error(exc: BaseException) -> BaseException:
    """The exception a one-line report names: ``exc`` itself, or for an exception group
    (what a nursery raises) its first leaf, however deeply nested."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def replace_unprintable(stream: TextIO) -> None:
    """Make ``stream`` (``sys.stdout``) write a ``?`` for a character its encoding cannot
    show, where it would raise :exc:`UnicodeEncodeError`; a stream that is not a
    :class:`io.TextIOWrapper` (a test's ``StringIO``) is left as it is."""
    if isinstance(stream, io.TextIOWrapper):
        stream.reconfigure(errors="replace")
