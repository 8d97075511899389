"""find and grep: a confined directory walk, glob matching and regex search.

The walk never leaves the workspace: it goes from folder descriptor to folder descriptor
(see ``_paths``), a symlink is followed only under the workspace rules, each real
directory is entered once (so symlink loops end), and a few well-known bulky folders
(:data:`SKIP_DIRS`) are not entered. grep uses RE2, whose matching time is linear in the
text, so no pattern can stall it. These functions run in a worker thread and call
``check`` now and then, so a cancelled search stops early.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import stat
from functools import partial
from typing import TYPE_CHECKING, Any

import attrs
import re2

from .._core import ToolOutput
from ._files import SNIFF
from ._paths import (
    Refused,
    WorkspaceError,
    check_regular,
    open_any,
    open_dir,
    open_file,
    os_error,
    show_name,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterator

    from ._paths import Root

    Opener = Callable[[], int]

__all__ = [
    "MAX_FIND_RESULTS",
    "MAX_GREP_MATCHES",
    "MAX_VISITED",
    "SKIP_DIRS",
    "compile_glob",
    "compile_regex",
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
_LINES_PER_CHECK = 4096
MAX_NAMED = 10
"""How many skipped files a note names (the count is always whole)."""
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


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
    escaping_links: list[str] = attrs.Factory(list)
    unreadable: list[str] = attrs.Factory(list)
    stopped: bool = False


def _walk(
    root: Root, top: int, names: list[str], stats: WalkStats, check: Callable[[], None]
) -> Generator[tuple[str, bool, Opener]]:
    """Yield ``(root-relative path, is_dir, opener)`` for everything under the folder
    ``top`` (a descriptor, which stays the caller's), whose components are ``names``.

    A folder's entries come in name order, then its subfolders are walked one by one.
    Every folder is opened relative to the one holding it with ``O_NOFOLLOW`` (a symlink
    is followed only through :func:`open_any`, under the workspace rules), so nothing
    swapped in during the walk leads outside; each real folder is entered once.
    ``opener()`` opens a yielded file for reading; call it before asking for the next
    entry. At most one descriptor per level of depth is open at a time.
    """
    first = os.fstat(top)
    seen = {(first.st_dev, first.st_ino)}
    base = "/".join(names)
    # Each frame: the folder's descriptor, its display prefix, its real components, and
    # the subfolders still to walk: (display path, name in this folder or None for a
    # followed link, real components, (dev, ino) seen when listed).
    Frame = tuple[int, str, tuple[str, ...], list[tuple[str, str | None, tuple[str, ...], Any]]]
    stack: list[Frame] = []

    def listing(fd: int, prefix: str, parts: tuple[str, ...]) -> Iterator[tuple[str, bool, Opener]]:
        try:
            with os.scandir(fd) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            stats.unreadable.append(prefix.rstrip("/") or ".")
            return
        below: list[tuple[str, str | None, tuple[str, ...], Any]] = []
        stack.append((fd, prefix, parts, below))
        for e in entries:
            stats.visited += 1
            if stats.visited % _CHECK_EVERY == 0:
                check()
            if stats.visited > MAX_VISITED:
                stats.stopped = True
                return
            rel = prefix + show_name(e.name)
            real = (*parts, e.name)
            # A followed link is listed under its own name but walked (and opened) by the
            # real path it resolves to (``link``); anything else by its name in ``fd``.
            link: tuple[str, ...] | None = None
            try:
                if e.is_symlink():
                    try:
                        lfd, lnames = open_any(root, "/".join(real))
                    except Refused:
                        stats.escaping_links.append(rel)
                        continue
                    except WorkspaceError:
                        continue  # dangling, or a loop
                    try:
                        st = os.fstat(lfd)
                    finally:
                        os.close(lfd)
                    link = tuple(lnames)
                else:
                    st = e.stat(follow_symlinks=False)
            except OSError:
                continue  # vanished while walking
            if stat.S_ISDIR(st.st_mode):
                if e.name in SKIP_DIRS:
                    continue
                yield rel, True, _no_open
                key = (st.st_dev, st.st_ino)
                if key not in seen:
                    seen.add(key)
                    if link is None:
                        below.append((rel, e.name, real, key))
                    else:
                        below.append((rel, None, link, key))
            elif link is None:
                yield rel, False, partial(_open_entry, fd, e.name, rel)
            else:
                yield rel, False, partial(open_file, root, "/".join(real))

    dup = os.dup(top)
    try:
        yield from listing(dup, base + "/" if base else "", tuple(names))
        if not stack:
            os.close(dup)
        while stack and not stats.stopped:
            fd, _, _, below = stack[-1]
            if not below:
                os.close(fd)
                stack.pop()
                continue
            rel, name, parts, key = below.pop(0)
            try:
                if name is not None:
                    sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
                else:
                    sub, _ = open_dir(root, "/".join(parts))
            except (OSError, WorkspaceError):
                stats.unreadable.append(rel)
                continue
            st = os.fstat(sub)
            if (st.st_dev, st.st_ino) != key:
                os.close(sub)  # replaced since it was listed: leave it
                continue
            n = len(stack)
            yield from listing(sub, rel + "/", parts)
            if len(stack) == n:
                os.close(sub)
    finally:
        for fd, *_ in stack:
            os.close(fd)


def _one(rel: str, fd: int, shown: str) -> Generator[tuple[str, bool, Opener]]:
    """The walk of a single file: itself, opened again through its descriptor."""
    yield rel, False, partial(check_regular, os.dup(fd), shown)


def _no_open() -> int:
    raise IsADirectoryError(errno.EISDIR, "is a directory")


def _open_entry(folder: int, name: str, rel: str) -> int:
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=folder)
    except OSError as exc:
        raise os_error(exc, rel) from None
    return check_regular(fd, rel)


def _walk_note(stats: WalkStats) -> str:
    if stats.stopped:
        return f"\n[The search stopped after looking at {MAX_VISITED} entries; narrow the path.]"
    return ""


def _names(paths: list[str]) -> str:
    shown = ", ".join(paths[:MAX_NAMED])
    if len(paths) > MAX_NAMED:
        shown += f", and {len(paths) - MAX_NAMED} more"
    return shown


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _files(n: int) -> str:
    return f"{n} file{_s(n)}"


def find_paths(root: Root, pattern: str, shown: str, check: Callable[[], None]) -> ToolOutput:
    """Root-relative paths under the folder ``shown`` matching the glob ``pattern``, sorted.

    Folders end in ``/``; at most :data:`MAX_FIND_RESULTS` are listed. Folders that
    could not be listed are named in a note.
    """
    matches = compile_glob(pattern)
    top, names = open_dir(root, shown)
    stats = WalkStats()
    found: list[str] = []
    more = False
    try:
        walk = _walk(root, top, names, stats, check)
        for rel, is_dir, _ in walk:
            if matches(rel):
                if len(found) == MAX_FIND_RESULTS:
                    more = True
                    break
                found.append(rel + "/" if is_dir else rel)
    finally:
        walk.close()  # its descriptors now, not when it is collected
        os.close(top)
    found.sort()
    note = _walk_note(stats)
    if stats.unreadable:
        n = len(stats.unreadable)
        note += f"\n[Could not list {n} folder{_s(n)}: {_names(stats.unreadable)}.]"
    details = {
        "pattern": pattern,
        "count": len(found),
        "truncated": more or stats.stopped,
        "escaping_links_skipped": len(stats.escaping_links),
    }
    if not found:
        return ToolOutput(
            content=f"No path matches {pattern} under {shown}.{note}",
            details=details,
        )
    text = "\n".join(found)
    if more:
        text += f"\n\n[More than {MAX_FIND_RESULTS} matches; showing the first {MAX_FIND_RESULTS}.]"
    return ToolOutput(content=text + note, details=details)


def compile_regex(pattern: str, ignore_case: bool) -> re2._Regexp:
    """``pattern`` compiled by RE2, which matches in time linear in the text (no pattern
    can make a search run away).

    Raises:
        WorkspaceError: RE2 refuses the pattern (the message says why and what RE2 lacks).
    """
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignore_case
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "refused"
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", errors="replace")
        raise WorkspaceError(
            f"Invalid regular expression {pattern!r}: {reason}. grep uses RE2 syntax, which "
            "matches in linear time: no backreferences (\\1) or look-around ((?=…), "
            "(?<=…)); write \\Z as \\z."
        ) from None


@attrs.define
class _Skipped:
    too_big: list[str] = attrs.Factory(list)
    binary: list[str] = attrs.Factory(list)
    unreadable: list[str] = attrs.Factory(list)

    def count(self) -> int:
        return len(self.too_big) + len(self.binary) + len(self.unreadable)

    def note(self, stats: WalkStats) -> str:
        """One line per kind of skipped file, each naming them (never a silent skip)."""
        notes = []
        if self.too_big:
            n = len(self.too_big)
            notes.append(
                f"[Skipped {_files(n)} over {MAX_GREP_FILE // (1 << 20)} MB: "
                f"{_names(self.too_big)}. Search such a file with bash, or read it in parts.]"
            )
        if self.binary:
            n = len(self.binary)
            notes.append(f"[Skipped {n} binary file{_s(n)}: {_names(self.binary)}.]")
        unreadable = self.unreadable + stats.unreadable
        if unreadable:
            n = len(unreadable)
            notes.append(f"[Skipped {n} unreadable or special file{_s(n)}: {_names(unreadable)}.]")
        if stats.escaping_links:
            n = len(stats.escaping_links)
            notes.append(
                f"[Not followed: {n} symlink{'s' if n != 1 else ''} leading outside the "
                f"workspace: {_names(stats.escaping_links)}.]"
            )
        return "".join("\n" + n for n in notes)


def grep_files(
    root: Root,
    pattern: str,
    shown: str,
    ignore_case: bool,
    check: Callable[[], None],
) -> ToolOutput:
    """Lines matching the regex ``pattern`` in ``shown`` (a file, or a folder walked).

    Each match is ``path:line: text``; at most :data:`MAX_GREP_MATCHES` are listed. The
    regex engine is RE2 (linear time); files over :data:`MAX_GREP_FILE` bytes, binary
    files and unreadable ones are skipped, and the result counts and names them.
    ``check`` is called between files and every few thousand lines, so a cancelled
    search stops soon.
    """
    rx = compile_regex(pattern, ignore_case)
    top, names = open_any(root, shown)
    stats = WalkStats()
    skipped = _Skipped()
    out: list[str] = []
    searched = 0
    more = False
    try:
        folder = stat.S_ISDIR(os.fstat(top).st_mode)
    except OSError as exc:
        os.close(top)
        raise os_error(exc, shown) from None
    files = (
        _walk(root, top, names, stats, check) if folder else _one(root.display(names), top, shown)
    )
    try:
        for rel, is_dir, opener in files:
            if is_dir:
                continue
            try:
                fd = opener()
            except WorkspaceError:
                skipped.unreadable.append(rel)
                continue
            try:
                data = _read_capped(fd)
            except OSError:
                skipped.unreadable.append(rel)
                continue
            finally:
                os.close(fd)
            if data is None:
                skipped.too_big.append(rel)
                continue
            if b"\0" in data[:SNIFF]:
                skipped.binary.append(rel)
                continue
            searched += 1
            for number, line in enumerate(data.split(b"\n"), 1):
                if number % _LINES_PER_CHECK == 0:
                    check()
                if rx.search(line):
                    if len(out) == MAX_GREP_MATCHES:
                        more = True
                        break
                    text = line.decode("utf-8", errors="replace").removesuffix("\r")
                    if len(text) > MAX_GREP_LINE:
                        text = text[:MAX_GREP_LINE] + " …"
                    out.append(f"{rel}:{number}: {text}")
            if more:
                break
            check()
    finally:
        files.close()  # its descriptors now, not when it is collected
        os.close(top)
    details = {
        "pattern": pattern,
        "matches": len(out),
        "files_searched": searched,
        "files_skipped": skipped.count(),
        "skipped_too_big": skipped.too_big,
        "skipped_binary": skipped.binary,
        "skipped_unreadable": skipped.unreadable + stats.unreadable,
        "truncated": more or stats.stopped,
        "escaping_links_skipped": len(stats.escaping_links),
    }
    notes = skipped.note(stats) + _walk_note(stats)
    if not out:
        return ToolOutput(
            content=f"No match for /{pattern}/ in {shown} ({_files(searched)} searched)." + notes,
            details=details,
        )
    text = "\n".join(out)
    if more:
        text += (
            f"\n\n[Stopped at {MAX_GREP_MATCHES} matches; narrow the pattern or the path "
            "to see the rest.]"
        )
    return ToolOutput(content=text + notes, details=details)


def _read_capped(fd: int) -> bytes | None:
    """The whole file, or None if it is over :data:`MAX_GREP_FILE` bytes."""
    if os.fstat(fd).st_size > MAX_GREP_FILE:
        return None
    parts: list[bytes] = []
    got = 0
    while chunk := os.read(fd, 1 << 20):
        parts.append(chunk)
        got += len(chunk)
        if got > MAX_GREP_FILE:
            return None  # grew while read
    return b"".join(parts)
