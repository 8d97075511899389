"""Where an MCP server is: a command to run (stdio) or a URL (streamable HTTP).

These are plain descriptions; nothing starts until :func:`open_mcp_tools` enters. Each
opens its transport with :meth:`_transport`, an async context manager the SDK's
``Client`` accepts, inside the task that hosts the connection.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

import attrs
import httpx2
from mcp import StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client

from .._core import MAX_RESULT_CHARS, check_tool_name, seconds
from ._stdio import stdio_transport

if TYPE_CHECKING:
    from mcp.client import Transport

    from ._stdio import StderrTail

__all__ = ["McpServer", "StdioServer", "StreamableHttpServer"]

DEFAULT_CALL_TIMEOUT = 300.0
DEFAULT_START_TIMEOUT = 30.0
DEFAULT_MAX_RESULT_CHARS = MAX_RESULT_CHARS
"""A result's text is cut to this many characters by default (as the ``bash`` tool's)."""
MAX_PREFIX = 40
"""A prefix's most characters, so that ``{prefix}__{name}`` fits the model APIs' 64."""


def _names(value: Iterable[str] | None) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return frozenset((value,))
    return frozenset(value)


def check_prefix(prefix: str | None) -> None:
    """Raises ValueError unless ``prefix`` is None or can begin a server's tool names."""
    if prefix is not None:
        check_tool_name(prefix, "prefix")  # it begins every tool name of the server
        if len(prefix) > MAX_PREFIX:
            raise ValueError(
                f"prefix must be at most {MAX_PREFIX} characters (tool names are at most 64), "
                f"not {len(prefix)}: {prefix!r}"
            )


def _check_prefix(_instance: object, _attribute: object, prefix: str | None) -> None:
    check_prefix(prefix)


def _check_max_chars(instance: object, attribute: Any, value: object) -> None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return
    raise ValueError(
        f"{type(instance).__name__}.{attribute.name} must be a number of characters above "
        f"zero, or None; not {value!r}"
    )


@attrs.frozen(kw_only=True)
class _Common:
    """What every server description has."""

    name: str | None = None
    """How messages name the server (None: the prefix, or the command line or URL)."""
    prefix: str | None = attrs.field(default=None, validator=_check_prefix)
    """The server's tools are named ``{prefix}__{name}``; None keeps their names."""
    allow: frozenset[str] | None = attrs.field(default=None, converter=_names)
    """Only these tools (the server's names, before the prefix); None for all."""
    block: frozenset[str] | None = attrs.field(default=None, converter=_names)
    """Never these tools (the server's names); None blocks none."""
    call_timeout: float | None = attrs.field(
        default=DEFAULT_CALL_TIMEOUT, validator=seconds(optional=True)
    )
    """Seconds a call may wait for the server's answer before its result is an error
    naming the server (None: no bound)."""
    start_timeout: float = attrs.field(
        default=DEFAULT_START_TIMEOUT, validator=seconds(optional=False)
    )
    """Seconds to start the server and list its tools."""
    max_result_chars: int | None = attrs.field(
        default=DEFAULT_MAX_RESULT_CHARS, validator=_check_max_chars
    )
    """A result's text is cut to its first this many characters, and the result says so
    (None: no bound; images are not counted)."""


def _errlog(
    stderr: str | os.PathLike[str] | IO[str] | None, files: contextlib.ExitStack
) -> IO[str]:
    """The file the server's stderr goes to; files opened here close with ``files``."""
    if stderr is None:
        return files.enter_context(open(os.devnull, "w"))
    if isinstance(stderr, str | os.PathLike):
        return files.enter_context(open(stderr, "a", encoding="utf-8"))
    return stderr


@attrs.frozen(kw_only=True, init=False)
class StdioServer(_Common):
    """An MCP server run as a subprocess, spoken to over its stdin and stdout.

    ``StdioServer("uvx", "mcp-server-git", "--repository", ".")``. The process starts
    when :func:`open_mcp_tools` enters and is gone when it exits (also on cancel and
    Ctrl-C).

    Args:
        command: the program to run (looked up on ``PATH``).
        *args: its arguments.
        env: extra environment variables. The server gets only these plus a few safe
            ones from ours (``PATH``, ``HOME``, ``USER``...) — the SDK's rule, so that
            API keys in our environment do not leak to every server.
        cwd: its working directory (default: ours).
        stderr: where a copy of the server's stderr goes: a path (appended to) or an
            open text file. Default: none, so a chatty server never writes over the
            terminal. Either way its last lines are kept (at most 16 KB) and shown in
            the error when the server does not start or its connection is lost.
        name: how messages name the server (default: the prefix, or the command line).
        prefix: tool names become ``{prefix}__{name}`` (at most 40 characters).
        allow: only these tools (server names, before the prefix); ``None`` for all.
        block: never these tools.
        call_timeout: seconds a call may wait for the server's answer before its result
            is an error naming the server (``None``: no bound). The loop's
            ``tool_timeout`` applies as well.
        start_timeout: seconds to start the server and list its tools.
        max_result_chars: a result's text is cut to its first this many characters, and
            the result says so (default 50,000, as the ``bash`` tool's output; ``None``:
            no bound). Images are not counted.

    A line on the server's stdout that is not JSON-RPC (a server printing a banner) is
    ignored, with one warning per server on the ``trio_agent.mcp`` logger (later ones at
    DEBUG). Reading costs time linear in what the server sends, so a huge result does
    not hold up the connection's later calls; parsing one message is the only step that
    holds the loop, linear in its size (on Windows the SDK's own stdio transport is
    used, without these).
    """

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | os.PathLike[str] | None = None
    stderr: str | os.PathLike[str] | IO[str] | None = attrs.field(default=None, eq=False)

    def __init__(
        self,
        command: str,
        *args: str,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stderr: str | os.PathLike[str] | IO[str] | None = None,
        name: str | None = None,
        prefix: str | None = None,
        allow: Sequence[str] | None = None,
        block: Sequence[str] | None = None,
        call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        max_result_chars: int | None = DEFAULT_MAX_RESULT_CHARS,
    ) -> None:
        if not command:
            raise ValueError("StdioServer needs a command")
        self.__attrs_init__(
            command=command,
            args=tuple(args),
            env=dict(env) if env is not None else None,
            cwd=cwd,
            stderr=stderr,
            name=name,
            prefix=prefix,
            allow=allow,
            block=block,
            call_timeout=call_timeout,
            start_timeout=start_timeout,
            max_result_chars=max_result_chars,
        )

    @property
    def label(self) -> str:
        """How messages name the server: ``name``, else the prefix, else the command line."""
        return self.name or self.prefix or shlex.join((os.path.basename(self.command), *self.args))

    @classmethod
    def from_command_line(cls, line: str, **kwargs: Any) -> StdioServer:
        """A server from one shell-like line (``"uvx mcp-server-git"``), split by shlex.

        Raises:
            ValueError: the line is empty or its quotes do not match.
        """
        words = shlex.split(line)
        if not words:
            raise ValueError("an empty MCP server command")
        return cls(*words, **kwargs)

    @contextlib.asynccontextmanager
    async def _transport(self, server: str, tail: StderrTail) -> AsyncIterator[Transport]:
        """The transport to give the SDK's ``Client``; ``server`` names it in log lines,
        ``tail`` gets the end of its stderr."""
        cwd = os.fspath(self.cwd) if self.cwd is not None else None
        if sys.platform == "win32":  # pragma: no cover - the SDK's, with its job objects
            params = StdioServerParameters(
                command=self.command,
                args=list(self.args),
                env=dict(self.env) if self.env is not None else None,
                cwd=cwd,
            )
            with contextlib.ExitStack() as files:
                errlog = _errlog(self.stderr, files)
                yield stdio_client(params, errlog=errlog)  # type: ignore[arg-type]
            return
        # The SDK's rule for the environment: only a few safe variables of ours.
        env = get_default_environment() | dict(self.env or {})
        yield stdio_transport(
            self.command,
            self.args,
            env=env,
            cwd=cwd,
            stderr=self.stderr,
            tail=tail,
            server=server,
        )


@attrs.frozen(kw_only=True, init=False)
class StreamableHttpServer(_Common):
    """An MCP server at a streamable-HTTP URL (``http://127.0.0.1:8000/mcp``).

    Args:
        url: the server's MCP endpoint.
        headers: sent with every request (for example ``Authorization``).
        name: how messages name the server (default: the prefix, or the URL).

    The other arguments are those of :class:`StdioServer`.
    """

    url: str
    headers: Mapping[str, str] | None = attrs.field(default=None, repr=False)

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        prefix: str | None = None,
        allow: Sequence[str] | None = None,
        block: Sequence[str] | None = None,
        call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        max_result_chars: int | None = DEFAULT_MAX_RESULT_CHARS,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"an MCP server URL must start with http:// or https://: {url!r}")
        self.__attrs_init__(
            url=url,
            headers=dict(headers) if headers is not None else None,
            name=name,
            prefix=prefix,
            allow=allow,
            block=block,
            call_timeout=call_timeout,
            start_timeout=start_timeout,
            max_result_chars=max_result_chars,
        )

    @property
    def label(self) -> str:
        """How messages name the server: ``name``, else the prefix, else the URL."""
        return self.name or self.prefix or self.url

    @contextlib.asynccontextmanager
    async def _transport(self, server: str, tail: StderrTail) -> AsyncIterator[Transport]:
        # The SDK's own timeouts: a server may hold a response stream open for long.
        timeout = httpx2.Timeout(30.0, read=300.0)
        async with httpx2.AsyncClient(headers=dict(self.headers or {}), timeout=timeout) as http:
            yield streamable_http_client(self.url, http_client=http)


McpServer = StdioServer | StreamableHttpServer
"""Either description of a server, as ``open_mcp_tools`` takes them."""
