"""A whole agent run on each provider: two tool round trips, and an abort mid-stream."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
import trio

from tests.kit.http_server import Stall, frames, sse
from tests.kit.providers import make_model
from trio_agent import (
    AssistantMessage,
    Context,
    MessageUpdate,
    TextDelta,
    Tool,
    ToolCall,
    ToolContext,
    ToolResultMessage,
    UserMessage,
    check_transcript,
    open_agent_loop,
    run_agent_loop,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from tests.kit.http_server import Server

FILES = {"a.txt": "hello", "b.txt": "world"}


def _pieces(text: str, size: int = 5) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def openai_reply(text: str, calls: list[tuple[str, str, dict[str, Any]]]) -> str:
    chunks: list[Any] = [{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
    chunks += [
        {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
        for piece in _pieces(text)
    ]
    for i, (call_id, name, args) in enumerate(calls):
        fragments = _pieces(json.dumps(args), 4)
        first = {
            "index": i,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [first]}}]})
        chunks += [
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {"tool_calls": [{"index": i, "function": {"arguments": f}}]},
                    }
                ]
            }
            for f in fragments
        ]
    finish = "tool_calls" if calls else "stop"
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    chunks.append({"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 20}})
    return frames(*chunks, "[DONE]")


def anthropic_reply(text: str, calls: list[tuple[str, str, dict[str, Any]]]) -> str:
    events: list[Any] = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 50, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ]
    events += [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}
        for p in _pieces(text)
    ]
    events.append({"type": "content_block_stop", "index": 0})
    for i, (call_id, name, args) in enumerate(calls, start=1):
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        events.append({"type": "content_block_start", "index": i, "content_block": block})
        events += [
            {
                "type": "content_block_delta",
                "index": i,
                "delta": {"type": "input_json_delta", "partial_json": f},
            }
            for f in _pieces(json.dumps(args), 4)
        ]
        events.append({"type": "content_block_stop", "index": i})
    stop = "tool_use" if calls else "end_turn"
    events.append(
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 20}}
    )
    events.append({"type": "message_stop"})
    return frames(*events, named=True)


async def _read(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
    await trio.sleep(0.01)
    return FILES[args["path"]]


async def _add(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
    return str(args["a"] + args["b"])


TOOLS = (
    Tool(
        name="read",
        description="Read a file.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
        execute=_read,
    ),
    Tool(
        name="add",
        description="Add two integers.",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
        execute=_add,
    ),
)


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


def two_round_trips(server: Server, kind: str) -> str:
    """Queue three replies: two reads, an add, an answer. Returns the call-id prefix."""
    reply = openai_reply if kind == "openai" else anthropic_reply
    p = "call_" if kind == "openai" else "toolu_"
    server.add(
        sse(
            reply(
                "Reading both.",
                [(p + "1", "read", {"path": "a.txt"}), (p + "2", "read", {"path": "b.txt"})],
            ),
            split=64,
        ),
        sse(reply("Now adding.", [(p + "3", "add", {"a": 2, "b": 3})]), split=64),
        sse(reply("Done: hello world, 5.", []), split=64),
    )
    return p


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
