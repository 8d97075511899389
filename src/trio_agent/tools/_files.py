"""read, write, edit and ls: the synchronous cores, run in a worker thread.

Each function takes a path already resolved inside the workspace (``real``) and the path
as the model wrote it (``shown``, used in messages), and raises :class:`WorkspaceError`
with the text the model should see.
"""

from __future__ import annotations

import os
from typing import Any

from .._tools import ToolOutput
from ._paths import WorkspaceError, open_regular, os_error

__all__ = [
    "MAX_LINES",
    "MAX_LINE_CHARS",
    "MAX_LS_ENTRIES",
    "MAX_READ_CHARS",
    "edit_file",
    "list_dir",
    "looks_binary",
    "read_file",
    "write_file",
]

MAX_LINES = 2000
"""The most lines one ``read`` returns."""
MAX_READ_CHARS = 50_000
"""The most characters (line numbers included) one ``read`` returns."""
MAX_LINE_CHARS = 2000
"""Longer lines are cut, with a note saying how much is missing."""
MAX_LS_ENTRIES = 1000
SNIFF = 8192
"""How many leading bytes decide whether a file is text."""
_CHUNK = 1 << 20


def looks_binary(head: bytes) -> bool:
    """Whether a file starting with ``head`` is not UTF-8 text (NUL bytes or bad UTF-8).

    A multi-byte character cut by the end of ``head`` does not count.
    """
    if b"\0" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return not (exc.reason == "unexpected end of data" and exc.start >= len(head) - 3)
    return False


def _cut_line(text: str) -> str:
    if len(text) <= MAX_LINE_CHARS:
        return text
    missing = len(text) - MAX_LINE_CHARS
    return f"{text[:MAX_LINE_CHARS]} … [line cut: {missing} more characters]"


def _count_lines(f: Any) -> int:
    """Lines from the current position to the end (a last line without newline counts)."""
    count = 0
    last = b"\n"
    while chunk := f.read(_CHUNK):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (last != b"\n")


def read_file(real: str, shown: str, offset: int | None, limit: int | None) -> ToolOutput:
    """Numbered lines of a text file, from line ``offset`` (1-based), at most ``limit``.

    Output is capped at :data:`MAX_LINES` lines and :data:`MAX_READ_CHARS` characters;
    when lines are left, a last note says which were shown and how to read on.
    """
    if offset is not None and offset < 1:
        raise WorkspaceError(f"offset must be 1 or more (lines are numbered from 1), got {offset}.")
    if limit is not None and limit < 1:
        raise WorkspaceError(f"limit must be 1 or more, got {limit}.")
    start = offset or 1
    fd = open_regular(real, shown)
    with os.fdopen(fd, "rb") as f:
        head = f.read(SNIFF)
        if looks_binary(head):
            size = os.fstat(f.fileno()).st_size
            raise WorkspaceError(
                f"{shown} looks like a binary file ({size} bytes, not UTF-8 text); "
                "read only shows text files."
            )
        f.seek(0)
        n = 0  # lines consumed so far
        while n < start - 1 and f.readline():
            n += 1
        capped = limit is None or limit > MAX_LINES
        want = MAX_LINES if limit is None or capped else limit
        shown_lines: list[str] = []
        used = 0
        unshown = 0  # a line read but left out because of the character cap
        while len(shown_lines) < want:
            raw = f.readline()
            if not raw:
                break
            text = raw.decode("utf-8", errors="replace").removesuffix("\n").removesuffix("\r")
            entry = f"{n + 1:>6}\t{_cut_line(text)}"
            if shown_lines and used + len(entry) + 1 > MAX_READ_CHARS:
                unshown = 1
                capped = True
                break
            shown_lines.append(entry)
            used += len(entry) + 1
            n += 1
        rest = unshown + _count_lines(f)
    total = n + rest
    if not shown_lines:
        if total == 0 and start == 1:
            return ToolOutput(
                content=f"{shown} is empty.",
                details={"path": shown, "start": 1, "end": 0, "total_lines": 0},
            )
        raise WorkspaceError(f"offset {start} is past the end of {shown} ({total} lines).")
    text = "\n".join(shown_lines)
    if rest:
        why = (
            f" (one read shows at most {MAX_LINES} lines or {MAX_READ_CHARS} characters)"
            if capped
            else ""
        )
        text += f"\n\n[Lines {start}-{n} of {total}{why}. Use offset={n + 1} to read on.]"
    return ToolOutput(
        content=text,
        details={
            "path": shown,
            "start": start,
            "end": n,
            "total_lines": total,
            "truncated": bool(rest),
        },
    )


def _line_count(text: str) -> int:
    return text.count("\n") + (bool(text) and not text.endswith("\n"))


def _lines(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"


def _write_all(real: str, shown: str, data: bytes, flags: int) -> None:
    fd = open_regular(real, shown, flags)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def write_file(real: str, shown: str, content: str) -> ToolOutput:
    """Create or overwrite a UTF-8 text file, creating its parent folders."""
    if os.path.isdir(real):
        raise WorkspaceError(f"{shown} is a directory; give the path of a file.")
    existed = os.path.lexists(real)
    try:
        os.makedirs(os.path.dirname(real), exist_ok=True)
    except FileExistsError:
        raise WorkspaceError(f"{shown}: a component of the path is a file, not a folder.") from None
    except OSError as exc:
        raise os_error(exc, shown) from None
    data = content.encode("utf-8")
    _write_all(real, shown, data, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    verb = "Overwrote" if existed else "Created"
    lines = _line_count(content)
    return ToolOutput(
        content=f"{verb} {shown} ({len(data)} bytes, {_lines(lines)}).",
        details={"path": shown, "bytes": len(data), "lines": lines, "created": not existed},
    )


MAX_LISTED_MATCHES = 20
"""How many match positions an ambiguous ``edit`` error lists."""


def _positions(text: str, old: str) -> list[int]:
    found: list[int] = []
    i = text.find(old)
    while i >= 0:
        found.append(i)
        i = text.find(old, i + len(old))
    return found


def _lines_of(text: str, positions: list[int]) -> list[int]:
    lines: list[int] = []
    line, last = 1, 0
    for p in positions:
        line += text.count("\n", last, p)
        last = p
        lines.append(line)
    return lines


def edit_file(real: str, shown: str, old: str, new: str) -> ToolOutput:
    """Replace the one exact occurrence of ``old`` with ``new``.

    Raises:
        WorkspaceError: ``old`` is empty or equal to ``new``, the file is not UTF-8 text,
            or ``old`` occurs zero or several times (the message says how many and at
            which lines).
    """
    if not old:
        raise WorkspaceError("old is empty: give the exact text to replace.")
    if old == new:
        raise WorkspaceError("old and new are the same text: there is nothing to change.")
    fd = open_regular(real, shown)
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise WorkspaceError(f"{shown} is not UTF-8 text; edit only changes text files.") from None
    positions = _positions(text, old)
    if not positions:
        hint = ""
        if "\r\n" in text and "\n" in old and old.replace("\n", "\r\n") in text:
            hint = " The file uses CRLF line endings: write them as \\r\\n in old."
        raise WorkspaceError(
            f"old was not found in {shown} (0 matches). It must match exactly, whitespace "
            f"and line breaks included: read the file and copy the text.{hint}"
        )
    if len(positions) > 1:
        listed = _lines_of(text, positions[:MAX_LISTED_MATCHES])
        where = ", ".join(str(n) for n in listed)
        if len(positions) > MAX_LISTED_MATCHES:
            where += ", …"
        raise WorkspaceError(
            f"old matches {len(positions)} times in {shown} (at lines {where}); it must "
            "match exactly once. Include more of the surrounding lines to make it unique."
        )
    at = positions[0]
    updated = text[:at] + new + text[at + len(old) :]
    _write_all(real, shown, updated.encode("utf-8"), os.O_WRONLY | os.O_TRUNC)
    line = _lines_of(text, [at])[0]
    return ToolOutput(
        content=(
            f"Edited {shown}: replaced 1 occurrence at line {line} "
            f"({_lines(_line_count(old))} → {_lines(_line_count(new))})."
        ),
        details={"path": shown, "line": line},
    )


def list_dir(real: str, shown: str) -> ToolOutput:
    """The entries of a directory, sorted: folders end in ``/``, symlinks in ``@``."""
    try:
        with os.scandir(real) as it:
            entries = sorted(it, key=lambda e: e.name)
    except NotADirectoryError:
        raise WorkspaceError(f"{shown} is not a directory; use read for files.") from None
    except OSError as exc:
        raise os_error(exc, shown) from None
    dirs: list[str] = []
    files: list[str] = []
    links: list[str] = []
    lines: list[str] = []
    for e in entries[:MAX_LS_ENTRIES]:
        try:
            if e.is_symlink():
                links.append(e.name)
                lines.append(f"{e.name}@")
            elif e.is_dir(follow_symlinks=False):
                dirs.append(e.name)
                lines.append(f"{e.name}/")
            else:
                files.append(e.name)
                lines.append(e.name)
        except OSError:
            continue  # vanished while listing
    text = "\n".join(lines) if lines else f"{shown} is an empty directory."
    if len(entries) > MAX_LS_ENTRIES:
        text += f"\n\n[{len(entries)} entries; showing the first {MAX_LS_ENTRIES}.]"
    return ToolOutput(
        content=text,
        details={
            "path": shown,
            "dirs": dirs,
            "files": files,
            "links": links,
            "total": len(entries),
        },
    )
