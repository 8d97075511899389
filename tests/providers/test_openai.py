"""OpenAIChat against a real HTTP server: recorded streams, stop reasons, request bodies."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from tests.kit.http_server import frames, recorded, sse
from tests.kit.providers import KEY, PNG, collect, final, make_model, request
from trio_agent import (
    AssistantMessage,
    Done,
    Error,
    Image,
    Model,
    ModelOptions,
    ModelRequest,
    Text,
    TextDelta,
    Thinking,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from trio_agent.providers import Anthropic, OpenAIChat

if TYPE_CHECKING:
    from tests.kit.http_server import Server


async def test_plain_text_with_usage_and_cached_tokens(server: Server) -> None:
    server.add(recorded("openai_text.sse"))
    async with make_model("openai", server.url) as model:
        events = await collect(model)
    message = final(events)
    assert isinstance(events[-1], Done)
    assert message.content == (
        Text(text="The project is called tiny-pi — a small agent runtime\u2028(see README)."),
    )
    assert message.stop_reason == "stop"
    # prompt_tokens 1187 includes 1024 cached ones.
    assert message.usage == Usage(input_tokens=163, output_tokens=12, cache_read_tokens=1024)
    assert message.provider == "openai"
    assert message.model == "gpt-4.1"
    assert [e.delta for e in events if isinstance(e, TextDelta)][:2] == ["The", " project"]
    [sent] = server.requests
    assert sent.method == "POST"
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["accept"] == "text/event-stream"
    body = sent.json()
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["model"] == "gpt-4.1"
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hi"},
    ]


async def test_parallel_tool_calls_accumulate_by_index(server: Server) -> None:
    server.add(recorded("openai_parallel_tools.sse"))
    async with make_model("openai", server.url) as model:
        events = await collect(model)
    message = final(events)
    assert message.stop_reason == "tool_use"
    assert message.content == (
        ToolCall(id="call_pQ7rNw1yVbK3sXe0L2mAtZ9d", name="read", arguments={"path": "README.md"}),
        ToolCall(
            id="call_8HcXo2WkdT5jFqGz1UeRm6Ys",
            name="grep",
            arguments={"pattern": "TODO", "path": "src"},
        ),
        ToolCall(id="call_Zt4VbN0qWm7yLc2KsP9eXd1R", name="ls", arguments={}),
    )
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert [(s.index, s.name) for s in starts] == [(0, "read"), (1, "grep"), (2, "ls")]
    assert "".join(e.delta for e in events if isinstance(e, ToolCallDelta) and e.index == 0) == (
        '{"path": "README.md"}'
    )
    assert message.usage == Usage(input_tokens=312, output_tokens=58)


async def test_interleaved_tool_call_fragments(server: Server) -> None:
    # Fragments of two calls alternate; each is accumulated under its own index.
    def chunk(calls: list[dict[str, Any]]) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": {"tool_calls": calls}, "finish_reason": None}]}

    body = frames(
        chunk([{"index": 0, "id": "a", "function": {"name": "one", "arguments": '{"x"'}}]),
        chunk([{"index": 1, "id": "b", "function": {"name": "two", "arguments": '{"y"'}}]),
        chunk([{"index": 0, "function": {"arguments": ": 1}"}}]),
        chunk([{"index": 1, "function": {"arguments": ": 2}"}}]),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        "[DONE]",
    )
    server.add(sse(body))
    async with make_model("openai", server.url) as model:
        message = final(await collect(model))
    assert message.content == (
        ToolCall(id="a", name="one", arguments={"x": 1}),
        ToolCall(id="b", name="two", arguments={"y": 2}),
    )


async def test_reasoning_content_becomes_thinking_and_goes_back(server: Server) -> None:
    server.add(recorded("openai_reasoning.sse"), recorded("openai_text.sse"))
    async with make_model("openai", server.url, provider="llama.cpp") as model:
        message = final(await collect(model))
        assert message.content == (
            Thinking(thinking="The user wants a greeting.", signature="reasoning_content"),
            Text(text="Hello!"),
        )
        assert message.usage == Usage(input_tokens=71, output_tokens=9)
        # Sent back in the field it came in, to the same provider.
        follow = ModelRequest(
            system_prompt="",
            messages=(UserMessage.text("hi"), message, UserMessage.text("again")),
        )
        await collect(model, follow)
    assert server.requests[1].json()["messages"][1] == {
        "role": "assistant",
        "content": "Hello!",
        "reasoning_content": "The user wants a greeting.",
    }


def _finish(reason: str | None, *, calls: bool = False) -> str:
    delta: dict[str, Any] = {"content": "partial answer"}
    if calls:
        delta = {
            "tool_calls": [{"index": 0, "id": "c1", "function": {"name": "ls", "arguments": "{}"}}]
        }
    return frames(
        {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]},
        "[DONE]",
    )


@pytest.mark.parametrize(
    ("reason", "calls", "stop_reason", "error"),
    [
        ("stop", False, "stop", None),
        ("length", False, "length", None),
        ("tool_calls", True, "tool_use", None),
        ("function_call", True, "tool_use", None),
        # Servers that finish a tool-calling reply with "stop" (ollama/ollama#7963).
        ("stop", True, "tool_use", None),
        (None, False, "stop", None),
        (None, True, "tool_use", None),
        ("content_filter", False, "error", "content filter"),
        ("something_new", False, "error", "something_new"),
    ],
)
async def test_every_finish_reason(
    server: Server, reason: str | None, calls: bool, stop_reason: str, error: str | None
) -> None:
    server.add(sse(_finish(reason, calls=calls)))
    async with make_model("openai", server.url) as model:
        events = await collect(model)
    message = final(events)
    assert message.stop_reason == stop_reason
    if error is None:
        assert isinstance(events[-1], Done)
    else:
        assert isinstance(events[-1], Error)
        assert error in (message.error_message or "")
        # The content is kept.
        assert message.text == "partial answer"


def _transcript() -> tuple[ModelRequest, str]:
    png = PNG
    first = AssistantMessage(
        content=(
            Text(text="Let me look."),
            ToolCall(id="call_1", name="read", arguments={"path": "a.txt"}),
            ToolCall(id="call_2", name="screenshot", arguments={}),
        ),
        stop_reason="tool_use",
        provider="openai",
        model="gpt-4.1",
    )
    messages = (
        UserMessage(
            content=(Text(text="What is in a.txt?"), Image(data=png, mime_type="image/png"))
        ),
        first,
        ToolResultMessage(tool_call_id="call_1", tool_name="read", content=(Text(text="hello"),)),
        ToolResultMessage(
            tool_call_id="call_2",
            tool_name="screenshot",
            content=(Image(data=png, mime_type="image/png"),),
            is_error=False,
        ),
        UserMessage.text("Also check b.txt"),
    )
    tools = (
        ToolSpec(
            name="read",
            description="Read a file.",
            parameters={
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        ),
    )
    return (
        ModelRequest(
            system_prompt="Be brief.",
            messages=messages,
            tools=tools,
            options=ModelOptions(max_tokens=500, temperature=0.2, extra={"seed": 7}),
        ),
        png,
    )


async def test_request_body_with_tool_results_and_images(server: Server) -> None:
    req, png = _transcript()
    server.add(recorded("openai_text.sse"))
    async with make_model("openai", server.url) as model:
        await collect(model, req)
    body = server.requests[0].json()
    url = f"data:image/png;base64,{png}"
    # The format of https://platform.openai.com/docs/api-reference/chat/create
    assert body == {
        "model": "gpt-4.1",
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_completion_tokens": 500,
        "temperature": 0.2,
        "seed": 7,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in a.txt?"},
                    {"type": "image_url", "image_url": {"url": url}},
                ],
            },
            {
                "role": "assistant",
                "content": "Let me look.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read", "arguments": '{"path": "a.txt"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "screenshot", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
            {"role": "tool", "tool_call_id": "call_2", "content": "(see attached image)"},
            # Tool messages hold text only: the images follow the results.
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Attached image(s) from tool result:"},
                    {"type": "image_url", "image_url": {"url": url}},
                ],
            },
            {"role": "user", "content": "Also check b.txt"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "read",
                    "description": "Read a file.",
                    "parameters": {
                        "type": "object",
                        "properties": {"path": {"type": "string"}},
                        "required": ["path"],
                    },
                },
            }
        ],
    }


async def test_failed_replies_and_their_results_are_not_sent() -> None:
    model = OpenAIChat("m", base_url="http://127.0.0.1:9/v1", api_key="")
    aborted = AssistantMessage(
        content=(Text(text="half"), ToolCall(id="x1", name="ls", arguments={})),
        stop_reason="aborted",
        error_message="aborted",
    )
    unanswered = AssistantMessage(
        content=(ToolCall(id="x2", name="ls", arguments={}),), stop_reason="tool_use"
    )
    req = ModelRequest(
        system_prompt="",
        messages=(
            UserMessage.text("a"),
            aborted,
            ToolResultMessage(tool_call_id="x1", tool_name="ls", content=(Text(text="skip"),)),
            UserMessage.text("b"),
            unanswered,
            UserMessage.text("c"),
            ToolResultMessage(tool_call_id="zz", tool_name="ls", content=(Text(text="orphan"),)),
        ),
    )
    assert model.request_body(req)["messages"] == [
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "x2", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "x2", "content": "No result provided"},
        {"role": "user", "content": "c"},
    ]


async def test_foreign_thinking_goes_as_text_and_long_ids_are_shortened() -> None:
    model = OpenAIChat("m", base_url="http://127.0.0.1:9/v1", api_key="")
    long_id = "toolu_" + "x" * 60
    reply = AssistantMessage(
        content=(
            Thinking(thinking="Consider it.", signature="sig"),
            ToolCall(id=long_id, name="ls", arguments={}),
        ),
        stop_reason="tool_use",
        provider="anthropic",
    )
    req = ModelRequest(
        system_prompt="",
        messages=(
            UserMessage.text("a"),
            reply,
            ToolResultMessage(tool_call_id=long_id, tool_name="ls", content=(Text(text="ok"),)),
        ),
    )
    messages = model.request_body(req)["messages"]
    call_id = messages[1]["tool_calls"][0]["id"]
    assert len(call_id) <= 40
    assert messages[1]["content"] == "Consider it."
    assert messages[2] == {"role": "tool", "tool_call_id": call_id, "content": "ok"}


async def test_key_from_environment_never_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    model = OpenAIChat("gpt-4.1")
    assert KEY not in repr(model)
    assert "api_key=<set>" in repr(model)
    monkeypatch.delenv("OPENAI_API_KEY")
    assert "api_key=<unset>" in repr(OpenAIChat("local", base_url="http://127.0.0.1:8080/v1"))


async def test_no_key_no_authorization_header(server: Server) -> None:
    server.add(recorded("openai_text.sse"))
    async with OpenAIChat("local", base_url=server.url + "/v1", api_key="") as model:
        await collect(model)
    assert "authorization" not in server.requests[0].headers


async def test_reasoning_effort_and_max_tokens_field(server: Server) -> None:
    server.add(recorded("openai_text.sse"))
    async with make_model("openai", server.url, max_tokens_field="max_tokens") as model:
        await collect(model, request(reasoning="high", max_tokens=64, model="other"))
    body = server.requests[0].json()
    assert body["reasoning_effort"] == "high"
    assert body["max_tokens"] == 64
    assert body["model"] == "other"
    assert "max_completion_tokens" not in body


def test_request_body_is_json() -> None:
    req, _ = _transcript()
    model = OpenAIChat("m", base_url="http://127.0.0.1:9/v1", api_key="")
    assert json.loads(json.dumps(model.request_body(req)))["model"] == "m"


async def test_mid_stream_error_frame_keeps_partial_text(server: Server) -> None:
    body = frames(
        {"choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}]},
        {"error": {"message": "The server had an error", "type": "server_error"}},
    )
    server.add(sse(body, end="stall"))
    async with make_model("openai", server.url) as model:
        events = await collect(model)
    message = final(events)
    assert isinstance(events[-1], Error)
    assert message.stop_reason == "error"
    assert message.content == (Text(text="Hel"),)
    assert "server_error: The server had an error" in (message.error_message or "")


async def test_tool_call_end_event_carries_the_call(server: Server) -> None:
    server.add(recorded("openai_parallel_tools.sse"))
    async with make_model("openai", server.url) as model:
        events = await collect(model)
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    assert [e.tool_call for e in ends] == list(final(events).tool_calls)


async def test_connection_is_reused_after_a_complete_reply(server: Server) -> None:
    server.add(recorded("openai_text.sse"), recorded("openai_parallel_tools.sse"))
    async with make_model("openai", server.url) as model:
        await collect(model)
        await collect(model)
    # The rest of the body was read after [DONE], so the connection went back to the pool.
    assert server.connections == 1


async def test_refusal_is_text(server: Server) -> None:
    server.add(
        sse(
            frames(
                {"choices": [{"index": 0, "delta": {"refusal": "I can't help"}}]},
                {"choices": [{"index": 0, "delta": {"refusal": " with that."}}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                "[DONE]",
            )
        )
    )
    async with make_model("openai", server.url) as model:
        message = final(await collect(model))
    assert message.text == "I can't help with that."


async def test_a_key_httpx_refuses_is_an_error_event_without_the_key(server: Server) -> None:
    bad_key = "sk-\u00e9t\u00e9-" + "x" * 30 + "\n"
    async with make_model("openai", server.url, api_key=bad_key) as model:
        events = await collect(model)
    text = final(events).error_message or ""
    assert "could not be sent" in text
    assert "x" * 30 not in text
    assert server.requests == []


def test_models_implement_the_model_protocol() -> None:
    assert isinstance(OpenAIChat("m", api_key=""), Model)
    assert isinstance(Anthropic("m", api_key=""), Model)
    import trio_agent.providers as providers

    assert providers.__all__ == sorted(providers.__all__)
    assert all(hasattr(providers, name) for name in providers.__all__)
