"""``open_mcp_tools``: start MCP servers, hand out their tools, stop them on exit."""

from __future__ import annotations

from typing import TYPE_CHECKING, final

import attrs
import trio

from ._connection import McpConnection
from ._errors import McpServerError
from ._servers import _names, check_prefix

if TYPE_CHECKING:
    from collections.abc import Sequence
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType

    from .. import Tool
    from ._servers import McpServer

__all__ = ["McpTools", "open_mcp_tools"]


@final
@attrs.define(eq=False)
class McpTools:
    """The servers an :func:`open_mcp_tools` block started, and their tools.

    Attributes:
        servers: one :class:`McpConnection` per server, in the order given.
    """

    servers: tuple[McpConnection, ...]

    @property
    def tools(self) -> tuple[Tool, ...]:
        """Every server's tools, in server order (see :attr:`McpConnection.tools`).

        Should a tool list refreshed later bring a name another server already has, the
        first server's tool is kept.
        """
        seen: set[str] = set()
        out: list[Tool] = []
        for server in self.servers:
            for tool in server.tools:
                if tool.name not in seen:
                    seen.add(tool.name)
                    out.append(tool)
        return tuple(out)


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class open_mcp_tools:
    """Start MCP servers and give their tools to the loop::

        async with open_mcp_tools(StdioServer("uvx", "mcp-server-git"), prefix="git") as git:
            tools = (*workspace("."), *git.tools)   # "git__git_status", ...

    Each server's connection lives in a task of its own, in a nursery this block owns:
    a server that dies, crashes mid-call or never answers gives the calls made to it an
    error result naming the server, and never cancels a tool batch, the run or another
    server. Entering starts every server at once and returns when all have listed their
    tools. Leaving closes the connections (waiting up to ``close_timeout`` seconds for
    servers to exit by themselves, then stopping them); no server process outlives the
    block, also when it is left by an exception, a cancel or Ctrl-C. An exception raised
    in the block propagates unchanged.

    Args:
        *servers: :class:`StdioServer` and :class:`StreamableHttpServer` descriptions.
        prefix: a prefix for servers that set none.
        allow: a tool filter for servers that set none.
        block: a tool filter for servers that set none.
        approval: name patterns (``fnmatch``: ``"delete_*"``, ``"git__push"``) of the
            tools whose every call waits for approval (``Tool.approval="always"``: asked
            of ``LoopConfig.approver``, else deferred until ``resume`` answers it), on
            every server; matched against the server's name of the tool and the name
            the model calls it by. A server's own annotations are not trusted for this:
            name the tools here.
        close_timeout: seconds leaving may spend closing the connections gracefully.

    Raises:
        McpServerError: on entry, a server did not start or list its tools within its
            ``start_timeout``, or two servers offer the same tool name (give them
            prefixes). The servers already started are stopped first.
        ValueError: no server given, or a ``prefix`` that cannot begin tool names.
    """

    def __init__(
        self,
        *servers: McpServer,
        prefix: str | None = None,
        allow: Sequence[str] | None = None,
        block: Sequence[str] | None = None,
        approval: Sequence[str] = (),
        close_timeout: float = 5.0,
    ) -> None:
        if not servers:
            raise ValueError("open_mcp_tools needs at least one server")
        check_prefix(prefix)
        self._specs = servers
        self._defaults = (prefix, _names(allow), _names(block))
        self._close_timeout = close_timeout
        if isinstance(approval, str):
            raise TypeError("approval takes a list of name patterns, not one str: wrap it")
        self._approval = tuple(approval)
        self._nursery_cm: AbstractAsyncContextManager[trio.Nursery] | None = None
        self._nursery: trio.Nursery | None = None
        self._tools: McpTools | None = None

    async def __aenter__(self) -> McpTools:
        prefix, allow, block = self._defaults
        connections = tuple(
            McpConnection(
                server=spec,
                prefix=spec.prefix if spec.prefix is not None else prefix,
                allow=spec.allow if spec.allow is not None else allow,
                block=spec.block if spec.block is not None else block,
                approval=self._approval,
            )
            for spec in self._specs
        )
        self._nursery_cm = nursery_cm = trio.open_nursery()
        self._nursery = nursery = await nursery_cm.__aenter__()
        try:
            async with trio.open_nursery() as starting:
                for connection in connections:
                    starting.start_soon(nursery.start, connection._host)
            _check_unique(connections)
        except BaseException as exc:  # noqa: ASYNC103 - re-raised below
            # Stop the servers already started; their clean-up bounds itself (the SDK
            # stops a process that does not exit under a shield of its own).
            nursery.cancel_scope.cancel()
            await nursery_cm.__aexit__(None, None, None)  # noqa: ASYNC102
            if isinstance(exc, BaseExceptionGroup):
                matched, _ = exc.split(McpServerError)
                if matched is not None:
                    raise _leaf(matched) from None  # noqa: ASYNC104 - the one error to report
            raise
        self._tools = McpTools(servers=connections)
        return self._tools

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._nursery_cm is not None
        assert self._nursery is not None
        assert self._tools is not None
        nursery_cm, self._nursery_cm = self._nursery_cm, None
        for connection in self._tools.servers:
            connection._close()
        # Leaving normally, the servers get close_timeout seconds to exit by themselves;
        # leaving by an exception (a cancel, Ctrl-C), they are stopped at once.
        if exc is not None:
            self._nursery.cancel_scope.cancel()
        else:
            self._nursery.cancel_scope.deadline = trio.current_time() + self._close_timeout
        try:
            # The hosts never raise once started: only a cancel from outside can come
            # out of here.
            await nursery_cm.__aexit__(None, None, None)  # noqa: ASYNC102
        except BaseException as group:  # noqa: ASYNC103 - re-raised unless the body's wins
            if exc is not None and isinstance(_leaf(group), trio.Cancelled):
                return  # noqa: ASYNC104 - the body's own exception propagates instead
            raise


def _check_unique(connections: Sequence[McpConnection]) -> None:
    owner: dict[str, McpConnection] = {}
    for connection in connections:
        for tool in connection.tools:
            first = owner.setdefault(tool.name, connection)
            if first is not connection:
                raise McpServerError(
                    f"the MCP servers {first.name} and {connection.name} both offer a tool "
                    f"named {tool.name!r}: give them different prefixes"
                )
