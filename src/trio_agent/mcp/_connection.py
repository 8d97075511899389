"""One MCP server's connection, hosted in a task of its own.

Theory of operation: the SDK's ``Client`` runs its own task group, and over streamable
HTTP a server that dies mid-call fails *that* task group — which would cancel whatever
scope the call was made from, tool batch included. So no tool ever calls the ``Client``
directly. :meth:`McpConnection._host` (started with ``nursery.start`` by
:func:`open_mcp_tools`) owns the ``Client``; a tool's call is a :class:`_Call` handed to
the host over a memory channel, served in a task of the host's nursery, and answered
through the call's own channel (progress updates, then closed with the answer set).

- The caller cancelled (abort, ``tool_timeout``, interrupt): it cancels the call's
  scope in the host, and the SDK tells the server (``notifications/cancelled``).
- The server answers nothing for ``call_timeout`` seconds: the caller stops waiting,
  cancels as above, and its result is an error naming the server.
- The connection dies: the host's ``async with Client`` raises; the host catches it,
  answers every pending call with an error naming the server (with the last lines of a
  stdio server's stderr), and later calls get one at once. Nothing escapes into the
  caller's nursery.

The tool list becomes ``Tool`` objects in :meth:`McpConnection._make_tools`: names by
the rules of ``_names``, a tool that cannot be one (no name, a name listed twice, a
schema we refuse) skipped with a warning on the ``trio_agent.mcp`` logger — one bad
tool never keeps the server's other tools from the model.
"""

from __future__ import annotations

import fnmatch
import functools
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, final

import attrs
import trio
from mcp import Client, MCPError
from mcp.types import (
    CONNECTION_CLOSED,
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    ToolListChangedNotification,
)
from mcp.types import Tool as McpTool

from .. import Tool, ToolContext, ToolOutput
from ._convert import error_output, to_output, wanted
from ._errors import McpServerError
from ._names import MAX_NAME, model_names, sanitised_name
from ._servers import McpServer, StdioServer
from ._stdio import StderrTail, describe_stderr, logger

if TYPE_CHECKING:
    from mcp.client import IncomingMessage

    from .. import ToolCall

__all__ = ["McpConnection"]

# Progress updates a call may have waiting before later ones are dropped (progress is
# advisory; the answer itself never waits in this buffer).
_PROGRESS_BUFFER = 32
_MAX_LIST_PAGES = 100
# How long a lost stdio connection waits for the rest of the server's stderr.
_STDERR_WAIT = 0.5


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@attrs.define(eq=False)
class _Call:
    name: str
    arguments: dict[str, Any]
    updates: trio.MemorySendChannel[Mapping[str, Any]]
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    output: ToolOutput | None = None

    def answer(self, output: ToolOutput) -> None:
        if self.output is None:
            self.output = output
        self.updates.close()

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        update = {"progress": progress, "total": total, "message": message}
        try:
            self.updates.send_nowait(update)
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            pass


@final
@attrs.define(eq=False)
class McpConnection:
    """One connected MCP server, as :func:`open_mcp_tools` hands it out.

    Attributes:
        server: the description it was started from.
        prefix: the tool-name prefix in use (the server's, or ``open_mcp_tools``'s).
        allow: the allow filter in use.
        block: the block filter in use.
        approval: name patterns (``fnmatch``: ``*``, ``?``, ``[...]``) of the tools
            whose calls wait for approval (``Tool.approval="always"``), matched against
            the server's name of the tool and the name the model calls it by.
    """

    server: McpServer
    prefix: str | None = None
    allow: frozenset[str] | None = None
    block: frozenset[str] | None = None
    approval: tuple[str, ...] = ()
    _listing: tuple[McpTool, ...] = ()
    _tools: tuple[Tool, ...] = ()
    _version: int = 0
    _error: str | None = None
    _requests: trio.MemorySendChannel[_Call] = attrs.field(init=False)
    _incoming: trio.MemoryReceiveChannel[_Call] = attrs.field(init=False)
    _pending: set[_Call] = attrs.field(factory=set)
    _changed: trio.Event = attrs.field(factory=trio.Event)
    _serving: trio.Nursery | None = None
    _stderr: StderrTail | None = attrs.field(init=False, default=None)
    # How the SDK negotiates the protocol ("auto": the newest both sides speak). Tests set
    # "legacy" to drive the handshake-era paths that most servers in use still take.
    _mode: str = "auto"

    def __attrs_post_init__(self) -> None:
        self._requests, self._incoming = trio.open_memory_channel[_Call](math.inf)
        if isinstance(self.server, StdioServer):
            self._stderr = StderrTail()

    @property
    def name(self) -> str:
        """How messages name this server: its ``name``, else its prefix, else its command
        line or URL."""
        return self.server.name or self.prefix or self.server.label

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The server's tools as ours, after the prefix and the filters.

        Listed at start and listed again whenever the server announces a change
        (``tools/list_changed``); read it again before a run to see the current list.
        """
        return self._tools

    @property
    def tools_version(self) -> int:
        """How many times the tool list was fetched (1 after start)."""
        return self._version

    @property
    def is_running(self) -> bool:
        """Whether the connection is up; once down it stays down."""
        return self._error is None

    @property
    def error(self) -> str | None:
        """Why the connection is down, or ``None`` while it is up."""
        return self._error

    # --- the caller's side -------------------------------------------------------------

    async def call(
        self, name: str, arguments: Mapping[str, Any], ctx: ToolContext | None = None
    ) -> ToolOutput:
        """Call the server's tool ``name`` (its own name, without the prefix).

        Never raises for the server's failures: a tool error, a dead or lost
        connection and no answer within ``call_timeout`` are error results naming the
        server. Progress notifications go to ``ctx.report_progress`` as
        ``{"progress", "total", "message"}``. A checkpoint; if cancelled, the call is
        cancelled on the server too (without waiting for it) and ``Cancelled``
        propagates.
        """
        if self._error is not None:
            await trio.lowlevel.checkpoint()
            return error_output(f"MCP server {self.name} is not running: {self._error}")
        send, receive = trio.open_memory_channel[Mapping[str, Any]](_PROGRESS_BUFFER)
        call = _Call(name=name, arguments=dict(arguments), updates=send)
        self._pending.add(call)
        try:
            self._requests.send_nowait(call)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            reason = self._error or "its open_mcp_tools block is closing"
            call.answer(error_output(f"MCP server {self.name} is not running: {reason}"))
        timeout = self.server.call_timeout
        try:
            with receive, trio.move_on_after(math.inf if timeout is None else timeout):
                async for update in receive:
                    if ctx is not None:
                        await ctx.report_progress(update)
        finally:
            self._pending.discard(call)
            if call.output is None:
                # Cancelled, or no answer in time: the server is told to stop.
                call.scope.cancel()
        if call.output is None:
            return error_output(
                f"MCP server {self.name} did not answer the call to {name} within {timeout:g}s"
            )
        return call.output

    async def _execute(
        self, name: str, call: ToolCall, args: Mapping[str, Any], ctx: ToolContext
    ) -> ToolOutput:
        return await self.call(name, args, ctx)

    def _make_tools(self) -> tuple[Tool, ...]:
        """The listed tools as ours (see the module docstring); logs what it renames
        and skips."""
        listed: dict[str, McpTool] = {}
        for t in self._listing:
            if not t.name:
                logger.warning("MCP server %s lists a tool without a name; skipped", self.name)
            elif t.name in listed:
                logger.warning(
                    "MCP server %s lists two tools named %r; the second is skipped",
                    self.name,
                    t.name,
                )
            elif wanted(t.name, self.allow, self.block):
                listed[t.name] = t
        names = model_names(self.prefix, listed)
        tools: list[Tool] = []
        for original, t in listed.items():
            name = names[original]
            plain = sanitised_name(self.prefix, original)
            if name != plain:
                why = (
                    f"the model APIs take at most {MAX_NAME} characters"
                    if len(plain) > MAX_NAME
                    else f"another of its tools is called {plain!r}"
                )
                logger.warning(
                    "MCP server %s: its tool %r is called %r (%s)", self.name, original, name, why
                )
            try:
                tool = Tool(
                    name=name,
                    description=t.description or t.title or "",
                    parameters=t.input_schema,
                    execute=functools.partial(self._execute, original),
                    label=t.title,
                    output_schema=t.output_schema,
                    approval="always" if self._gated(original, name) else "never",
                )
            except (TypeError, ValueError) as exc:
                logger.warning(
                    "MCP server %s: its tool %r is skipped: %s", self.name, original, exc
                )
                continue
            tools.append(tool)
        return tuple(tools)

    def _gated(self, *names: str) -> bool:
        """Whether a tool known by ``names`` waits for approval (see ``approval``)."""
        return any(fnmatch.fnmatchcase(n, p) for p in self.approval for n in names)

    # --- the host's side ---------------------------------------------------------------

    def _close(self) -> None:
        """Accept no more calls; the host leaves once the ones in flight are answered."""
        self._requests.close()

    def _shut(self, reason: str) -> None:
        if self._error is None:
            self._error = reason
        self._requests.close()
        for call in list(self._pending):
            call.answer(error_output(f"MCP server {self.name}: {self._error}"))

    async def _host(  # noqa: ASYNC114 - started by open_mcp_tools only
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Connect, list the tools, report started, then serve calls until closed.

        Raises (only before it reports started):
            McpServerError: the server did not start or list its tools within
                ``start_timeout``.
        """
        spec = self.server
        started = False
        reason = "the connection is closed"
        deadline = trio.CancelScope(deadline=trio.current_time() + spec.start_timeout)
        try:
            with deadline:
                async with (
                    spec._transport(self.name, self._stderr or StderrTail()) as transport,
                    Client(
                        transport,
                        message_handler=self._on_message,
                        mode=self._mode,
                    ) as client,
                ):
                    await self._relist(client)
                    deadline.deadline = math.inf
                    started = True
                    task_status.started()
                    async with trio.open_nursery() as nursery:
                        self._serving = nursery
                        nursery.start_soon(self._watch, client)
                        async for call in self._incoming:
                            nursery.start_soon(self._serve, client, call)
                        nursery.cancel_scope.cancel()
                    if self._error is not None:
                        reason = self._error
        except Exception as exc:
            if not started:
                raise McpServerError(
                    f"MCP server {self.name} did not start: {_describe(exc)}"
                    f"{describe_stderr(self._stderr)}"
                ) from exc
            reason = f"the connection was lost ({_describe(exc)}){describe_stderr(self._stderr)}"
        finally:
            self._serving = None
            self._shut(reason)
            self._incoming.close()
        if not started:
            raise McpServerError(
                f"MCP server {self.name} did not start within {spec.start_timeout:g}s"
                f"{describe_stderr(self._stderr)}"
            )

    async def _serve(self, client: Client, call: _Call) -> None:
        with call.scope:
            try:
                result = await self._call_tool(client, call)
            except MCPError as exc:
                if exc.code == CONNECTION_CLOSED:
                    # The server is gone: every call in flight and every later one
                    # gets this answer, and the host closes the client.
                    await self._lost("the connection closed (the server exited or crashed)")
                    return
                call.answer(error_output(f"MCP server {self.name}: {exc.message}"))
            except Exception as exc:
                call.answer(error_output(f"MCP server {self.name}: {_describe(exc)}"))
            else:
                call.answer(to_output(result, self.server.max_result_chars))

    async def _call_tool(self, client: Client, call: _Call) -> CallToolResult:
        """Send ``call`` to the server; its result, not yet checked.

        A tool that declares an output schema is called with a plain ``tools/call``
        request: the SDK's ``call_tool`` would check the structured content against
        that schema itself and raise with its own text, before the run sees the result.
        The run checks it instead, by the rule of every tool's ``output_schema``: a
        mismatch is an error result listing each path (``  - tags/1: ...``). Such a call
        does not go through the SDK's rounds for a server asking for input (this client
        answers none) nor its resend after a header mismatch; every other tool does.
        """
        if not any(t.name == call.name and t.output_schema for t in self._listing):
            return await client.call_tool(
                call.name, call.arguments, progress_callback=call.progress
            )
        request = CallToolRequest(
            params=CallToolRequestParams(name=call.name, arguments=call.arguments)
        )
        return await client.session.send_request(
            request, CallToolResult, progress_callback=call.progress
        )

    async def _lost(self, reason: str) -> None:
        if self._stderr is not None:
            # Its last words (a traceback) may still be in the pipe; bounded, and done
            # even if this call was cancelled meanwhile, so the connection is marked down.
            with trio.CancelScope(shield=True):
                await self._stderr.wait_closed(_STDERR_WAIT)
        self._shut(reason + describe_stderr(self._stderr))
        if self._serving is not None:
            self._serving.cancel_scope.cancel()

    async def _relist(self, client: Client) -> None:
        listing: list[McpTool] = []
        cursor: str | None = None
        for _ in range(_MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            listing.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        self._listing = tuple(listing)
        self._tools = self._make_tools()
        self._version += 1

    async def _on_message(self, message: IncomingMessage) -> None:
        # Servers on the handshake-era protocol announce changes as notifications.
        if isinstance(message, ToolListChangedNotification):
            self._changed.set()
        await trio.lowlevel.checkpoint()

    async def _watch(self, client: Client) -> None:
        """Fetch the tool list again whenever the server says it changed."""
        try:
            async with client.listen(tools_list_changed=True) as changes:
                async for _ in changes:
                    await self._relist_quietly(client)
            return
        except Exception:  # an older protocol, or no support: notifications instead
            pass
        while True:
            await self._changed.wait()
            self._changed = trio.Event()
            await self._relist_quietly(client)

    async def _relist_quietly(self, client: Client) -> None:
        try:
            await self._relist(client)
        except Exception:  # the old list stays; a lost connection shows on calls
            pass
