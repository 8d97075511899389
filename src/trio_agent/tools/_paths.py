"""Confinement: every path a tool touches is resolved against the workspace root.

Theory of operation: a path the model gives is joined to the root (an absolute path
stays absolute), then resolved with :func:`os.path.realpath`, which follows every symlink
and ``..`` the way the kernel would. What resolves to the root or below is allowed (also a
``..`` or an absolute path that stays inside); anything else is refused with a
:class:`WorkspaceError` saying why. Tools then work on the *resolved* path and open files
with ``O_NOFOLLOW``, so a symlink swapped in for the last component after the check is
refused by the kernel rather than followed. (A directory component swapped for a symlink
between the check and the open is not caught: the workspace guards a model against
mistakes and prompt-injected paths, not against a local attacker racing it.)

The helpers here do file-system calls and so run in a worker thread, never on the trio
loop.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["Root", "WorkspaceError", "open_regular"]


class WorkspaceError(Exception):
    """A workspace tool refused or failed; the message is the tool result the model sees."""


class Root:
    """The resolved root of a workspace, and the confinement check."""

    __slots__ = ("_prefix", "path")

    def __init__(self, root: str | os.PathLike[str]) -> None:
        path = os.path.realpath(os.fspath(root))
        if not os.path.isdir(path):
            raise NotADirectoryError(f"workspace root is not a directory: {root}")
        self.path = path
        self._prefix = path if path.endswith(os.sep) else path + os.sep

    def contains(self, real: str) -> bool:
        """Whether the resolved path ``real`` is the root or below it."""
        return real == self.path or real.startswith(self._prefix)

    def resolve(self, user_path: str) -> str:
        """Resolve ``user_path`` (relative to the root, or absolute) inside the root.

        Raises:
            WorkspaceError: the path is empty, has a NUL byte, or resolves outside the
                root (the message says whether lexically or through a symlink).
        """
        if not user_path:
            raise WorkspaceError("The path is empty; give a path relative to the workspace.")
        if "\x00" in user_path:
            raise WorkspaceError(f"The path {user_path!r} contains a NUL byte.")
        joined = os.path.join(self.path, user_path)
        real = os.path.realpath(joined)
        if self.contains(real):
            return real
        if not self.contains(os.path.normpath(joined)):
            raise WorkspaceError(
                f"Refused: {user_path} is outside the workspace ({self.path}). "
                "Only paths inside it can be used."
            )
        raise WorkspaceError(
            f"Refused: {user_path} goes through a symlink to {real}, which is outside the "
            f"workspace ({self.path}). Only paths inside it can be used."
        )

    def display(self, real: str) -> str:
        """``real`` relative to the root (``.`` for the root itself), for messages."""
        if real == self.path:
            return "."
        return os.path.relpath(real, self.path)


def open_regular(real: str, shown: str, flags: int = os.O_RDONLY) -> int:
    """Open the regular file ``real`` without following a final symlink; return the fd.

    ``O_NONBLOCK`` keeps a FIFO from blocking the open; anything but a regular file is
    refused after ``fstat``.

    Raises:
        WorkspaceError: not found, a directory, not a regular file, or another OS error
            (with a readable message naming ``shown``).
    """
    try:
        # 0o666: a created file gets the usual permissions (minus umask), never +x.
        fd = os.open(real, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise os_error(exc, shown) from None
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
    # Regular files ignore O_NONBLOCK, but clear it so nothing downstream is surprised.
    os.set_blocking(fd, True)
    return fd


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
