"""The bash tool's runner: runs one shell command and kills every process it started.

Run as a script (``python -I -S _reaper.py SHELL COMMAND``), in a session of its own,
by ``_bash``; Linux only. Theory of operation: the runner makes itself a *child
subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``), so a process that the command started and
that lost its parent — a ``setsid`` child, a daemon that double-forked, anything run with
``nohup … &`` — is re-parented to the runner instead of to init. Leaving the process group
or the session does not leave the runner's subtree. The runner starts the shell, reaps
every child as it exits, and when the shell exits, or on SIGTERM, SIGINT or SIGHUP, or
when its own parent dies, it SIGKILLs every descendant (found through ``/proc``), again
and again until none is left, then exits with the shell's status (re-raising the signal
that killed the shell, if one did).

What it cannot reach: processes that are not descendants — started through another
service (``systemd-run``, ``at``, cron, a container runtime, ``ssh`` to a host) — and a
descendant that is itself killed-proof (a process stuck in uninterruptible sleep dies
when the kernel lets it).

This module imports only the standard library: it runs with ``-S`` (no site packages)
so it starts fast, and never imports trio_agent.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
SWEEP_LIMIT = 5.0
"""Seconds the final sweep keeps killing (a fork loop is outrun well before this)."""
PARENT_POLL = 0.5
"""Seconds between checks that the runner's parent is still alive."""


def _children_map() -> dict[int, list[int]]:
    """Parent pid → child pids, for every process /proc shows (zombies included)."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
        except OSError:
            continue  # gone meanwhile
        kids.setdefault(int(fields[1]), []).append(int(entry))
    return kids


def descendants(pid: int) -> list[int]:
    """Every descendant of ``pid`` that /proc shows now, parents before children."""
    kids = _children_map()
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in kids.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _reap(shell: int) -> tuple[bool, int | None]:
    """Reap every exited child: whether any child is left, and ``shell``'s wait status
    if it was among them."""
    status = None
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False, status
        if pid == 0:
            return True, status
        if pid == shell:
            status = st


def sweep() -> None:
    """SIGKILL every descendant and reap them, until none is left (or SWEEP_LIMIT)."""
    me = os.getpid()
    deadline = time.monotonic() + SWEEP_LIMIT
    while True:
        for pid in descendants(me):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if not _reap(0)[0] or time.monotonic() > deadline:
            return
        time.sleep(0.005)


_STOP = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def main(argv: list[str]) -> int:
    """Run ``argv[2]`` with the shell ``argv[1]``; return the exit code to exit with.

    Signals are blocked and taken with ``sigtimedwait`` (no handler can interrupt the
    final sweep): SIGCHLD → reap; SIGTERM, SIGINT, SIGHUP → stop; every
    :data:`PARENT_POLL` seconds → stop if the parent is gone.
    """
    shell, command = argv[1], argv[2]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        print(f"bash runner: cannot become a subreaper: {os.strerror(err)}", file=sys.stderr)
        return 126
    parent = os.getppid()
    watched = {signal.SIGCHLD, *_STOP}
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    # The shell gets an empty signal mask and default dispositions (Python ignores
    # SIGPIPE and SIGXFSZ).
    shell_pid = os.posix_spawn(
        shell,
        [shell, "-c", command],
        os.environ,
        setsigmask=(),
        setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, *_STOP),
    )
    status: int | None = None
    while status is None:
        info = signal.sigtimedwait(watched, PARENT_POLL)
        if info is not None and info.si_signo in _STOP:
            break
        if info is None and os.getppid() != parent:
            break
        status = _reap(shell_pid)[1]
    sweep()
    if status is None:
        return 128 + signal.SIGTERM
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
