"""OpenAIResponses against a real HTTP server, with the official ``openai`` SDK's stream
parser and Responses accumulation as the oracle: every recorded stream, and random ones
cut at random byte boundaries, must decode to the same message, calls, arguments,
reasoning, stop reason and usage with both."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from tests.kit.http_server import STREAMS, recorded, sse
from tests.kit.providers import (
    KEY,
    TOOLS,
    collect,
    decode_chunks,
    final,
    make_model,
)
from tests.kit.responses import Call, Decoded, Message, Reasoning, Reply, body, chunked
from trio_agent import (
    AssistantMessage,
    Context,
    Done,
    Error,
    ModelOptions,
    ModelRequest,
    Text,
    Thinking,
    ThinkingDelta,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
    run_agent_loop,
)
from trio_agent.providers import OpenAIResponses
from trio_agent.providers._reply import ReplyBuilder
from trio_agent.providers._responses import _Decoder, split_call_id

if TYPE_CHECKING:
    from tests.kit.http_server import Server

openai = pytest.importorskip("openai", reason="the openai SDK (the [test] extra) is the oracle")
from tests.kit.responses import sdk_decode  # noqa: E402


def stop_of(decoded: Decoded) -> str:
    """The stop reason the SDK's view implies, by the documented mapping."""
    if decoded.status == "completed":
        return "tool_use" if decoded.calls else "stop"
    if decoded.status == "incomplete":
        return "length" if decoded.reason == "max_output_tokens" else "error"
    return "error"


def ours_view(message: AssistantMessage) -> Decoded:
    reasoning = []
    for block in message.content:
        if type(block) is Thinking:
            item = json.loads(block.signature or "{}")
            reasoning.append((block.thinking, item.get("encrypted_content")))
    usage = message.usage
    return Decoded(
        texts=tuple(b.text for b in message.content if type(b) is Text),
        calls=tuple(
            (split_call_id(c.id)[0], c.name, dict(c.arguments)) for c in message.tool_calls
        ),
        reasoning=tuple(reasoning),
        status=message.stop_reason,
        reason=None,
        usage=(
            usage.input_tokens + usage.cache_read_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
        ),
    )


def assert_agree(message: AssistantMessage, theirs: Decoded) -> None:
    ours = ours_view(message)
    assert ours.texts == theirs.texts
    assert ours.calls == theirs.calls
    assert ours.reasoning == theirs.reasoning
    assert message.stop_reason == stop_of(theirs)
    if message.stop_reason != "error" or theirs.status != "failed":
        assert ours.usage == theirs.usage


FIXTURES = [
    "responses_text.sse",
    "responses_parallel_tools.sse",
    "responses_reasoning.sse",
    "responses_refusal.sse",
    "responses_max_tokens.sse",
    "responses_content_filter.sse",
    "responses_failed.sse",
]


@pytest.mark.parametrize("name", FIXTURES)
async def test_recorded_streams_agree_with_the_sdk(name: str, server: Server) -> None:
    server.add(recorded(name, split=37))
    async with make_model("responses", server.url) as model:
        message = final(await collect(model))
    assert_agree(message, sdk_decode([(STREAMS / name).read_bytes()]))


async def test_plain_text_usage_and_request(server: Server) -> None:
    server.add(recorded("responses_text.sse"))
    async with make_model("responses", server.url) as model:
        events = await collect(model)
    message = final(events)
    assert isinstance(events[-1], Done)
    assert message.content == (
        Text(
            text="The project is called tiny-pi — a small agent runtime\u2028(see README).",
            signature="msg_68e1a2b3c4d5e6f7",
        ),
    )
    assert message.stop_reason == "stop"
    # input_tokens 1187 includes 1024 cached ones.
    assert message.usage == Usage(input_tokens=163, output_tokens=12, cache_read_tokens=1024)
    assert message.provider == "openai-responses"
    [sent] = server.requests
    assert sent.path == "/v1/responses"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.json() == {
        "model": "gpt-5-mini",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        "stream": True,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "instructions": "You are terse.",
    }


async def test_parallel_calls_with_item_ids(server: Server) -> None:
    server.add(recorded("responses_parallel_tools.sse"))
    async with make_model("responses", server.url) as model:
        message = final(await collect(model))
    assert message.stop_reason == "tool_use"
    assert message.content == (
        ToolCall(
            id="call_pQ7rNw1yVbK3sXe0L2mAtZ9d|fc_68e1a001",
            name="read",
            arguments={"path": "README.md"},
        ),
        ToolCall(
            id="call_8HcXo2WkdT5jFqGz1UeRm6Ys|fc_68e1a002",
            name="grep",
            arguments={"pattern": "TODO", "path": "src"},
        ),
        ToolCall(id="call_Zt4VbN0qWm7yLc2KsP9eXd1R|fc_68e1a003", name="ls", arguments={}),
    )


async def test_reasoning_streams_as_thinking_and_keeps_the_item(server: Server) -> None:
    server.add(recorded("responses_reasoning.sse"))
    async with make_model("responses", server.url) as model:
        events = await collect(model)
    message = final(events)
    thinking = message.content[0]
    assert type(thinking) is Thinking
    assert thinking.thinking == "**Reading the file**\n\nThe user wants a.txt.\n\nThen I add."
    assert "".join(e.delta for e in events if isinstance(e, ThinkingDelta)) == thinking.thinking
    assert json.loads(thinking.signature or "") == {
        "type": "reasoning",
        "id": "rs_68e1b001",
        "summary": [
            {"type": "summary_text", "text": "**Reading the file**\n\nThe user wants a.txt."},
            {"type": "summary_text", "text": "Then I add."},
        ],
        "encrypted_content": "gAAAAABo4KX1-encrypted-reasoning-blob==",
    }
    assert message.usage == Usage(input_tokens=164, output_tokens=96, cache_read_tokens=256)


@pytest.mark.parametrize(
    ("name", "stop", "text"),
    [
        ("responses_refusal.sse", "stop", "I can't help with that."),
        ("responses_max_tokens.sse", "length", "A long answer that was cut"),
        ("responses_content_filter.sse", "error", "Some text"),
        ("responses_failed.sse", "error", "Partial"),
    ],
)
async def test_stop_reasons(name: str, stop: str, text: str, server: Server) -> None:
    server.add(recorded(name))
    async with make_model("responses", server.url) as model:
        events = await collect(model)
    message = final(events)
    assert message.stop_reason == stop
    assert message.text == text
    if stop == "error":
        assert isinstance(events[-1], Error)
        assert message.error_message
    if name == "responses_failed.sse":
        assert "The server had an error while processing your request." in (
            message.error_message or ""
        )


async def test_error_event_mid_stream_keeps_the_partial_text(server: Server) -> None:
    server.add(recorded("responses_error.sse", end="stall"))
    async with make_model("responses", server.url) as model:
        message = final(await collect(model))
    assert message.stop_reason == "error"
    assert message.content == (Text(text="Hel"),)
    assert "server_error: The model is overloaded." in (message.error_message or "")
    # The SDK sees the same error event.
    from openai._models import construct_type
    from openai.types.responses import ResponseStreamEvent

    last = (STREAMS / "responses_error.sse").read_text().strip().rsplit("data: ", 1)[1]
    event: Any = construct_type(type_=ResponseStreamEvent, value=json.loads(last))
    assert event.type == "error"
    assert event.message in (message.error_message or "")


async def test_options_and_tools_in_the_request(server: Server) -> None:
    server.add(recorded("responses_text.sse"))
    spec = ToolSpec(name="ls", description="List.", parameters={"type": "object"})
    options = ModelOptions(
        model="o4-mini", reasoning="high", max_tokens=99, temperature=0.5, cache="session-7"
    )
    req = ModelRequest(
        system_prompt="", messages=(UserMessage.text("x"),), tools=(spec,), options=options
    )
    async with make_model("responses", server.url, store=True) as model:
        await collect(model, req)
    sent = server.requests[0].json()
    assert sent["model"] == "o4-mini"
    assert sent["reasoning"] == {"effort": "high", "summary": "auto"}
    assert sent["max_output_tokens"] == 99
    assert sent["temperature"] == 0.5
    assert sent["prompt_cache_key"] == "session-7"
    assert sent["store"] is True
    assert "include" not in sent
    assert "instructions" not in sent
    assert sent["tools"] == [
        {
            "type": "function",
            "name": "ls",
            "description": "List.",
            "parameters": {"type": "object"},
            "strict": False,
        }
    ]


def _received_items(raw: str) -> list[dict[str, Any]]:
    """The output items of a recorded stream, as ``output_item.done`` gave them."""
    items = []
    for frame in raw.split("\n\n"):
        if "response.output_item.done" in frame:
            items.append(json.loads(frame.split("data: ", 1)[1])["item"])
    return items


async def test_items_received_on_one_turn_are_sent_back_on_the_next(server: Server) -> None:
    first = body(
        Reply(
            items=(
                Reasoning(("Plan: read both.",), "enc-1==", id="rs_1"),
                Message(("Reading.",), id="msg_1"),
                Call("call_a", "read", '{"path": "a.txt"}', id="fc_a"),
                Call("call_b", "read", '{"path": "b.txt"}', id="fc_b"),
            )
        )
    )
    second = body(
        Reply(
            items=(
                Reasoning((), "enc-2==", id="rs_2"),
                Call("call_c", "add", '{"a": 2, "b": 3}', id="fc_c"),
            )
        )
    )
    third = body(Reply(items=(Message(("hello world, 5",), id="msg_3"),)))
    server.add(sse(first, split=50), sse(second, split=50), sse(third, split=50))
    context = Context(system_prompt="Agent.", tools=TOOLS)
    async with make_model("responses", server.url) as model:
        with trio.fail_after(10):
            result = await run_agent_loop([UserMessage.text("go")], context, model)
    assert result.reason == "stop"
    assert result.messages[-1].text == "hello world, 5"  # type: ignore[union-attr]
    sent = [r.json()["input"] for r in server.requests]
    received_1, received_2 = _received_items(first), _received_items(second)
    # Turn 2 carries turn 1's items exactly (ids, encrypted reasoning), then the results.
    assert sent[1][0] == {"role": "user", "content": [{"type": "input_text", "text": "go"}]}
    assert sent[1][1] == received_1[0]
    assert sent[1][2] == {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Reading.", "annotations": []}],
        "status": "completed",
        "id": "msg_1",
    }
    for got, item in zip(sent[1][3:5], received_1[2:], strict=True):
        assert got == {k: item[k] for k in ("type", "call_id", "name", "arguments", "id")}
    assert sent[1][5:] == [
        {"type": "function_call_output", "call_id": "call_a", "output": "hello"},
        {"type": "function_call_output", "call_id": "call_b", "output": "world"},
    ]
    # Turn 3: all of turn 2 again, plus turn 2's items and result.
    assert sent[2][: len(sent[1])] == sent[1]
    assert sent[2][len(sent[1])] == received_2[0]
    assert sent[2][len(sent[1]) + 1]["call_id"] == "call_c"
    assert sent[2][-1] == {"type": "function_call_output", "call_id": "call_c", "output": "5"}


def test_reasoning_without_encrypted_content_is_not_sent_back_statelessly() -> None:
    item = {"type": "reasoning", "id": "rs_9", "summary": []}
    reply = AssistantMessage(
        content=(Thinking(thinking="", signature=json.dumps(item)), Text(text="ok")),
        stop_reason="stop",
        provider="openai-responses",
    )
    req = ModelRequest(system_prompt="", messages=(UserMessage.text("a"), reply))
    stateless = OpenAIResponses("m", api_key="k").request_body(req)["input"]
    stored = OpenAIResponses("m", api_key="k", store=True).request_body(req)["input"]
    assert [i.get("type") for i in stateless] == [None, "message"]
    assert stored[1] == item


def test_another_providers_history_is_sent_as_plain_items() -> None:
    reply = AssistantMessage(
        content=(
            Thinking(thinking="hmm", signature="anthropic-sig"),
            Text(text="calling"),
            ToolCall(id="toolu_01", name="ls", arguments={"p": 1}),
        ),
        stop_reason="tool_use",
        provider="anthropic",
    )
    result = ToolResultMessage(tool_call_id="toolu_01", tool_name="ls", content=(Text(text="x"),))
    req = ModelRequest(system_prompt="", messages=(UserMessage.text("a"), reply, result))
    items = OpenAIResponses("m", api_key="k").request_body(req)["input"]
    assert items[1:] == [
        {"role": "assistant", "content": "hmm"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "calling", "annotations": []}],
            "status": "completed",
        },
        {"type": "function_call", "call_id": "toolu_01", "name": "ls", "arguments": '{"p": 1}'},
        {"type": "function_call_output", "call_id": "toolu_01", "output": "x"},
    ]


# --- random streams, cut at random byte boundaries, decoded by both ----------------------

_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)
_args = st.dictionaries(st.text(max_size=5), st.integers() | _text, max_size=3)


@st.composite
def replies(draw: st.DrawFn) -> Reply:
    kinds = draw(st.lists(st.sampled_from(["reasoning", "message", "call"]), max_size=5))
    items: list[Any] = []
    for n, kind in enumerate(kinds):
        if kind == "reasoning":
            summary = tuple(draw(st.lists(_text.filter(bool), max_size=3)))
            encrypted = draw(st.none() | st.text("abcXYZ019+/=", min_size=1, max_size=20))
            items.append(Reasoning(summary, encrypted, id=f"rs_{n}"))
        elif kind == "message":
            refusal = draw(st.booleans())
            parts = tuple(draw(st.lists(_text, min_size=1, max_size=1 if refusal else 2)))
            items.append(Message(parts, refusal, id=f"msg_{n}"))
        else:
            args = json.dumps(draw(_args), ensure_ascii=draw(st.booleans()))
            items.append(Call(f"call_{n}", draw(st.sampled_from(["ls", "read"])), args, f"fc_{n}"))
    end = draw(
        st.sampled_from(
            [
                ("completed", None),
                ("incomplete", "max_output_tokens"),
                ("incomplete", "content_filter"),
            ]
        )
    )
    total = draw(st.integers(0, 10_000))
    usage = (total, draw(st.integers(0, 5000)), draw(st.integers(0, total)))
    pieces = draw(st.integers(1, 8))
    return Reply(tuple(items), status=end[0], reason=end[1], usage=usage, pieces=pieces)


@given(reply=replies(), cuts=st.lists(st.integers(0, 20_000), max_size=40))
def test_random_streams_cut_anywhere_agree_with_the_sdk(reply: Reply, cuts: list[int]) -> None:
    data = body(reply).encode()
    theirs = sdk_decode(chunked(data, cuts))
    result = decode_chunks(_Decoder(ReplyBuilder(model="m", provider="p")), chunked(data, cuts))
    message = result.message
    if (
        message.stop_reason == "error"
        and message.error_message
        and "content filter" not in (message.error_message)
    ):
        raise AssertionError(message.error_message)
    assert_agree(message, theirs)


async def test_429_retry_after_then_the_reply(server: Server) -> None:
    from tests.kit.http_server import error

    busy = {"error": {"message": "Rate limit reached", "type": "requests", "code": None}}
    server.add(error(429, busy, [("retry-after", "1")]), recorded("responses_text.sse"))
    async with make_model("responses", server.url) as model:
        events = await collect(model)
    assert isinstance(events[-1], Done)
    first, second = (r.at for r in server.requests)
    assert 1.0 <= second - first < 1.7
