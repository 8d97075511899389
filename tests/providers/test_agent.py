"""A whole agent run on each provider: two tool round trips, and an abort mid-stream."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import trio

from tests.kit.http_server import Stall
from tests.kit.providers import TOOLS, anthropic_reply, make_model, openai_reply, two_round_trips
from trio_agent import (
    AssistantMessage,
    Context,
    MessageUpdate,
    TextDelta,
    ToolResultMessage,
    UserMessage,
    check_transcript,
    open_agent_loop,
    run_agent_loop,
)

if TYPE_CHECKING:
    from tests.kit.http_server import Server


def _results(kind: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """(call id, text) of the tool results in a request body, in order."""
    if kind == "openai":
        return [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]
    return [
        (block["tool_use_id"], block["content"][0]["text"])
        for m in body["messages"]
        if m["role"] == "user"
        for block in m["content"]
        if block["type"] == "tool_result"
    ]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_two_tool_round_trips(server: Server, kind: str) -> None:
    p = two_round_trips(server, kind)
    context = Context(system_prompt="You are a test agent.", tools=TOOLS)
    async with make_model(kind, server.url) as model:
        with trio.fail_after(10):
            result = await run_agent_loop(
                [UserMessage.text("Read a.txt and b.txt")], context, model
            )
    assert result.reason == "stop"
    assert result.steps == 3
    assert [m.role for m in result.messages] == [
        "user",
        "assistant",
        "tool_result",
        "tool_result",
        "assistant",
        "tool_result",
        "assistant",
    ]
    tool_results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, r.text, r.is_error) for r in tool_results] == [
        (p + "1", "hello", False),
        (p + "2", "world", False),
        (p + "3", "5", False),
    ]
    last = result.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.text == "Done: hello world, 5."
    assert last.usage.input_tokens == 50
    check_transcript(result.transcript)
    bodies = [r.json() for r in server.requests]
    assert [len(_results(kind, b)) for b in bodies] == [0, 2, 3]
    assert _results(kind, bodies[2]) == [(p + "1", "hello"), (p + "2", "world"), (p + "3", "5")]
    tools = bodies[0]["tools"]
    assert len(tools) == 2


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_abort_mid_stream_through_the_loop(server: Server, kind: str) -> None:
    reply = openai_reply if kind == "openai" else anthropic_reply
    stall = Stall(reply("Hello there, this reply never ends", []))
    left = stall.left
    server.add(stall)
    context = Context(system_prompt="", tools=TOOLS)
    async with make_model(kind, server.url) as model:
        with trio.fail_after(10):
            async with open_agent_loop([UserMessage.text("go")], context, model) as run:
                async for event in run.events:
                    if isinstance(event, MessageUpdate) and isinstance(event.event, TextDelta):
                        run.abort()
            await left.wait()
    result = run.result
    assert result is not None
    assert result.reason == "aborted"
    assert result.steps == 1
    message = result.messages[-1]
    assert isinstance(message, AssistantMessage)
    assert message.stop_reason == "aborted"
    assert message.text.startswith("Hello")
    check_transcript(result.transcript)
