"""find and grep: a confined directory walk, glob matching and regex search.

The walk never leaves the workspace: a symlink is followed only when it resolves inside
the root, each real directory is entered once (so symlink loops end), and a few
well-known bulky folders (:data:`SKIP_DIRS`) are not entered. These functions run in a
worker thread and call ``check`` now and then, so a cancelled search stops early.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from typing import TYPE_CHECKING

import attrs

from .._tools import ToolOutput
from ._files import SNIFF
from ._paths import Root, WorkspaceError, open_regular

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = [
    "MAX_FIND_RESULTS",
    "MAX_GREP_MATCHES",
    "MAX_VISITED",
    "SKIP_DIRS",
    "compile_glob",
    "find_paths",
    "grep_files",
]

SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".hypothesis",
        ".cache",
        ".eggs",
    }
)
"""Folders find and grep do not enter (version control, dependencies, caches)."""
MAX_FIND_RESULTS = 1000
MAX_GREP_MATCHES = 100
MAX_GREP_LINE = 300
"""Characters of a matching line that grep shows."""
MAX_GREP_FILE = 10 * 1024 * 1024
"""Larger files are skipped by grep."""
MAX_VISITED = 100_000
"""Entries one walk looks at before it stops (and says so)."""
_CHECK_EVERY = 256


def compile_glob(pattern: str) -> Callable[[str], bool]:
    """A matcher for root-relative ``/``-separated paths.

    ``*``, ``?`` and ``[...]`` match within one path segment and ``**`` matches any
    number of segments. A pattern without ``/`` matches the last segment at any depth
    (``*.py`` finds every Python file).

    Raises:
        WorkspaceError: the pattern is empty.
    """
    pattern = pattern.strip()
    while pattern.startswith("./"):
        pattern = pattern[2:]
    if not pattern:
        raise WorkspaceError("The pattern is empty; try something like *.py or src/**/*.md.")
    if "/" not in pattern:
        rx = re.compile(fnmatch.translate(pattern))
        return lambda rel: rx.match(rel.rpartition("/")[2]) is not None
    segments: list[re.Pattern[str] | None] = [
        None if part == "**" else re.compile(fnmatch.translate(part))
        for part in pattern.split("/")
        if part
    ]
    end = len(segments)

    def closure(states: set[int]) -> set[int]:
        # `**` may match zero segments: a state sitting on one also stands after it.
        todo = list(states)
        while todo:
            s = todo.pop()
            if s < end and segments[s] is None and s + 1 not in states:
                states.add(s + 1)
                todo.append(s + 1)
        return states

    def matches(rel: str) -> bool:
        states = closure({0})
        for part in rel.split("/"):
            nxt: set[int] = set()
            for s in states:
                if s == end:
                    continue
                seg = segments[s]
                if seg is None:
                    nxt.add(s)
                elif seg.match(part):
                    nxt.add(s + 1)
            if not nxt:
                return False
            states = closure(nxt)
        return end in states

    return matches


@attrs.define
class WalkStats:
    visited: int = 0
    escaping_links: int = 0
    unreadable: int = 0
    stopped: bool = False


def _walk(
    root: Root, start: str, stats: WalkStats, check: Callable[[], None]
) -> Iterator[tuple[str, bool, str]]:
    """Yield ``(root-relative path, is_dir, real path)`` under the real folder ``start``."""
    first = os.stat(start)
    seen = {(first.st_dev, first.st_ino)}
    base = root.display(start)
    stack = [(start, "" if base == "." else base + "/")]
    while stack:
        folder, prefix = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            stats.unreadable += 1
            continue
        below: list[tuple[str, str]] = []
        for e in entries:
            stats.visited += 1
            if stats.visited % _CHECK_EVERY == 0:
                check()
            if stats.visited > MAX_VISITED:
                stats.stopped = True
                return
            rel = prefix + e.name
            try:
                if e.is_symlink():
                    real = os.path.realpath(e.path)
                    if not root.contains(real):
                        stats.escaping_links += 1
                        continue
                    st = os.stat(real)
                else:
                    real = e.path
                    st = e.stat(follow_symlinks=False)
            except OSError:
                continue  # dangling link, or vanished while walking
            if stat.S_ISDIR(st.st_mode):
                if e.name in SKIP_DIRS:
                    continue
                yield rel, True, real
                key = (st.st_dev, st.st_ino)
                if key not in seen:
                    seen.add(key)
                    below.append((real, rel + "/"))
            else:
                yield rel, False, real
        stack.extend(reversed(below))


def _walk_note(stats: WalkStats) -> str:
    if stats.stopped:
        return f"\n[The search stopped after looking at {MAX_VISITED} entries; narrow the path.]"
    return ""


def find_paths(
    root: Root, pattern: str, start: str, shown: str, check: Callable[[], None]
) -> ToolOutput:
    """Root-relative paths under ``start`` matching the glob ``pattern``, sorted.

    Folders end in ``/``; at most :data:`MAX_FIND_RESULTS` are listed.
    """
    if not os.path.isdir(start):
        raise WorkspaceError(f"{shown} is not a directory; find searches folders.")
    matches = compile_glob(pattern)
    stats = WalkStats()
    found: list[str] = []
    more = False
    for rel, is_dir, _ in _walk(root, start, stats, check):
        if matches(rel):
            if len(found) == MAX_FIND_RESULTS:
                more = True
                break
            found.append(rel + "/" if is_dir else rel)
    found.sort()
    details = {
        "pattern": pattern,
        "count": len(found),
        "truncated": more or stats.stopped,
        "escaping_links_skipped": stats.escaping_links,
    }
    if not found:
        return ToolOutput(
            content=f"No path matches {pattern} under {shown}.{_walk_note(stats)}",
            details=details,
        )
    text = "\n".join(found)
    if more:
        text += f"\n\n[More than {MAX_FIND_RESULTS} matches; showing the first {MAX_FIND_RESULTS}.]"
    return ToolOutput(content=text + _walk_note(stats), details=details)


def grep_files(
    root: Root,
    pattern: str,
    start: str,
    shown: str,
    ignore_case: bool,
    check: Callable[[], None],
) -> ToolOutput:
    """Lines matching the regex ``pattern`` in ``start`` (a file, or a folder walked).

    Each match is ``path:line: text``; binary files and files over
    :data:`MAX_GREP_FILE` bytes are skipped; at most :data:`MAX_GREP_MATCHES` are listed.
    """
    try:
        rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise WorkspaceError(f"Invalid regular expression {pattern!r}: {exc}.") from None
    stats = WalkStats()
    if os.path.isdir(start):
        files: Iterator[tuple[str, str]] = (
            (rel, real) for rel, is_dir, real in _walk(root, start, stats, check) if not is_dir
        )
    elif os.path.exists(start):
        files = iter([(root.display(start), start)])
    else:
        raise WorkspaceError(f"{shown}: no such file or directory.")
    out: list[str] = []
    searched = skipped = 0
    more = False
    for rel, real in files:
        try:
            fd = open_regular(real, rel)
        except WorkspaceError:
            continue
        with os.fdopen(fd, "rb") as f:
            if os.fstat(f.fileno()).st_size > MAX_GREP_FILE:
                skipped += 1
                continue
            data = f.read()
        if b"\0" in data[:SNIFF]:
            skipped += 1
            continue
        searched += 1
        for number, line in enumerate(data.decode("utf-8", errors="replace").split("\n"), 1):
            if rx.search(line):
                if len(out) == MAX_GREP_MATCHES:
                    more = True
                    break
                line = line.removesuffix("\r")
                if len(line) > MAX_GREP_LINE:
                    line = line[:MAX_GREP_LINE] + " …"
                out.append(f"{rel}:{number}: {line}")
        if more:
            break
        check()
    details = {
        "pattern": pattern,
        "matches": len(out),
        "files_searched": searched,
        "files_skipped": skipped,
        "truncated": more or stats.stopped,
        "escaping_links_skipped": stats.escaping_links,
    }
    if not out:
        return ToolOutput(
            content=f"No match for /{pattern}/ in {shown} ({searched} files searched)."
            + _walk_note(stats),
            details=details,
        )
    text = "\n".join(out)
    if more:
        text += (
            f"\n\n[Stopped at {MAX_GREP_MATCHES} matches; narrow the pattern or the path "
            "to see the rest.]"
        )
    return ToolOutput(content=text + _walk_note(stats), details=details)
