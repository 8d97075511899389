"""The fleet's counters and the progress line shown on a terminal."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, TextIO

import trio

if TYPE_CHECKING:
    from ._task import TaskResult

__all__ = ["Counters", "show_progress"]


class Counters:
    """What a fleet has done so far (this session; ``skipped`` were done before)."""

    def __init__(self, skipped: int = 0) -> None:
        self.skipped = skipped
        self.done = 0
        self.failed = 0
        self.running = 0
        self.resumed = 0
        self.tokens = 0
        self.started = time.perf_counter()

    def finished(self, result: TaskResult) -> None:
        self.done += 1
        self.failed += result.failed
        self.resumed += result.resumed
        self.tokens += result.usage.total

    @property
    def rate(self) -> float:
        """Tasks finished per second since the fleet started."""
        elapsed = time.perf_counter() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        skipped = f" (+{self.skipped:,} earlier)" if self.skipped else ""
        return (
            f"fleet: {self.done:,} done{skipped}, {self.failed:,} failed, "
            f"{self.running:,} running, {self.rate:,.1f} tasks/s, {self.tokens:,} tokens"
        )


async def show_progress(
    counters: Counters, stream: TextIO | None = None, *, interval: float = 0.5
) -> None:
    """Rewrite the progress line on ``stream`` (stderr) every ``interval`` seconds, until
    cancelled; then write the final line and a newline."""
    out = stream if stream is not None else sys.stderr
    width = 0
    try:
        while True:
            text = counters.line()
            out.write("\r" + text + " " * max(0, width - len(text)))
            out.flush()
            width = len(text)
            await trio.sleep(interval)
    finally:
        text = counters.line()
        out.write("\r" + text + " " * max(0, width - len(text)) + "\n")
        out.flush()
