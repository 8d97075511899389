"""Helpers for provider tests: build models against the test server, script replies in
each provider's wire format (and two tools they call), collect a stream, and check that a
stream follows the assistant-event protocol."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import trio

from tests.kit.http_server import frames, sse
from trio_agent import (
    AssistantEvent,
    AssistantMessage,
    Done,
    Error,
    ModelOptions,
    ModelRequest,
    Start,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolContext,
    UserMessage,
)
from trio_agent.providers import (
    Anthropic,
    Gemini,
    HTTPOptions,
    OpenAIChat,
    OpenAIResponses,
    RetryPolicy,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from tests.kit.http_server import Server

FAST = HTTPOptions(
    connect_timeout=2.0,
    idle_timeout=2.0,
    retry=RetryPolicy(max_retries=3, initial_delay=0.01, max_delay=0.05),
)
# A 1x1 PNG, base64.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4"
    "DwABBAEAwS2OUAAAAABJRU5ErkJggg=="
)
KEY = "sk-test-9f8e7d6c5b4a39281706f5e4d3c2b1a0ZZ"


TEXT_STREAMS = {
    "openai": "openai_text.sse",
    "anthropic": "anthropic_text.sse",
    "responses": "responses_text.sse",
    "gemini": "gemini_text.sse",
}
"""Per provider, a recorded plain-text reply about tiny-pi (with a raw U+2028)."""

KEY_ENVS = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "responses": "OPENAI_API_KEY",
    "gemini": "GEMINI_API_KEY",
}


def make_model(kind: str, url: str, **kwargs: Any) -> Any:
    kwargs.setdefault("http", FAST)
    kwargs.setdefault("api_key", KEY)
    if kind == "openai":
        return OpenAIChat("gpt-4.1", base_url=url + "/v1", **kwargs)
    if kind == "responses":
        return OpenAIResponses("gpt-5-mini", base_url=url + "/v1", **kwargs)
    if kind == "gemini":
        return Gemini("gemini-2.5-flash", base_url=url + "/v1beta", **kwargs)
    return Anthropic("claude-sonnet-4-5", base_url=url, **kwargs)


def request(text: str = "hi", **options: Any) -> ModelRequest:
    return ModelRequest(
        system_prompt="You are terse.",
        messages=(UserMessage.text(text),),
        options=ModelOptions(**options),
    )


async def collect(model: Any, req: ModelRequest | None = None) -> list[AssistantEvent]:
    with trio.fail_after(10):
        async with model.stream(req or request()) as events:
            out = [event async for event in events]
    check_protocol(out)
    return out


def final(events: list[AssistantEvent]) -> AssistantMessage:
    last = events[-1]
    assert isinstance(last, Done | Error)
    return last.message


def check_protocol(events: list[AssistantEvent]) -> None:
    """Start first; per block Start, deltas, End (deltas adding up to the End's value);
    exactly one terminal event, last; a Done's content equals the finished blocks."""
    assert events
    assert isinstance(events[0], Start), events[:1]
    assert sum(isinstance(e, Done | Error) for e in events) == 1
    assert isinstance(events[-1], Done | Error)
    open_blocks: dict[int, tuple[str, list[str]]] = {}
    finished: dict[int, Any] = {}
    for event in events[1:-1]:
        if isinstance(event, TextStart | ThinkingStart | ToolCallStart):
            assert event.index not in open_blocks
            assert event.index not in finished
            open_blocks[event.index] = (type(event).__name__, [])
        elif isinstance(event, TextDelta | ThinkingDelta | ToolCallDelta):
            kind, parts = open_blocks[event.index]
            parts.append(event.delta)
        elif isinstance(event, TextEnd):
            kind, parts = open_blocks.pop(event.index)
            assert kind == "TextStart"
            assert "".join(parts) == event.text
            finished[event.index] = event
        elif isinstance(event, ThinkingEnd):
            kind, parts = open_blocks.pop(event.index)
            assert kind == "ThinkingStart"
            assert "".join(parts) == event.thinking
            finished[event.index] = event
        elif isinstance(event, ToolCallEnd):
            kind, _ = open_blocks.pop(event.index)
            assert kind == "ToolCallStart"
            finished[event.index] = event
        else:
            raise AssertionError(f"unexpected event {event!r}")
    last = events[-1]
    if isinstance(last, Done):
        assert not open_blocks, open_blocks
        assert sorted(finished) == list(range(len(finished)))
        content = last.message.content
        assert len(content) == len(finished)
        for i, block in enumerate(content):
            end = finished[i]
            if isinstance(end, TextEnd):
                assert block.text == end.text  # type: ignore[union-attr]
            elif isinstance(end, ThinkingEnd):
                assert block.thinking == end.thinking  # type: ignore[union-attr]
                assert block.signature == end.signature  # type: ignore[union-attr]
            else:
                assert block == end.tool_call
    else:
        assert last.message.stop_reason in ("error", "aborted")
        assert last.message.error_message


# --- replies on the wire, and the tools they call ----------------------------------------

FILES = {"a.txt": "hello", "b.txt": "world"}


def _pieces(text: str, size: int = 5) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def openai_reply(text: str, calls: list[tuple[str, str, dict[str, Any] | str]]) -> str:
    """An OpenAI-compatible streamed reply: ``text``, then ``calls`` (id, name,
    arguments; a ``str`` is sent as the argument text as it is, malformed or not)."""
    chunks: list[Any] = [{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
    chunks += [
        {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
        for piece in _pieces(text)
    ]
    for i, (call_id, name, args) in enumerate(calls):
        fragments = _pieces(_argument_text(args), 4)
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


def anthropic_reply(text: str, calls: list[tuple[str, str, dict[str, Any] | str]]) -> str:
    """An Anthropic streamed reply: as :func:`openai_reply`."""
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
            for f in _pieces(_argument_text(args), 4)
        ]
        events.append({"type": "content_block_stop", "index": i})
    stop = "tool_use" if calls else "end_turn"
    events.append(
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 20}}
    )
    events.append({"type": "message_stop"})
    return frames(*events, named=True)


def _argument_text(args: dict[str, Any] | str) -> str:
    return args if isinstance(args, str) else json.dumps(args)


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


def decode_chunks(decoder: Any, chunks: Iterable[bytes]) -> Done | Error:
    """Decode a body (sans-IO) the way a model's stream task does: the SSE decoder over
    ``chunks``, the provider's ``decoder`` over its events, its terminal frame required."""
    from trio_agent.providers._reply import StreamFault
    from trio_agent.providers._sse import SSEDecoder

    sse = SSEDecoder()
    try:
        for chunk in chunks:
            for item in sse.feed(chunk):
                decoder.feed(item)
                if decoder.finished:
                    result: Done | Error = decoder.finish()
                    return result
        raise StreamFault(f"the stream ended before {decoder.terminator}")
    except StreamFault as fault:
        return decoder.builder.fail(str(fault))
