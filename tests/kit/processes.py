"""Processes seen through ``/proc`` (Linux only): whether one is alive, and the live
ones by parent or by process group. A zombie counts as gone: it has exited, only its
exit status waits to be read. And child processes a test starts, waits on and signals."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path


def _state(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (the state first, then
    the parent, then the process group), or ``None`` when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            return f.read().rpartition(")")[2].split()
    except OSError:
        # Gone before the open, or reaped between the open and the read (ESRCH).
        return None


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (not a zombie)."""
    fields = _state(pid)
    return fields is not None and fields[0] != "Z"


def _live(field: int, value: int) -> list[int]:
    """The live processes whose stat ``field`` (1: parent, 2: group) is ``value``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _state(entry)
        if fields is not None and fields[0] != "Z" and int(fields[field]) == value:
            found.append(int(entry))
    return found


def children_of(pid: int) -> list[int]:
    """The live child processes of ``pid``."""
    return _live(1, pid)


def live_members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    return _live(2, pgid)


@contextlib.contextmanager
def child_process(cmd: Sequence[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``cmd`` in a child process (stdout discarded, stderr to ``log``); on the way
    out a child still running is killed and reaped, whatever the test did."""
    with log.open("wb") as err:
        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
    try:
        yield child
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def wait_until(
    child: subprocess.Popen[bytes],
    log: Path,
    ready: Callable[[], bool],
    *,
    within: float,
    what: str,
    poll: float = 0.01,
) -> None:
    """Poll ``ready()`` until it is true; fail (with the child's stderr) when the child
    exits first or ``within`` seconds pass."""
    deadline = time.monotonic() + within
    while not ready():
        assert child.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"{what}\n{log.read_text()}"
        time.sleep(poll)
