"""Give an agent the tools of an MCP server, next to the workspace tools.

    python examples/mcp_tools.py                       # scripted model, the demo server
    python examples/mcp_tools.py --model gpt-4.1-mini  # a real model (OPENAI_API_KEY)
    python examples/mcp_tools.py --model M -- uvx mcp-server-git --repository .

The MCP server (by default the small demo server written below, run over stdio with
``python -c``, so this file runs from any folder) starts when the ``async with`` enters
and is gone when it exits. Its tools get the prefix ``srv__``; a tool that fails, or a
server that dies mid-call, is an error result the model reads, and the run goes on. A
server that does not start raises ``McpServerError``, with the end of its stderr.
"""

from __future__ import annotations

import argparse
import sys

import trio

from trio_agent import (
    AssistantMessage,
    Context,
    Model,
    Text,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    run_agent_loop,
)
from trio_agent.mcp import StdioServer, open_mcp_tools
from trio_agent.providers import OpenAIChat
from trio_agent.testing import ScriptedModel
from trio_agent.tools import workspace

# A whole MCP server, on the SDK's server class (``pip install 'trio-agent[mcp]'``).
DEMO_SERVER_CODE = """
import os
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

app = MCPServer("demo")

@app.tool()
def echo(text: str) -> str:
    'Return the text unchanged.'
    return text

@app.tool()
def add(a: int, b: int) -> int:
    'Add two integers.'
    return a + b

@app.tool()
def fail(message: str) -> str:
    'Always fails with the message.'
    raise ToolError(message)

@app.tool()
def crash() -> str:
    'Kill the server at once.'
    os._exit(3)

app.run()
"""
DEMO_SERVER = [sys.executable, "-c", DEMO_SERVER_CODE]


def scripted() -> ScriptedModel:
    """A model that calls the demo server's ``add`` tool, then answers."""
    call = ToolCall(id="call-1", name="srv__add", arguments={"a": 2, "b": 40})
    return ScriptedModel(
        [
            AssistantMessage(content=(call,), stop_reason="tool_use"),
            AssistantMessage(content=(Text(text="2 + 40 = 42"),), stop_reason="stop"),
        ]
    )


async def main(model_name: str | None, command: list[str]) -> None:
    model: Model = OpenAIChat(model_name) if model_name else scripted()
    server = StdioServer(*command, prefix="srv", block=["crash"])
    async with open_mcp_tools(server) as mcp:
        print("MCP tools:", ", ".join(t.name for t in mcp.tools))
        context = Context(
            system_prompt="Use the tools when they help.",
            tools=(*workspace(".", allow_bash=False), *mcp.tools),
        )
        result = await run_agent_loop([UserMessage.text("What is 2 + 40?")], context, model)
    if isinstance(model, OpenAIChat):
        await model.aclose()
    for message in result.messages:
        if isinstance(message, ToolResultMessage):
            print(f"{message.tool_name} -> {message.text}")
    final = result.messages[-1]
    assert isinstance(final, AssistantMessage)
    print("answer:", final.text)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="an OpenAI model name (default: a scripted model)")
    parser.add_argument("command", nargs="*", help="the MCP server command (default: demo)")
    args = parser.parse_args()
    trio.run(main, args.model, args.command or DEMO_SERVER)
