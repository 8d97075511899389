"""bash: run a shell command in the workspace, streaming its output as progress.

Theory of operation: on Linux the command runs under a runner process (``_reaper``,
started with ``trio.run_process`` in a new session) that is a child subreaper: every
process the command starts stays in the runner's subtree even if it leaves the process
group or the session (``setsid``, a double-forking daemon), and the runner SIGKILLs the
whole subtree when the shell exits or when it gets SIGTERM. On timeout, on cancel and on
any error the runner is sent SIGTERM synchronously (a signal needs no checkpoint, so a
cancelled task cannot skip it) and waited for, with a bound, after which its process
group is SIGKILLed. Without Linux there is no runner: the shell leads a process group,
and that group is SIGKILLed instead (a process that left it survives).

Output (stdout and stderr merged, as in a terminal) is read in chunks and kept in a
bounded tail for the result; progress reports merge the lines that arrived since the
last one and come at a bounded rate, so a command printing millions of lines produces a
few reports per second, never one per line.

The command runs with the user's rights: it is not confined to the workspace (the file
tools are).
"""

from __future__ import annotations

import codecs
import contextlib
import os
import shutil
import signal
import subprocess
import sys
from functools import partial
from typing import TYPE_CHECKING

import trio

from .._core import MAX_RESULT_CHARS, ToolOutput
from ._paths import WorkspaceError

if TYPE_CHECKING:
    from .._core import ToolContext

__all__ = [
    "DEFAULT_TIMEOUT",
    "KILLED_NOTE",
    "MAX_OUTPUT_CHARS",
    "MAX_OUTPUT_LINES",
    "PROGRESS_INTERVAL",
    "USES_RUNNER",
    "run_bash",
]

DEFAULT_TIMEOUT = 120.0
MAX_OUTPUT_LINES = 2000
"""The result keeps the last this many lines of output..."""
MAX_OUTPUT_CHARS = MAX_RESULT_CHARS
"""...and at most this many characters (what a tool result keeps by default)."""
MAX_PROGRESS_LINE = 4000
"""Longer lines are reported (and kept) in pieces of this size."""
DRAIN_TIMEOUT = 1.0
"""Seconds to wait for the last output once the command has ended. Without the runner a
process that left the group (``setsid``) can keep the pipe open; then reading stops
after this."""
PROGRESS_INTERVAL = 0.05
"""Seconds between two progress reports of one call (at most 20 a second)."""
MAX_PENDING_CHARS = 50_000
"""Output waiting for the next progress report is cut to about this many characters."""
KILL_GRACE = 10.0
"""Seconds the runner gets to kill everything and exit before its group is SIGKILLed."""
USES_RUNNER = sys.platform.startswith("linux") and bool(sys.executable)
"""Whether bash runs under the subreaper runner (Linux), which kills every descendant."""
_RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_reaper.py")
KILLED_NOTE = (
    "every process it started was killed" if USES_RUNNER else "its process group was killed"
)
_KILLED = KILLED_NOTE


def kill_group(pgid: int) -> None:
    """SIGKILL the process group ``pgid``; a group already gone is not an error."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:  # macOS answers EPERM for a group of zombies
        pass


class _Tail:
    """The end of the output, for the result: the last :data:`MAX_OUTPUT_LINES` lines
    within :data:`MAX_OUTPUT_CHARS` characters, and the count of all lines.

    Kept as one bounded string (fed chunk by chunk), so a flood costs no per-line work.
    """

    _KEEP = MAX_OUTPUT_CHARS + MAX_PROGRESS_LINE

    def __init__(self) -> None:
        self.buf = ""
        self.cut = False  # something before ``buf`` was dropped
        self.newlines = 0

    def feed(self, text: str) -> None:
        self.newlines += text.count("\n")
        self.buf += text
        if len(self.buf) > 2 * self._KEEP:
            self.buf = self.buf[-self._KEEP :]
            self.cut = True

    @property
    def total(self) -> int:
        """Lines of output (a last line without newline counts)."""
        return self.newlines + (bool(self.buf) and not self.buf.endswith("\n"))

    def lines(self) -> list[str]:
        body = self.buf.removesuffix("\n")
        if not body:
            return []
        lines = [ln.removesuffix("\r") for ln in body.split("\n")]
        if self.cut and len(lines) > 1:
            lines = lines[1:]  # the first line kept is only its end
        lines = lines[-MAX_OUTPUT_LINES:]
        chars = sum(len(ln) + 1 for ln in lines)
        while chars > MAX_OUTPUT_CHARS and len(lines) > 1:
            chars -= len(lines.pop(0)) + 1
        if len(lines[0]) > MAX_OUTPUT_CHARS:
            lines[0] = lines[0][-MAX_OUTPUT_CHARS:]
        return lines

    def text(self) -> str:
        lines = self.lines()
        if not lines:
            return "(no output)"
        body = "\n".join(lines)
        if len(lines) < self.total:
            return f"[output cut: showing the last {len(lines)} of {self.total} lines]\n{body}"
        return body


class _Progress:
    """Output waiting to be reported as progress, merged between reports.

    :meth:`run` reports at most once per :data:`PROGRESS_INTERVAL`, each report being all
    complete lines that arrived since the last (joined with newlines); a line longer than
    :data:`MAX_PROGRESS_LINE` is reported in pieces. What waits is bounded
    (:data:`MAX_PENDING_CHARS`): past that the oldest lines are dropped and the next report
    starts with a note saying how many. Reading the output never waits for a report.
    """

    def __init__(self) -> None:
        self.pending = ""
        self.dropped = 0
        self.closed = False
        self.wake = trio.Event()
        self.done = trio.Event()

    def feed(self, text: str) -> None:
        self.pending += text
        if len(self.pending) > 2 * MAX_PENDING_CHARS:
            cut = len(self.pending) - MAX_PENDING_CHARS
            cut = self.pending.find("\n", cut) + 1 or cut
            self.dropped += self.pending.count("\n", 0, cut)
            self.pending = self.pending[cut:]
        if "\n" in text or len(self.pending) > MAX_PROGRESS_LINE:
            self.wake.set()

    def close(self) -> None:
        self.closed = True
        self.wake.set()

    def take(self) -> str | None:
        """The next report, or None if nothing is ready."""
        end = self.pending.rfind("\n") + 1
        if self.closed:
            end = len(self.pending)
        elif not end and len(self.pending) > MAX_PROGRESS_LINE:
            end = MAX_PROGRESS_LINE
        if not end and not self.dropped:
            return None
        ready, self.pending = self.pending[:end], self.pending[end:]
        lines = [ln.removesuffix("\r") for ln in ready.removesuffix("\n").split("\n")]
        pieces = [
            ln[i : i + MAX_PROGRESS_LINE]
            for ln in lines
            for i in range(0, len(ln) or 1, MAX_PROGRESS_LINE)
        ]
        if self.dropped:
            pieces.insert(0, f"[… {self.dropped} lines not shown]")
            self.dropped = 0
        return "\n".join(pieces)

    async def run(self, ctx: ToolContext) -> None:
        """Report until closed and drained; sleeps :data:`PROGRESS_INTERVAL` between
        reports. ``ctx.report_progress`` may wait (backpressure); output keeps being read."""
        try:
            while True:
                await self.wake.wait()
                self.wake = trio.Event()
                report = self.take()
                if report is not None:
                    await ctx.report_progress(report)
                if self.closed and not self.pending and not self.dropped:
                    return
                if report is not None:
                    await trio.sleep(PROGRESS_INTERVAL)
                    self.wake.set()  # look again: more may have come meanwhile
        finally:
            self.done.set()


async def _pump(
    stream: trio.abc.ReceiveStream, tail: _Tail, progress: _Progress, done: trio.Event
) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    try:
        async with stream:
            async for chunk in stream:
                text = decoder.decode(chunk)
                tail.feed(text)
                progress.feed(text)
            text = decoder.decode(b"", final=True)
            tail.feed(text)
            progress.feed(text)
    finally:
        done.set()


def _shell() -> str:
    return shutil.which("bash") or "/bin/sh"


def _command(command: str) -> list[str]:
    """The argv that runs ``command``: through the runner on Linux, else the bare shell."""
    if USES_RUNNER:
        return [sys.executable, "-I", "-S", _RUNNER, _shell(), command]
    return [_shell(), "-c", command]


def _stop(proc: trio.Process) -> None:
    """Ask ``proc`` to end everything: SIGTERM to the runner (which kills every
    descendant, then exits), or SIGKILL to the process group without it. Synchronous
    (no checkpoint), so a cancelled task cannot skip it."""
    if USES_RUNNER:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
    else:
        kill_group(proc.pid)


async def _end(proc: trio.Process) -> None:
    """Stop ``proc`` and wait until it has exited; after :data:`KILL_GRACE` seconds,
    SIGKILL its whole group (the runner is stuck: its sweep is bounded well below)."""
    _stop(proc)
    with trio.move_on_after(KILL_GRACE):
        await proc.wait()
        return
    kill_group(proc.pid)
    await proc.wait()


async def run_bash(root: str, command: str, time_limit: float, ctx: ToolContext) -> ToolOutput:
    """Run ``command`` with ``bash -c`` in ``root``; return its output and exit code.

    Output (stdout and stderr merged) is reported as progress at most
    1/:data:`PROGRESS_INTERVAL` times a second per call, the lines in between merged into
    one report (see :class:`_Progress`); reading it never waits for the consumer.

    On Linux the command runs under a small runner process that is a child subreaper
    (``_reaper``): when the shell exits, on timeout and on cancel, every process the
    command started is killed — also one that left the process group or the session
    (``setsid``, a daemon that double-forked, ``nohup``) — before the call returns. Only
    processes started through another service (``systemd-run``, ``at``, a container
    runtime) are out of reach. Elsewhere the command's process group is killed.

    The command runs with the user's rights and is not confined to the workspace.

    Raises:
        WorkspaceError: the command exited non-zero or was killed (the message holds the
            output and the code), or it ran out of ``time_limit`` seconds (the output so far).
        trio.Cancelled: the call was cancelled; every process was killed and reaped
            (waiting at most :data:`KILL_GRACE` seconds, shielded).
    """
    if time_limit <= 0:
        raise WorkspaceError(f"timeout must be more than 0 seconds, got {time_limit:g}.")
    tail = _Tail()
    progress = _Progress()
    pumped = trio.Event()
    began = trio.current_time()
    async with trio.open_nursery() as nursery:
        proc: trio.Process = await nursery.start(
            partial(
                trio.run_process,
                _command(command),
                cwd=root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                check=False,
                start_new_session=True,
                deliver_cancel=_end,
            )
        )
        try:
            assert proc.stdout is not None
            nursery.start_soon(_pump, proc.stdout, tail, progress, pumped)
            nursery.start_soon(progress.run, ctx)
            with trio.move_on_after(time_limit) as timer:
                await proc.wait()
            if timer.cancelled_caught:
                await _end(proc)
            else:
                _stop(proc)  # without the runner: leftover background children die here
            with trio.move_on_after(DRAIN_TIMEOUT):
                await pumped.wait()
            progress.close()
            await progress.done.wait()
        finally:
            _stop(proc)
            nursery.cancel_scope.cancel()
    elapsed = trio.current_time() - began
    output = tail.text()
    if timer.cancelled_caught:
        raise WorkspaceError(f"{output}\n\nCommand timed out after {time_limit:g}s; {_KILLED}.")
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
            "truncated": len(tail.lines()) < tail.total,
            "seconds": round(elapsed, 3),
        },
    )
