"""bash: run a shell command in the workspace, streaming its output as progress.

Theory of operation: the command runs under ``trio.run_process`` in a new session, so
the shell and everything it starts share one process group whose id is the shell's pid.
Output (stdout and stderr merged, as in a terminal) is read line by line; each line is
reported with ``ctx.report_progress`` and kept in a bounded tail for the result. When the
shell exits, the group is killed with SIGKILL: a background child (``sleep 100 &``) would
otherwise outlive the call and keep the output pipe open. On timeout, on cancel and on any
error the group is killed the same way, synchronously (a kill needs no checkpoint, so a
cancelled task cannot skip it), and ``run_process`` reaps the shell.
"""

from __future__ import annotations

import codecs
import collections
import os
import shutil
import signal
import subprocess
from functools import partial
from typing import TYPE_CHECKING

import trio

from .._tools import ToolOutput
from ._paths import WorkspaceError

if TYPE_CHECKING:
    from .._tools import ToolContext

__all__ = ["DEFAULT_TIMEOUT", "MAX_OUTPUT_CHARS", "MAX_OUTPUT_LINES", "run_bash"]

DEFAULT_TIMEOUT = 120.0
MAX_OUTPUT_LINES = 2000
"""The result keeps the last this many lines of output..."""
MAX_OUTPUT_CHARS = 50_000
"""...and at most this many characters."""
MAX_PROGRESS_LINE = 4000
"""Longer lines are reported (and kept) in pieces of this size."""
DRAIN_TIMEOUT = 1.0
"""Seconds to wait for the last output after the group is killed. A process that left
the group (``setsid``) can keep the pipe open; then reading stops after this."""


def kill_group(pgid: int) -> None:
    """SIGKILL the process group ``pgid``; a group already gone is not an error."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:  # macOS answers EPERM for a group of zombies
        pass


async def _deliver_cancel(proc: trio.Process) -> None:
    kill_group(proc.pid)
    await trio.lowlevel.checkpoint()


class _Tail:
    """The last lines of output, within :data:`MAX_OUTPUT_LINES` and ``_CHARS``."""

    def __init__(self) -> None:
        self.lines: collections.deque[str] = collections.deque()
        self.chars = 0
        self.total = 0

    def add(self, line: str) -> None:
        self.total += 1
        self.lines.append(line)
        self.chars += len(line) + 1
        while len(self.lines) > MAX_OUTPUT_LINES or (
            self.chars > MAX_OUTPUT_CHARS and len(self.lines) > 1
        ):
            self.chars -= len(self.lines.popleft()) + 1

    def text(self) -> str:
        body = "\n".join(self.lines)
        if not body:
            return "(no output)"
        if len(self.lines) < self.total:
            return f"[output cut: showing the last {len(self.lines)} of {self.total} lines]\n{body}"
        return body


async def _pump(
    stream: trio.abc.ReceiveStream, tail: _Tail, ctx: ToolContext, done: trio.Event
) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""

    async def emit(line: str) -> None:
        tail.add(line)
        await ctx.report_progress(line)

    try:
        async with stream:
            async for chunk in stream:
                pending += decoder.decode(chunk)
                *lines, pending = pending.split("\n")
                for line in lines:
                    await emit(line.removesuffix("\r"))
                while len(pending) > MAX_PROGRESS_LINE:
                    await emit(pending[:MAX_PROGRESS_LINE])
                    pending = pending[MAX_PROGRESS_LINE:]
            pending += decoder.decode(b"", final=True)
            if pending:
                await emit(pending.removesuffix("\r"))
    finally:
        done.set()


def _shell() -> str:
    return shutil.which("bash") or "/bin/sh"


async def run_bash(root: str, command: str, time_limit: float, ctx: ToolContext) -> ToolOutput:
    """Run ``command`` with ``bash -c`` in ``root``; return its output and exit code.

    Output lines are reported as progress as they arrive. The whole process group is
    killed when the shell exits, on timeout and on cancel, so no process outlives the
    call (except one that left the group on purpose, with ``setsid``).

    Raises:
        WorkspaceError: the command exited non-zero or was killed (the message holds the
            output and the code), or it ran out of ``time_limit`` seconds (the output so far).
        trio.Cancelled: the call was cancelled; the group was killed and the shell reaped.
    """
    if time_limit <= 0:
        raise WorkspaceError(f"timeout must be more than 0 seconds, got {time_limit:g}.")
    tail = _Tail()
    pumped = trio.Event()
    began = trio.current_time()
    async with trio.open_nursery() as nursery:
        proc: trio.Process = await nursery.start(
            partial(
                trio.run_process,
                [_shell(), "-c", command],
                cwd=root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                check=False,
                start_new_session=True,
                deliver_cancel=_deliver_cancel,
            )
        )
        try:
            assert proc.stdout is not None
            nursery.start_soon(_pump, proc.stdout, tail, ctx, pumped)
            with trio.move_on_after(time_limit) as timer:
                await proc.wait()
            # Leftover background children die here; on timeout, the shell too.
            kill_group(proc.pid)
            with trio.move_on_after(DRAIN_TIMEOUT):
                await pumped.wait()
        finally:
            kill_group(proc.pid)
            nursery.cancel_scope.cancel()
    elapsed = trio.current_time() - began
    output = tail.text()
    if timer.cancelled_caught:
        raise WorkspaceError(
            f"{output}\n\nCommand timed out after {time_limit:g}s; its process group was killed."
        )
    code = proc.returncode
    assert code is not None
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        raise WorkspaceError(f"{output}\n\nCommand was killed by {name}.")
    if code != 0:
        raise WorkspaceError(f"{output}\n\nCommand exited with code {code}.")
    return ToolOutput(
        content=f"{output}\n\n[exit code 0]",
        details={
            "exit_code": 0,
            "lines": tail.total,
            "truncated": len(tail.lines) < tail.total,
            "seconds": round(elapsed, 3),
        },
    )
