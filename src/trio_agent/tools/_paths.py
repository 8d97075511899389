"""Confinement: every path a tool touches is opened beneath the workspace root.

Theory of operation: a path the model gives is split into components (an absolute path
must start with the root; the rest of it is used). The walk starts from a descriptor of
the root and opens one component at a time relative to the descriptor of the folder
before it, with ``O_NOFOLLOW`` (and ``O_DIRECTORY`` for folders), so the kernel never
follows a symlink on its own. ``..`` goes back to the folder before (never above the
root). A symlink met on the way is read with ``readlink`` and its text is walked again
under the same rules: a relative target from the folder holding the link, an absolute
one only if it names a place inside the root; at most :data:`MAX_LINKS` links per path.
The tool then reads, lists or writes through the descriptor it got — nothing is checked by
name and opened again by name, so swapping a folder for a symlink while a tool runs
cannot carry it outside (the model is Linux's ``openat2(RESOLVE_BENEATH)``). A path that
would leave the root (lexically, or through a symlink) is refused with a
:class:`WorkspaceError` saying why.

File names that are not UTF-8 reach Python as strings with lone surrogates
(``os.fsdecode``). Tools show them with :func:`show_name`: each undecodable byte as
``\\xNN`` (and a backslash in such a name as ``\\\\``); a path component given back in that
form is found again (:func:`unescape_name`), the literal name winning if both exist.

Everything here does file-system calls and so runs in a worker thread, never on the trio
loop.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections import deque
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "MAX_LINKS",
    "Located",
    "Refused",
    "Root",
    "WorkspaceError",
    "check_regular",
    "locate",
    "open_any",
    "open_dir",
    "open_file",
    "os_error",
    "show_name",
    "unescape_name",
]

T = TypeVar("T")

MAX_LINKS = 40
"""Symlinks one path may go through (the kernel's own bound) before it counts as a loop."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK keeps a FIFO from blocking the open; regular files and folders ignore it.
_ANY_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class WorkspaceError(Exception):
    """A workspace tool refused or failed; the message is the tool result the model sees."""


class Refused(WorkspaceError):
    """The path leads outside the workspace (lexically or through a symlink)."""


class _Link(Exception):
    """The component just tried is a symlink with this target text."""

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.target = target


_ESCAPE = re.compile(r"\\(\\|x[0-9a-fA-F]{2})")


def show_name(name: str) -> str:
    """``name`` as tools print it: unchanged when it is valid text; otherwise each
    undecodable byte as ``\\xNN`` and each backslash as ``\\\\`` (lossless, see
    :func:`unescape_name`)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raw = os.fsencode(name).replace(b"\\", b"\\\\")
        return raw.decode("utf-8", errors="backslashreplace")
    return name


def unescape_name(shown: str) -> str:
    """The file-system name that :func:`show_name` printed as ``shown``."""
    out = bytearray()
    last = 0
    for m in _ESCAPE.finditer(shown):
        out += shown[last : m.start()].encode("utf-8", errors="surrogateescape")
        code = m.group(1)
        out += b"\\" if code == "\\" else bytes([int(code[1:], 16)])
        last = m.end()
    out += shown[last:].encode("utf-8", errors="surrogateescape")
    return os.fsdecode(bytes(out))


class Root:
    """The resolved root of a workspace."""

    __slots__ = ("_given", "_prefix", "path")

    def __init__(self, root: str | os.PathLike[str]) -> None:
        path = os.path.realpath(os.fspath(root))
        if not os.path.isdir(path):
            raise NotADirectoryError(f"workspace root is not a directory: {root}")
        self.path = path
        self._prefix = path if path.endswith(os.sep) else path + os.sep
        self._given = os.path.abspath(os.fspath(root))

    def contains(self, real: str) -> bool:
        """Whether the absolute path ``real`` is the root or below it (lexically)."""
        return real == self.path or real.startswith(self._prefix)

    def inside(self, absolute: str) -> list[str] | None:
        """The components of ``absolute`` below the root (as resolved, or as it was
        given), or None when it does not start with the root, as written or once
        normalised (``//``, ``..``)."""
        for path in (absolute, os.path.normpath(absolute)):
            for base in (self.path, self._given):
                if path == base or path.startswith(base.rstrip("/") + "/"):
                    return _parts(path[len(base) :])
        return None

    def display(self, names: list[str] | tuple[str, ...]) -> str:
        """Root-relative components as a path for messages (``.`` for the root)."""
        return show_name("/".join(names)) if names else "."

    def open(self) -> int:
        """A descriptor of the root folder (the caller closes it)."""
        return os.open(self.path, _DIR_FLAGS)

    def refusal(self, user_path: str, link: tuple[str, str] | None = None) -> Refused:
        """The error for ``user_path`` leading outside: lexically, or through a symlink
        (``link``: its root-relative path and target; the message says where the path
        resolves, for the model's benefit)."""
        joined = os.path.join(self.path, user_path)
        if link is None or not self.contains(os.path.normpath(joined)):
            return Refused(
                f"Refused: {user_path} is outside the workspace ({self.path}). "
                "Only paths inside it can be used."
            )
        real = os.path.realpath(joined)
        if self.contains(real):  # out through a link and back in: name the link
            where = f"the symlink {show_name(link[0])} (to {show_name(link[1])})"
        else:
            where = f"a symlink to {show_name(real)}"
        return Refused(
            f"Refused: {user_path} goes through {where}, which is outside the "
            f"workspace ({self.path}). Only paths inside it can be used."
        )


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p and p != "."]


def _follow(parent: int, name: str, exc: OSError) -> None:
    """Raise :class:`_Link` if ``name`` in ``parent`` is a symlink, else ``exc``."""
    try:
        target = os.readlink(name, dir_fd=parent)
    except OSError:
        raise exc from None
    raise _Link(target)


def _existing(parent: int, name: str) -> str:
    """``name``, or the name it escapes (see :func:`show_name`) if only that exists."""
    if "\\" not in name:
        return name
    try:
        os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        alt = unescape_name(name)
        if alt != name:
            try:
                os.stat(alt, dir_fd=parent, follow_symlinks=False)
            except OSError:
                return name
            return alt
    except OSError:
        pass
    return name


def _open_folder(parent: int, name: str, create: bool) -> int:
    for _ in range(3):
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
            try:
                os.mkdir(name, 0o777, dir_fd=parent)
            except FileExistsError:
                pass  # made meanwhile: open it on the next round
        except OSError as exc:
            # A symlink opened with O_NOFOLLOW | O_DIRECTORY fails with ENOTDIR (or ELOOP).
            if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                _follow(parent, name, exc)
            raise
    raise OSError(errno.EAGAIN, "the folder kept changing while it was opened")


def _walk(
    root: Root,
    user_path: str,
    final: Callable[[int, str | None, list[str]], T],
    *,
    create: bool = False,
) -> T:
    """Walk ``user_path`` beneath ``root`` and call ``final(folder_fd, name, names)``.

    ``name`` is the last component (None when the path names a folder reached by the
    walk, such as ``.`` or ``src/..``), ``folder_fd`` the descriptor of the folder holding
    it and ``names`` that folder's root-relative components. ``final`` may raise
    :class:`_Link` (via :func:`_follow`) to have a symlink in the last place followed.
    Descriptors the walk opened are closed on return; ``final`` dups what it keeps.
    ``create`` makes missing folders on the way.

    Raises:
        Refused: the path leads outside the root.
        WorkspaceError: empty path, NUL byte, symlink loop; or ``final``'s own.
        OSError: from the file system (callers turn it into a message with :func:`os_error`).
    """
    if not user_path:
        raise WorkspaceError("The path is empty; give a path relative to the workspace.")
    if "\x00" in user_path:
        raise WorkspaceError(f"The path {user_path!r} contains a NUL byte.")
    if user_path.startswith("/"):
        start = root.inside(user_path)
        if start is None:
            raise root.refusal(user_path)
    else:
        start = _parts(user_path)
    todo = deque(start)
    fds = [root.open()]
    names: list[str] = []
    links = 0
    link: tuple[str, str] | None = None
    try:
        while True:
            if not todo:
                return final(fds[-1], None, names)
            part = todo.popleft()
            if part == "..":
                if len(fds) == 1:
                    raise root.refusal(user_path, link)
                os.close(fds.pop())
                names.pop()
                continue
            part = _existing(fds[-1], part)
            try:
                if not todo:
                    return final(fds[-1], part, names)
                fds.append(_open_folder(fds[-1], part, create))
                names.append(part)
                continue
            except _Link as found:
                target = found.target
            link = ("/".join([*names, part]), target)
            links += 1
            if links > MAX_LINKS:
                raise OSError(errno.ELOOP, "too many levels of symbolic links")
            if target.startswith("/"):
                inside = root.inside(target)
                if inside is None:
                    raise root.refusal(user_path, link)
                while len(fds) > 1:
                    os.close(fds.pop())
                names.clear()
                todo.extendleft(reversed(inside))
            else:
                todo.extendleft(reversed(_parts(target)))
    finally:
        for fd in fds:
            os.close(fd)


def check_regular(fd: int, shown: str) -> int:
    """``fd`` if it is a regular file (made blocking); else close it and raise."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        os.close(fd)
        raise os_error(exc, shown) from None
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise WorkspaceError(f"{shown} is a directory; use ls to list it.")
        raise WorkspaceError(f"{shown} is not a regular file.")
    os.set_blocking(fd, True)
    return fd


def _open_last(parent: int, name: str | None, names: list[str]) -> tuple[int, list[str]]:
    if name is None:
        return os.dup(parent), names[:]
    try:
        return os.open(name, _ANY_FLAGS, dir_fd=parent), [*names, name]
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            _follow(parent, name, exc)
        raise


def open_any(root: Root, user_path: str) -> tuple[int, list[str]]:
    """Open what ``user_path`` names (file, folder or other), beneath ``root``.

    Returns the descriptor (the caller closes it; opened read-only and non-blocking, so
    a FIFO does not hang) and its root-relative components.

    Raises:
        Refused: the path leads outside the root.
        WorkspaceError: any other failure, with a readable message naming ``user_path``.
    """
    try:
        return _walk(root, user_path, _open_last)
    except OSError as exc:
        raise os_error(exc, user_path) from None


def open_file(root: Root, user_path: str) -> int:
    """Open the regular file ``user_path`` for reading, beneath ``root``.

    Raises:
        WorkspaceError: refused, not found, a folder, not a regular file (with a
            readable message).
    """
    fd, _ = open_any(root, user_path)
    return check_regular(fd, user_path)


def open_dir(root: Root, user_path: str) -> tuple[int, list[str]]:
    """Open the folder ``user_path`` beneath ``root``; the descriptor and its components.

    Raises:
        WorkspaceError: refused, not found, or not a folder (the message says to use
            read for files).
    """
    fd, names = open_any(root, user_path)
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        os.close(fd)
        raise os_error(exc, user_path) from None
    if not stat.S_ISDIR(mode):
        os.close(fd)
        raise WorkspaceError(f"{user_path} is not a directory; use read for files.")
    return fd, names


class Located:
    """Where a file is or will be: the open folder holding it and the name in it.

    A context manager; leaving it closes the folder's descriptor.
    """

    __slots__ = ("folder", "name", "names")

    def __init__(self, folder: int, name: str, names: list[str]) -> None:
        self.folder = folder
        self.name = name
        self.names = names

    def key(self, root: Root) -> str:
        """The file's absolute path as resolved now (a name for per-file locks)."""
        return os.path.join(root.path, *self.names, self.name)

    def __enter__(self) -> Located:
        return self

    def __exit__(self, *exc_info: object) -> None:
        os.close(self.folder)


def locate(root: Root, user_path: str, *, create: bool) -> Located:
    """Find the folder and name of the file ``user_path``, beneath ``root``.

    A symlink in the last place is followed (under the same rules): writing through a
    link inside the workspace writes its target. The file itself need not exist;
    ``create`` makes missing folders on the way.

    Raises:
        WorkspaceError: refused, a folder, a missing folder (without ``create``), or a
            file in the middle of the path.
    """

    def last(parent: int, name: str | None, names: list[str]) -> Located:
        if name is None:
            raise IsADirectoryError(errno.EISDIR, "is a directory")
        try:
            os.readlink(name, dir_fd=parent)
        except OSError as exc:
            if exc.errno != errno.EINVAL and not isinstance(exc, FileNotFoundError):
                raise
        else:
            _follow(parent, name, OSError(errno.EINVAL, "changed while opened"))
        return Located(os.dup(parent), name, names[:])

    try:
        return _walk(root, user_path, last, create=create)
    except IsADirectoryError:
        raise WorkspaceError(f"{user_path} is a directory; give the path of a file.") from None
    except NotADirectoryError:
        if create:
            raise WorkspaceError(
                f"{user_path}: a component of the path is a file, not a folder."
            ) from None
        raise os_error(NotADirectoryError(), user_path) from None
    except OSError as exc:
        raise os_error(exc, user_path) from None


def os_error(exc: OSError, shown: str) -> WorkspaceError:
    """A readable :class:`WorkspaceError` for an ``OSError`` about ``shown``.

    The text never carries the absolute path the OS error would print.
    """
    if isinstance(exc, FileNotFoundError):
        return WorkspaceError(f"{shown}: no such file or directory.")
    if isinstance(exc, IsADirectoryError):
        return WorkspaceError(f"{shown} is a directory; use ls to list it.")
    if isinstance(exc, NotADirectoryError):
        return WorkspaceError(f"{shown}: a component of the path is not a directory.")
    if isinstance(exc, PermissionError):
        return WorkspaceError(f"{shown}: permission denied.")
    if exc.errno == errno.ELOOP:
        return WorkspaceError(
            f"Refused: {shown} is a symlink loop, or a symlink that changed after the path "
            "was checked."
        )
    reason = exc.strerror or type(exc).__name__
    return WorkspaceError(f"{shown}: {reason}.")
