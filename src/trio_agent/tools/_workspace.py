"""``workspace(root)``: the file and shell tools a coding agent needs, confined to a folder.

Every tool opens its paths beneath the root one component at a time, from descriptor to
descriptor (see ``_paths``), and does its file work in one worker thread per call, so
the trio loop never waits on the disk. Read-only
tools (read, ls, find, grep) abandon their thread when cancelled (it has no side effect
and stops soon after); write and edit wait for their thread, so a cancelled write either
happened whole or not at all. Writes and edits of one file are serialized by a per-path
``trio.Lock`` shared by every run using the same tools; different files are written in
parallel.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias, TypeVar, final

import msgspec
import trio
from msgspec import UNSET, UnsetType

# Needed at run time: @tool reads the annotations of the functions below.
from .._core import Tool, ToolContext, ToolOutput, tool
from ._bash import (
    DEFAULT_TIMEOUT,
    MAX_OUTPUT_CHARS,
    MAX_OUTPUT_LINES,
    USES_RUNNER,
    run_bash,
)
from ._files import MAX_LINES, MAX_READ_CHARS, edit_file, list_dir, read_file, write_file
from ._paths import Root, locate
from ._search import (
    MAX_FIND_RESULTS,
    MAX_GREP_FILE,
    MAX_GREP_MATCHES,
    SKIP_DIRS,
    find_paths,
    grep_files,
)

if TYPE_CHECKING:
    import os
    from collections.abc import Callable
    from types import TracebackType

__all__ = ["BASH_KILLS", "PathLocks", "Workspace", "workspace"]

BASH_KILLS = (
    "When the command ends, times out or is cancelled, every process it started is "
    "killed, also ones that left its process group (setsid, nohup, daemons); only "
    "processes started through another service (systemd-run, at, a container runtime) "
    "are out of reach."
    if USES_RUNNER
    else "When the command ends, times out or is cancelled, its process group is killed; "
    "a process that left the group (setsid, a daemon) is not."
)
"""What the bash tool's description says it kills (it depends on the system)."""


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = trio.Lock()
        self.users = 0


class _Held:
    __slots__ = ("_entry", "_key", "_locks")

    def __init__(self, locks: PathLocks, key: str) -> None:
        self._locks = locks
        self._key = key
        self._entry: _Entry | None = None

    async def __aenter__(self) -> None:
        table = self._locks._table
        entry = table.get(self._key)
        if entry is None:
            entry = table[self._key] = _Entry()
        entry.users += 1
        self._entry = entry
        try:
            await entry.lock.acquire()
        except BaseException:
            self._leave()
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._entry is not None
        self._entry.lock.release()
        self._leave()

    def _leave(self) -> None:
        assert self._entry is not None
        self._entry.users -= 1
        if self._entry.users == 0:
            del self._locks._table[self._key]


@final
class PathLocks:
    """One ``trio.Lock`` per path, made on first use and dropped when nobody holds or
    waits for it (so the table stays small, and no lock outlives one trio run)."""

    def __init__(self) -> None:
        self._table: dict[str, _Entry] = {}

    def hold(self, path: str) -> _Held:
        """``async with locks.hold(path):`` — waits (a checkpoint) for the path's lock."""
        return _Held(self, path)

    def users(self, path: str) -> int:
        """How many tasks hold or wait for ``path``'s lock."""
        entry = self._table.get(path)
        return 0 if entry is None else entry.users

    def __len__(self) -> int:
        """How many paths have a lock held or waited for."""
        return len(self._table)


_PATH_TEXT = "Path relative to the workspace (or absolute inside it)."
_Path: TypeAlias = Annotated[str, msgspec.Meta(description=_PATH_TEXT)]
_Lines: TypeAlias = Annotated[int, msgspec.Meta(ge=1)]
_Seconds: TypeAlias = Annotated[
    float, msgspec.Meta(gt=0, description=f"Seconds (default {DEFAULT_TIMEOUT:g}).")
]
T = TypeVar("T")


def _given(value: T | UnsetType, otherwise: T) -> T:
    """``otherwise`` when the model left the argument out. A parameter typed
    ``X | UnsetType = UNSET`` is optional with no default in the schema (and null is
    refused, as in a schema written by hand), and the function sees UNSET."""
    return otherwise if isinstance(value, UnsetType) else value


@final
class Workspace:
    """The state the workspace tools share: the resolved root and the write locks.

    Args:
        root: the folder the tools work in; it must exist. Symlinks in it are resolved.
        allow_bash: include the ``bash`` tool.

    Raises:
        NotADirectoryError: ``root`` is not an existing folder.
    """

    def __init__(self, root: str | os.PathLike[str], *, allow_bash: bool = True) -> None:
        self.root = Root(root)
        self.allow_bash = allow_bash
        self.locks = PathLocks()

    def tools(self) -> tuple[Tool, ...]:
        """The tools, in this order: read, write, edit, ls, find, grep, bash.

        Each is built with ``@tool`` from the annotated function below: the annotations
        and ``Args:`` sections are the JSON Schema the model sees. Unknown arguments are
        refused, as for every ``@tool`` tool (see :func:`workspace`).
        """
        check = trio.from_thread.check_cancelled

        @tool(
            label="Read file",
            description=(
                "Read a text file. Lines come numbered (1-based). At most "
                f"{MAX_LINES} lines or {MAX_READ_CHARS} characters per call: use offset "
                "and limit to read a long file in parts. Binary files are refused."
            ),
        )
        async def read(
            path: _Path,
            offset: _Lines | UnsetType = UNSET,
            limit: _Lines | UnsetType = UNSET,
        ) -> ToolOutput:
            """The arguments (the description is given to ``@tool``).

            Args:
                offset: First line to read (1-based).
                limit: How many lines to read at most.
            """
            return await self._read_only(
                read_file, path, _given(offset, None), _given(limit, None), check
            )

        @tool(
            label="Write file",
            description=(
                "Create or overwrite a text file with the given content; missing parent "
                "folders are created."
            ),
        )
        async def write(path: _Path, content: str) -> ToolOutput:
            return await self._locked_write(write_file, path, content, create=True)

        @tool(
            label="Edit file",
            description=(
                "Replace one exact piece of text in a file. old must match exactly once, "
                "whitespace and line breaks included; include surrounding lines to make "
                "it unique."
            ),
        )
        async def edit(path: _Path, old: str, new: str) -> ToolOutput:
            """The arguments (the description is given to ``@tool``).

            Args:
                old: The exact text to replace.
                new: The text to put instead.
            """
            return await self._locked_write(edit_file, path, old, new, create=False)

        @tool(
            label="List folder",
            description=(
                "List a folder's entries, sorted; folders end in /, symlinks in @. A name "
                "that is not UTF-8 shows each bad byte as \\xNN (and a backslash in it "
                "as \\\\); every file tool takes the name back in that form."
            ),
        )
        async def ls(path: _Path = ".") -> ToolOutput:
            return await self._read_only(list_dir, path or ".")

        @tool(
            label="Find files",
            description=(
                "Find paths matching a glob: * and ? within a name, ** across folders; a "
                "pattern without / matches names at any depth (*.py). At most "
                f"{MAX_FIND_RESULTS} results; skips {', '.join(sorted(SKIP_DIRS))}."
            ),
        )
        async def find(pattern: str, path: str | UnsetType = UNSET) -> ToolOutput:
            """The arguments (the description is given to ``@tool``).

            Args:
                pattern: A glob, like src/**/*.py.
                path: Folder to search (default: all).
            """
            return await self._read_only(find_paths, pattern, _given(path, "") or ".", check)

        @tool(
            label="Search text",
            description=(
                "Search files for lines matching a regular expression (RE2 syntax: like "
                "Python's, without backreferences or look-around); prints path:line: "
                f"text. At most {MAX_GREP_MATCHES} matches. Files over "
                f"{MAX_GREP_FILE // (1 << 20)} MB, binary and unreadable files are skipped "
                "and named in a note; the folders find skips are not entered."
            ),
        )
        async def grep(
            pattern: str, path: str | UnsetType = UNSET, ignore_case: bool = False
        ) -> ToolOutput:
            """The arguments (the description is given to ``@tool``).

            Args:
                pattern: A regular expression.
                path: A file or folder to search (default: all).
            """
            return await self._read_only(
                grep_files, pattern, _given(path, "") or ".", ignore_case, check
            )

        tools = [read, write, edit, ls, find, grep]
        if self.allow_bash:

            @tool(
                label="Run command",
                description=(
                    "Run a bash command in the workspace folder (stdin is empty). "
                    "Returns its output (stdout and stderr, the last "
                    f"{MAX_OUTPUT_LINES} lines or {MAX_OUTPUT_CHARS} characters) and "
                    f"exit code; a non-zero exit is an error. {BASH_KILLS} It runs with "
                    "the user's rights and is not confined to the workspace folder (the "
                    "file tools are)."
                ),
            )
            async def bash(
                command: str,
                timeout: _Seconds | UnsetType = UNSET,  # noqa: ASYNC109  # the model's argument
                *,
                ctx: ToolContext,
            ) -> ToolOutput:
                return await run_bash(
                    self.root.path, command, _given(timeout, DEFAULT_TIMEOUT), ctx
                )

            tools.append(bash)
        return tuple(tools)

    # --- executes -----------------------------------------------------------------------

    async def _read_only(self, core: Callable[..., ToolOutput], *args: Any) -> ToolOutput:
        """Run ``core(root, *args)`` in a thread; cancel abandons the thread.

        The thread has no side effect, and it stops at its next ``check``
        (``trio.from_thread.check_cancelled``, passed last where the core takes it).
        """
        return await trio.to_thread.run_sync(
            partial(core, self.root, *args), abandon_on_cancel=True
        )

    async def _locked_write(
        self, core: Callable[..., ToolOutput], path: str, *rest: Any, create: bool
    ) -> ToolOutput:
        """Run ``core(root, path, *rest)`` in a thread, holding the file's write lock.

        The lock is the file's path as resolved before the write (a symlink in the last
        place followed; ``create`` makes the missing folders). The thread is not abandoned
        on cancel: a write happens whole or not at all.
        """

        def key() -> str:
            with locate(self.root, path, create=create) as at:
                return at.key(self.root)

        real = await trio.to_thread.run_sync(key, abandon_on_cancel=True)
        async with self.locks.hold(real):
            return await trio.to_thread.run_sync(partial(core, self.root, path, *rest))


def workspace(root: str | os.PathLike[str], *, allow_bash: bool = True) -> tuple[Tool, ...]:
    """The workspace tools for the folder ``root``: read, write, edit, ls, find, grep and
    (unless ``allow_bash=False``) bash.

    Every path is opened beneath ``root`` one component at a time, from folder
    descriptor to folder descriptor, so that no path — and no symlink swapped in while a
    tool runs — leads outside; a path that would is refused with an error result. ``..``
    and absolute paths that stay inside are allowed, and a symlink inside is followed
    under the same rules (each step must stay inside). find and grep never follow a
    symlink out. write and edit replace a file atomically (a temporary file in the same
    folder, flushed, renamed over it): a failure leaves the old file whole, and a hard
    link to a file outside is replaced, never written through. Writes to one file are
    serialized across every run using these tools; different files are written in
    parallel. bash runs with the user's rights and is not confined to ``root``. A
    tool's failure is an ``Exception`` whose message is the error result.

    An argument a tool does not have (``read(path=..., encoding="utf-8")``) is refused,
    never dropped: the schemas say ``additionalProperties: false``, so the call does
    nothing and its error result names the argument (``'encoding' was unexpected``); the
    model reads it and can call again without it. The transcript stays paired: the
    refused call has its result like any other.

    Raises:
        NotADirectoryError: ``root`` is not an existing folder.
    """
    return Workspace(root, allow_bash=allow_bash).tools()
