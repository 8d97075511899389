"""A small MCP server for the MCP tests, built on the SDK's own server class.

Run as ``python mcp_server.py stdio`` or ``python mcp_server.py http PORT``. With
``MCP_TEST_LOG`` set, the ``slow`` tool appends ``started ID`` / ``cancelled ID`` /
``finished ID`` lines to that file, so a test can see what the server saw.

More environment variables, for the tests of odd servers: ``MCP_TEST_TOOLS``, a JSON list
of extra tool names (each answers ``I am NAME``; ``""`` is listed but cannot be called);
``MCP_TEST_BANNER``, a number of lines that are not JSON-RPC printed on stdout before
serving (as a chatty server does).
"""

from __future__ import annotations

import base64
import json
import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import CallToolResult, TextContent

# A 1×1 PNG.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

app = MCPServer("testserver")


def _log(line: str) -> None:
    path = os.environ.get("MCP_TEST_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


@app.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
async def slow(seconds: float, tag: str = "") -> str:
    """Sleep, then say so; records start, cancel and finish when MCP_TEST_LOG is set."""
    _log(f"started {tag}")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _log(f"cancelled {tag}")
        raise
    _log(f"finished {tag}")
    return f"slept {seconds}"


@app.tool()
def fail(message: str) -> str:
    """Always fails with the message."""
    raise ToolError(message)


@app.tool()
def picture() -> Image:
    """A 1×1 PNG."""
    return Image(data=PIXEL, format="png")


@app.tool()
async def count(steps: int, ctx: Context) -> str:
    """Report progress ``steps`` times, then answer."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
    return f"counted {steps}"


@app.tool(name="dotted.name")
def dotted() -> str:
    """A tool whose MCP name has a dot, which the model APIs refuse."""
    return "dotted ok"


@app.tool()
def crash() -> str:
    """Kill the server process at once."""
    os._exit(3)


@app.tool(structured_output=False)
def big(chars: int) -> str:
    """A text of ``chars`` characters (no structured copy)."""
    return "x" * chars


@app.tool()
def table(rows: int) -> CallToolResult:
    """A summary as text, the rows as structured content (different things)."""
    data = [{"n": i, "name": f"row {i}"} for i in range(rows)]
    return CallToolResult(
        content=[TextContent(type="text", text=f"{rows} rows")],
        structured_content={"rows": data},
    )


@app.tool()
def shout(lines: int) -> str:
    """Write ``lines`` lines that are not JSON-RPC on the protocol's stdout, then answer."""
    from mcp.server import stdio

    wire = stdio._claims[1].private_fd  # stdout itself is diverted to stderr meanwhile
    assert wire is not None
    for i in range(lines):
        os.write(wire, f"noise {i}\n".encode())
    return f"shouted {lines}"


@app.tool()
def die(message: str) -> str:
    """Write ``message`` on stderr and exit at once."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    os._exit(4)


@app.tool()
def spawn() -> int:
    """Start a child process that sleeps for a minute (and is not waited for); its pid."""
    import subprocess

    return subprocess.Popen(["sleep", "60"]).pid


@app.tool()
def getenv(name: str) -> str:
    """The value of an environment variable of the server, or ``(unset)``."""
    return os.environ.get(name, "(unset)")


@app.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@app.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called ``name`` (it echoes) and announce the change."""

    def added(text: str) -> str:
        return text

    app.add_tool(added, name=name, description=f"added at run time: {name}")
    if ctx.request_context.session.protocol_version.startswith("2026"):
        await ctx.notify_tools_changed()  # to `subscriptions/listen` streams
    else:
        # Handshake-era clients get the change as a notification.
        await ctx.request_context.session.send_tool_list_changed()
    return f"added {name}"


SHAPE_SCHEMA = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["n", "tags"],
}


@app.tool()
def shape(wrong: bool) -> CallToolResult:
    """Structured content for its declared output schema: matching it, or not (``wrong``)."""
    data = {"n": 7, "tags": ["a", 2 if wrong else "b"]}
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(data))], structured_content=data
    )


ORDER_SCHEMA = {
    "type": "object",
    "properties": {
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                "required": ["sku", "qty"],
            },
        },
        "total": {"type": "number"},
    },
    "required": ["lines", "total"],
}


@app.tool()
def order(wrong: bool) -> CallToolResult:
    """An order for its declared output schema; ``wrong``: a nested line's quantity is
    a string and the total is missing."""
    line = {"sku": "b", "qty": "2" if wrong else 2}
    data: dict[str, object] = {"lines": [{"sku": "a", "qty": 1}, line]}
    if not wrong:
        data["total"] = 9.5
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(data))], structured_content=data
    )


# Published by hand, as a server written in another language publishes it: the SDK's
# server does not check its own results against such a schema, so a wrong one is sent.
app._tool_manager._tools["shape"].fn_metadata.output_schema = SHAPE_SCHEMA
app._tool_manager._tools["order"].fn_metadata.output_schema = ORDER_SCHEMA


def _named(name: str) -> None:
    def answer() -> str:
        return f"I am {name}"

    tool = app._tool_manager.add_tool(answer, name=f"extra{len(app._tool_manager.list_tools())}")
    # Registered under a placeholder, then renamed: the SDK refuses no name here.
    del app._tool_manager._tools[tool.name]
    tool.name = name
    app._tool_manager._tools[name] = tool


for _name in json.loads(os.environ.get("MCP_TEST_TOOLS", "[]")):
    _named(_name)


if __name__ == "__main__":
    for _i in range(int(os.environ.get("MCP_TEST_BANNER", "0"))):
        print(f"Starting the test server, step {_i}...", flush=True)
    if sys.argv[1] == "http":
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run()
