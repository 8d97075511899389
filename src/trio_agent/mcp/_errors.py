"""The MCP edge's one error (under ``TrioAgentError``)."""

from __future__ import annotations

from .. import TrioAgentError

__all__ = ["McpServerError"]


class McpServerError(TrioAgentError):
    """An MCP server could not be used: it did not start, did not list its tools in
    time, or two servers offer the same tool name. Raised by :func:`open_mcp_tools` on
    entry; the message names the server. (A server that fails *during* a run never
    raises: the call gets an error result.)
    """
