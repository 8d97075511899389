"""Anthropic against a real HTTP server: recorded streams, stop reasons, request bodies."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tests.kit.http_server import frames, recorded, sse
from tests.kit.providers import KEY, PNG, collect, final, make_model, request
from trio_agent import (
    AssistantMessage,
    Done,
    Error,
    Image,
    ModelOptions,
    ModelRequest,
    Text,
    Thinking,
    ThinkingEnd,
    ToolCall,
    ToolCallDelta,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from trio_agent.providers import Anthropic

if TYPE_CHECKING:
    from tests.kit.http_server import Server


async def test_plain_text_with_usage_and_ping(server: Server) -> None:
    server.add(recorded("anthropic_text.sse"))
    async with make_model("anthropic", server.url) as model:
        events = await collect(model)
    message = final(events)
    assert isinstance(events[-1], Done)
    assert message.content == (
        Text(text="The project is called tiny-pi — a small agent runtime\u2028(see README)."),
    )
    assert message.stop_reason == "stop"
    assert message.usage == Usage(
        input_tokens=21, output_tokens=17, cache_read_tokens=3072, cache_write_tokens=1460
    )
    assert message.provider == "anthropic"
    [sent] = server.requests
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    body = sent.json()
    assert body["stream"] is True
    assert body["max_tokens"] == 8192
    assert body["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
        }
    ]


async def test_tool_use_blocks_from_input_json_deltas(server: Server) -> None:
    server.add(recorded("anthropic_tools.sse"))
    async with make_model("anthropic", server.url) as model:
        events = await collect(model)
    message = final(events)
    assert message.stop_reason == "tool_use"
    assert message.content == (
        Text(text="I'll look at both."),
        ToolCall(id="toolu_01T1x1fJ34qAmk2tNTrN7Up6", name="read", arguments={"path": "README.md"}),
        # No fragment at all: the input is {}.
        ToolCall(id="toolu_01Ldq3YbXzqwMtZG5D8UAmhC", name="ls", arguments={}),
    )
    assert [e.delta for e in events if isinstance(e, ToolCallDelta)] == [
        '{"path": "REA',
        'DME.md"}',
    ]
    assert message.usage == Usage(input_tokens=472, output_tokens=89)


async def test_thinking_with_signature_and_redacted_thinking(server: Server) -> None:
    server.add(recorded("anthropic_thinking.sse"), recorded("anthropic_text.sse"))
    async with make_model("anthropic", server.url) as model:
        events = await collect(model)
        message = final(events)
        assert message.content == (
            Thinking(
                thinking="I need to find 27 * 453.",
                signature="EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
            ),
            Thinking(
                thinking="",
                signature="EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP",
                redacted=True,
            ),
            Text(text="27 * 453 = 12,231"),
        )
        ends = [e for e in events if isinstance(e, ThinkingEnd)]
        assert ends[0].signature == message.content[0].signature  # type: ignore[union-attr]
        # Thinking goes back with its signature; redacted thinking as its data.
        follow = ModelRequest(
            system_prompt="",
            messages=(UserMessage.text("27 * 453?"), message, UserMessage.text("thanks")),
            options=ModelOptions(reasoning="low"),
        )
        await collect(model, follow)
    body = server.requests[1].json()
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {
                "type": "thinking",
                "thinking": "I need to find 27 * 453.",
                "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
            },
            {
                "type": "redacted_thinking",
                "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP",
            },
            {"type": "text", "text": "27 * 453 = 12,231"},
        ],
    }
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 8192 + 2048


def _stream(reason: str | None, *, with_call: bool = False) -> str:
    blocks: list[Any] = [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "content_block_stop", "index": 0},
    ]
    if with_call:
        blocks += [
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": "t1", "name": "ls", "input": {}},
            },
            {"type": "content_block_stop", "index": 1},
        ]
    return frames(
        {"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}},
        *blocks,
        {"type": "message_delta", "delta": {"stop_reason": reason}, "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
        named=True,
    )


@pytest.mark.parametrize(
    ("reason", "with_call", "stop_reason", "error"),
    [
        ("end_turn", False, "stop", None),
        ("stop_sequence", False, "stop", None),
        ("pause_turn", False, "stop", None),
        ("max_tokens", False, "length", None),
        ("model_context_window_exceeded", False, "length", None),
        ("tool_use", True, "tool_use", None),
        (None, False, "stop", None),
        (None, True, "tool_use", None),
        ("refusal", False, "error", "refused"),
        ("brand_new_reason", False, "error", "brand_new_reason"),
    ],
)
async def test_every_stop_reason(
    server: Server, reason: str | None, with_call: bool, stop_reason: str, error: str | None
) -> None:
    server.add(sse(_stream(reason, with_call=with_call)))
    async with make_model("anthropic", server.url) as model:
        events = await collect(model)
    message = final(events)
    assert message.stop_reason == stop_reason
    assert message.text == "ok"
    assert message.usage == Usage(input_tokens=5, output_tokens=3)
    if error is None:
        assert isinstance(events[-1], Done)
    else:
        assert isinstance(events[-1], Error)
        assert error in (message.error_message or "")


async def test_overloaded_error_event_with_status_200(server: Server) -> None:
    body = frames(
        {"type": "message_start", "message": {"usage": {"input_tokens": 5}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Par"}},
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        named=True,
    )
    server.add(sse(body))
    async with make_model("anthropic", server.url) as model:
        events = await collect(model)
    message = final(events)
    assert isinstance(events[-1], Error)
    assert message.content == (Text(text="Par"),)
    assert "overloaded_error: Overloaded" in (message.error_message or "")
    # An error inside a stream is not retried: bytes of the reply had arrived.
    assert len(server.requests) == 1


async def test_unknown_blocks_and_events_are_ignored(server: Server) -> None:
    body = frames(
        {"type": "message_start", "message": {"usage": {}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "server_tool_use", "id": "s1", "name": "web_search"},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"q": 1}'},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "citations_delta", "citation": {"cited_text": "x"}},
        },
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "some_future_event", "x": 1},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        {"type": "message_stop"},
        named=True,
    )
    server.add(sse(body))
    async with make_model("anthropic", server.url) as model:
        message = final(await collect(model))
    assert message.content == (Text(text="Hi"),)
    assert message.stop_reason == "stop"


async def test_request_body_with_tool_results_and_images(server: Server) -> None:
    png = PNG
    reply = AssistantMessage(
        content=(
            Thinking(thinking="Two calls.", signature="c2ln"),
            Text(text="Let me look."),
            ToolCall(id="toolu_1", name="read", arguments={"path": "a.txt"}),
            ToolCall(id="toolu_2", name="screenshot", arguments={}),
        ),
        stop_reason="tool_use",
        provider="anthropic",
    )
    req = ModelRequest(
        system_prompt="Be brief.",
        messages=(
            UserMessage(
                content=(Text(text="What is in a.txt?"), Image(data=png, mime_type="image/png"))
            ),
            reply,
            ToolResultMessage(
                tool_call_id="toolu_1", tool_name="read", content=(Text(text="hello"),)
            ),
            ToolResultMessage(
                tool_call_id="toolu_2",
                tool_name="screenshot",
                content=(Image(data=png, mime_type="image/png"),),
                is_error=True,
            ),
            UserMessage.text("Also check b.txt"),
        ),
        tools=(
            ToolSpec(
                name="read",
                description="Read a file.",
                parameters={"properties": {"path": {"type": "string"}}, "required": ["path"]},
            ),
        ),
        options=ModelOptions(max_tokens=500, temperature=0.2, extra={"metadata": {"user_id": "u"}}),
    )
    server.add(recorded("anthropic_text.sse"))
    async with make_model("anthropic", server.url, prompt_cache=False) as model:
        await collect(model, req)
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}
    # The format of https://docs.anthropic.com/en/api/messages
    assert server.requests[0].json() == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 500,
        "stream": True,
        "temperature": 0.2,
        "metadata": {"user_id": "u"},
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "What is in a.txt?"}, image]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Two calls.", "signature": "c2ln"},
                    {"type": "text", "text": "Let me look."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "read",
                        "input": {"path": "a.txt"},
                    },
                    {"type": "tool_use", "id": "toolu_2", "name": "screenshot", "input": {}},
                ],
            },
            {
                # All results of one reply in the next user turn, in order, then the
                # user's own text.
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "hello"}],
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": [image],
                        "is_error": True,
                    },
                    {"type": "text", "text": "Also check b.txt"},
                ],
            },
        ],
        "tools": [
            {
                "name": "read",
                "description": "Read a file.",
                "input_schema": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
            }
        ],
    }


def test_foreign_ids_and_unsigned_thinking() -> None:
    model = Anthropic("m", base_url="http://127.0.0.1:9", api_key="", prompt_cache=False)
    reply = AssistantMessage(
        content=(
            Thinking(thinking="Reasoning from elsewhere.", signature="reasoning_content"),
            ToolCall(id="call|a.b/c", name="ls", arguments={}),
        ),
        stop_reason="tool_use",
        provider="openai",
    )
    body = model.request_body(
        ModelRequest(
            system_prompt="",
            messages=(
                UserMessage.text("a"),
                reply,
                ToolResultMessage(
                    tool_call_id="call|a.b/c", tool_name="ls", content=(Text(text="ok"),)
                ),
            ),
        )
    )
    assistant, results = body["messages"][1], body["messages"][2]
    assert assistant["content"][0] == {"type": "text", "text": "Reasoning from elsewhere."}
    call_id = assistant["content"][1]["id"]
    assert call_id.startswith("call_a_b_c_")
    assert results["content"][0]["tool_use_id"] == call_id
    assert "system" not in body


def test_unknown_reasoning_level_is_an_error_event_not_a_crash() -> None:
    model = Anthropic("m", base_url="http://127.0.0.1:9", api_key="")
    with pytest.raises(ValueError, match="unknown reasoning level"):
        model.request_body(request(reasoning="maximum"))
    assert model.request_body(request(reasoning="3000"))["thinking"]["budget_tokens"] == 3000


async def test_bad_request_becomes_error_event() -> None:
    async with Anthropic("m", base_url="http://127.0.0.1:9", api_key="") as model:
        events = await collect(model, request(reasoning="maximum"))
    assert isinstance(events[-1], Error)
    assert "cannot build the request" in (final(events).error_message or "")


def test_key_never_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    model = Anthropic("claude")
    assert KEY not in repr(model)
    assert "api_key=<set>" in repr(model)
