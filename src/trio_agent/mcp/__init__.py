"""Tools from Model Context Protocol servers (``pip install 'trio-agent[mcp]'``).

``open_mcp_tools(StdioServer(...), StreamableHttpServer(...))`` starts the servers and
hands out their tools as ``trio_agent.Tool`` objects. The implementation lives in
private modules: ``_servers`` (where a server is), ``_convert`` (MCP values to ours),
``_connection`` (one server's connection, hosted in a task of its own), ``_open`` (the
``async with`` block). Nothing in ``trio_agent`` imports this package.
"""

try:
    import mcp as _mcp  # noqa: F401 - a clear message when the extra is missing
except ModuleNotFoundError as _exc:  # pragma: no cover - depends on the environment
    if _exc.name != "mcp":
        raise
    raise ImportError("trio_agent.mcp needs the MCP SDK: pip install 'trio-agent[mcp]'") from _exc

from ._connection import McpConnection as McpConnection
from ._errors import McpServerError as McpServerError
from ._open import McpTools as McpTools
from ._open import open_mcp_tools as open_mcp_tools
from ._servers import McpServer as McpServer
from ._servers import StdioServer as StdioServer
from ._servers import StreamableHttpServer as StreamableHttpServer

__all__ = [
    "McpConnection",
    "McpServer",
    "McpServerError",
    "McpTools",
    "StdioServer",
    "StreamableHttpServer",
    "open_mcp_tools",
]
