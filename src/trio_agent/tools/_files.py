"""read, write, edit and ls: the synchronous cores, run in a worker thread.

Each function takes the workspace :class:`Root` and the path as the model wrote it
(``shown``, used in messages), opens it beneath the root (see ``_paths``), and raises
:class:`WorkspaceError` with the text the model should see.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from typing import TYPE_CHECKING

from .._core import ToolOutput
from ._paths import (
    WorkspaceError,
    check_regular,
    locate,
    open_dir,
    open_file,
    os_error,
    show_name,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._paths import Located, Root

__all__ = [
    "MAX_EDIT_BYTES",
    "MAX_LINES",
    "MAX_LINE_CHARS",
    "MAX_LS_ENTRIES",
    "MAX_READ_CHARS",
    "edit_file",
    "list_dir",
    "looks_binary",
    "read_file",
    "replace_file",
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
MAX_EDIT_BYTES = 10 * 1024 * 1024
"""edit refuses larger files (it holds the file, decoded, in memory)."""
_CHUNK = 1 << 20
_KEEP = MAX_LINE_CHARS * 4
"""Bytes of a line read keeps: enough for MAX_LINE_CHARS characters of any width."""
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _no_check() -> None:
    pass


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


def _cut_line(text: str, more_bytes: int = 0) -> str:
    """``text`` cut to :data:`MAX_LINE_CHARS`, with a note on what is missing: in
    characters when the whole line was read, in bytes when only its start was (a line
    longer than ``_KEEP`` bytes is measured, never decoded)."""
    if len(text) <= MAX_LINE_CHARS and not more_bytes:
        return text
    shown = text[:MAX_LINE_CHARS]
    if not more_bytes:
        return f"{shown} … [line cut: {len(text) - MAX_LINE_CHARS} more characters]"
    left = len(text[MAX_LINE_CHARS:].encode("utf-8", errors="replace")) + more_bytes
    return f"{shown} … [line cut: {left} more bytes]"


class _Lines:
    """The lines of an open file, read in bounded chunks (never a whole line at once).

    Each line comes as its first :data:`_KEEP` bytes plus how many bytes follow them, so
    memory stays bounded whatever the file holds (one 1 GiB line included).
    ``check`` is called between chunks (a cancelled read stops there).
    """

    def __init__(self, fd: int, check: Callable[[], None]) -> None:
        self._fd = fd
        self._check = check
        self._buf = b""
        self._pos = 0
        self._eof = False

    def _fill(self) -> bool:
        if self._eof:
            return False
        self._check()
        chunk = os.read(self._fd, _CHUNK)
        if not chunk:
            self._eof = True
            return False
        self._buf = self._buf[self._pos :] + chunk if self._pos < len(self._buf) else chunk
        self._pos = 0
        return True

    def next(self, keep: bool = True) -> tuple[bytes, int] | None:
        """The next line (without its newline) cut to :data:`_KEEP` bytes, and how many
        bytes of it were left out; None at the end. ``keep=False`` keeps nothing. The
        part left out is only measured, never copied or decoded."""
        head = bytearray()
        rest = 0
        seen = False
        while True:
            end = self._buf.find(b"\n", self._pos)
            stop = len(self._buf) if end < 0 else end
            if stop > self._pos or end >= 0:
                seen = True
            room = _KEEP - len(head) if keep else 0
            take = min(room, stop - self._pos)
            if take > 0:
                head += self._buf[self._pos : self._pos + take]
            rest += stop - self._pos - max(take, 0)
            self._pos = stop if end < 0 else end + 1
            if end >= 0:
                break
            if not self._fill():
                if not seen:
                    return None
                break
        return bytes(head), rest

    def count_rest(self) -> int:
        """Lines from here to the end (a last line without newline counts)."""
        count = self._buf.count(b"\n", self._pos)
        last = self._buf[-1:] if len(self._buf) > self._pos else b"\n"
        self._pos = len(self._buf)
        while self._fill():
            count += self._buf.count(b"\n")
            last = self._buf[-1:]
            self._pos = len(self._buf)
        return count + (last != b"\n")


def read_file(
    root: Root,
    shown: str,
    offset: int | None,
    limit: int | None,
    check: Callable[[], None] = _no_check,
) -> ToolOutput:
    """Numbered lines of a text file, from line ``offset`` (1-based), at most ``limit``.

    Output is capped at :data:`MAX_LINES` lines and :data:`MAX_READ_CHARS` characters;
    when lines are left, a last note says which were shown and how to read on. The file
    is read in chunks and each line is cut before it is decoded, so memory stays bounded
    whatever the file's size or line length (counting the lines left still reads to the
    end; ``check`` between chunks lets a cancelled read stop).
    """
    if offset is not None and offset < 1:
        raise WorkspaceError(f"offset must be 1 or more (lines are numbered from 1), got {offset}.")
    if limit is not None and limit < 1:
        raise WorkspaceError(f"limit must be 1 or more, got {limit}.")
    start = offset or 1
    fd = open_file(root, shown)
    try:
        head = os.pread(fd, SNIFF, 0)
        if looks_binary(head):
            size = os.fstat(fd).st_size
            raise WorkspaceError(
                f"{shown} looks like a binary file ({size} bytes, not UTF-8 text); "
                "read only shows text files."
            )
        lines = _Lines(fd, check)
        n = 0  # lines consumed so far
        while n < start - 1 and lines.next(keep=False) is not None:
            n += 1
        capped = limit is None or limit > MAX_LINES
        want = MAX_LINES if limit is None or capped else limit
        shown_lines: list[str] = []
        used = 0
        unshown = 0  # a line read but left out because of the character cap
        while len(shown_lines) < want:
            line = lines.next()
            if line is None:
                break
            raw, more = line
            text = raw.decode("utf-8", errors="replace").removesuffix("\r")
            entry = f"{n + 1:>6}\t{_cut_line(text, more)}"
            if shown_lines and used + len(entry) + 1 > MAX_READ_CHARS:
                unshown = 1
                capped = True
                break
            shown_lines.append(entry)
            used += len(entry) + 1
            n += 1
        rest = unshown + lines.count_rest()
    finally:
        os.close(fd)
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


def _write_whole(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def replace_file(at: Located, shown: str, data: bytes, old: os.stat_result | None) -> None:
    """Put ``data`` in the file ``at`` names, atomically: a temporary file in the same
    folder (created through the folder's descriptor) is written, flushed to disk and
    renamed over the name. ``old`` is the file being replaced (its permission bits are
    kept) or None for a new file (the usual permissions, minus umask, never +x).

    The rename replaces the *name*: a hard link's other names keep the old content, and
    nothing is ever written through a link to outside the workspace. Owner, extended
    attributes and ACLs of the old file are not carried over (the owner is, when allowed).

    Raises:
        WorkspaceError: the write failed (disk full, file too large, permissions…); the
            temporary file is removed and the old file is untouched, as the message says.
    """
    # At most 214 bytes: a temporary name stays within the 255-byte limit of a name.
    tmp = f".{os.fsdecode(os.fsencode(at.name)[:200])}.{secrets.token_hex(4)}.tmp"
    try:
        fd = os.open(tmp, _TMP_FLAGS, 0o666, dir_fd=at.folder)
    except OSError as exc:
        raise _not_written(shown, exc, old) from None
    try:
        try:
            if old is not None:
                os.fchmod(fd, stat.S_IMODE(old.st_mode))
                if (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
                    with contextlib.suppress(OSError):
                        os.fchown(fd, old.st_uid, old.st_gid)
            _write_whole(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, at.name, src_dir_fd=at.folder, dst_dir_fd=at.folder)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=at.folder)
        raise _not_written(shown, exc, old) from None
    with contextlib.suppress(OSError):  # not every file system syncs a folder
        os.fsync(at.folder)


def _not_written(shown: str, exc: OSError, old: os.stat_result | None) -> WorkspaceError:
    reason = (exc.strerror or type(exc).__name__).rstrip(".")
    kept = f"{shown} was left unchanged" if old is not None else f"{shown} was not created"
    return WorkspaceError(f"Could not write {shown}: {reason}. Nothing was written: {kept}.")


def _lstat(at: Located) -> os.stat_result | None:
    try:
        return os.stat(at.name, dir_fd=at.folder, follow_symlinks=False)
    except FileNotFoundError:
        return None


def write_file(root: Root, shown: str, content: str) -> ToolOutput:
    """Create or overwrite a UTF-8 text file, creating its parent folders.

    The write is atomic (see :func:`replace_file`): a failure leaves the old file whole.
    """
    data = content.encode("utf-8")
    with locate(root, shown, create=True) as at:
        try:
            old = _lstat(at)
        except OSError as exc:
            raise os_error(exc, shown) from None
        if old is not None and stat.S_ISDIR(old.st_mode):
            raise WorkspaceError(f"{shown} is a directory; give the path of a file.")
        if old is not None and not stat.S_ISREG(old.st_mode):
            raise WorkspaceError(f"{shown} is not a regular file.")
        replace_file(at, shown, data, old)
    verb = "Overwrote" if old is not None else "Created"
    lines = _line_count(content)
    return ToolOutput(
        content=f"{verb} {shown} ({len(data)} bytes, {_lines(lines)}).",
        details={"path": shown, "bytes": len(data), "lines": lines, "created": old is None},
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


def edit_file(root: Root, shown: str, old: str, new: str) -> ToolOutput:
    """Replace the one exact occurrence of ``old`` with ``new``.

    The file is read through a descriptor opened beneath the root and written back
    atomically in the same folder (see :func:`replace_file`), so a failure leaves it
    whole. Files over :data:`MAX_EDIT_BYTES` are refused.

    Raises:
        WorkspaceError: ``old`` is empty or equal to ``new``, the file is too big or not
            UTF-8 text, ``old`` occurs zero or several times (the message says how many
            and at which lines), or the write failed (the file is unchanged).
    """
    if not old:
        raise WorkspaceError("old is empty: give the exact text to replace.")
    if old == new:
        raise WorkspaceError("old and new are the same text: there is nothing to change.")
    with locate(root, shown, create=False) as at:
        try:
            fd = os.open(at.name, _READ_FLAGS, dir_fd=at.folder)
        except OSError as exc:
            raise os_error(exc, shown) from None
        fd = check_regular(fd, shown)
        try:
            before = os.fstat(fd)
            if before.st_size > MAX_EDIT_BYTES:
                raise WorkspaceError(
                    f"{shown} is {before.st_size} bytes; edit changes files up to "
                    f"{MAX_EDIT_BYTES // (1 << 20)} MB. Use bash (for example sed) for it."
                )
            data = _read_upto(fd, MAX_EDIT_BYTES + 1)
        finally:
            os.close(fd)
        if len(data) > MAX_EDIT_BYTES:
            raise WorkspaceError(f"{shown} grew past {MAX_EDIT_BYTES} bytes while it was read.")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise WorkspaceError(
                f"{shown} is not UTF-8 text; edit only changes text files."
            ) from None
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
        at_ = positions[0]
        updated = text[:at_] + new + text[at_ + len(old) :]
        replace_file(at, shown, updated.encode("utf-8"), before)
    line = _lines_of(text, [at_])[0]
    return ToolOutput(
        content=(
            f"Edited {shown}: replaced 1 occurrence at line {line} "
            f"({_lines(_line_count(old))} → {_lines(_line_count(new))})."
        ),
        details={"path": shown, "line": line},
    )


def _read_upto(fd: int, limit: int) -> bytes:
    parts: list[bytes] = []
    got = 0
    while got < limit:
        chunk = os.read(fd, min(_CHUNK, limit - got))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def list_dir(root: Root, shown: str) -> ToolOutput:
    """The entries of a directory, sorted: folders end in ``/``, symlinks in ``@``.

    Names that are not UTF-8 are shown escaped (see :func:`show_name`).
    """
    fd, _ = open_dir(root, shown)
    try:
        with os.scandir(fd) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        raise os_error(exc, shown) from None
    finally:
        os.close(fd)
    dirs: list[str] = []
    files: list[str] = []
    links: list[str] = []
    lines: list[str] = []
    for e in entries[:MAX_LS_ENTRIES]:
        name = show_name(e.name)
        try:
            if e.is_symlink():
                links.append(name)
                lines.append(f"{name}@")
            elif e.is_dir(follow_symlinks=False):
                dirs.append(name)
                lines.append(f"{name}/")
            else:
                files.append(name)
                lines.append(name)
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
