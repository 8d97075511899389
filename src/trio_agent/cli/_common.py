"""What the sub-commands share: exit codes, where their files go by default, how they
report a failure in one line, and a stdout that does not crash on an odd character."""

from __future__ import annotations

import io
import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypeVar

import trio

from .._run import representative

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

T = TypeVar("T")

__all__ = [
    "INTERRUPTED",
    "OK",
    "PROBLEM",
    "USAGE",
    "cancelled_by_ctrl_c",
    "first_error",
    "holds_a_transcript",
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


def holds_a_transcript(path: Path) -> bool:
    """Whether ``path`` is a file with something in it: a transcript a new session must
    not append to (its messages would be mixed with another session's). An empty file
    (say, made by ``mktemp``) is not."""
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


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


async def cancelled_by_ctrl_c(fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``fn()`` with Ctrl-C as a cancel, then raise :exc:`KeyboardInterrupt`.

    Left to trio's default, Ctrl-C raises ``KeyboardInterrupt`` in whatever code is
    running, which may be a run between appending a message and writing its line to a
    transcript. Here the first SIGINT cancels ``fn()`` instead: every run pairs its
    transcript and closes its files on the way out, as for any cancel (each bounded by
    its ``cleanup_timeout``), and ``KeyboardInterrupt`` is raised once it has. trio's own
    handling is back from then on: a second SIGINT interrupts the clean-up at once. An
    exception of ``fn()`` reaches the caller unwrapped.
    """
    scope = trio.CancelScope()
    outcome: list[T] = []

    async def watch(*, task_status: trio.TaskStatus[None]) -> None:  # noqa: ASYNC114
        with trio.open_signal_receiver(signal.SIGINT) as signals:
            task_status.started()
            async for _ in signals:
                scope.cancel()
                return  # leaving the receiver puts trio's KeyboardInterrupt back

    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(watch)
            try:
                with scope:
                    outcome.append(await fn())
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise representative(group) from None
    if scope.cancelled_caught or not outcome:
        raise KeyboardInterrupt
    return outcome[0]
