"""Gemini against a real HTTP server, with the official ``google-genai`` SDK's stream
reader and response types as the oracle: every recorded stream, and random ones cut at
random byte boundaries, decode to the same text, thoughts, calls, thought signatures,
stop reason and usage with both."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import attrs
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from tests.kit.gemini import Part, Reply, body, ours_view, signature
from tests.kit.http_server import STREAMS, error, recorded, sse
from tests.kit.providers import (
    FAST,
    KEY,
    TOOLS,
    collect,
    decode_chunks,
    final,
    make_model,
)
from tests.kit.responses import chunked
from trio_agent import (
    AssistantMessage,
    Context,
    Done,
    Error,
    Image,
    ModelOptions,
    ModelRequest,
    Text,
    Thinking,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
    run_agent_loop,
)
from trio_agent.providers import Gemini, RetryPolicy
from trio_agent.providers._gemini import _Decoder, stable_call_id
from trio_agent.providers._reply import ReplyBuilder

if TYPE_CHECKING:
    from tests.kit.gemini import Decoded
    from tests.kit.http_server import Server

pytest.importorskip("google.genai", reason="google-genai (the [test] extra) is the oracle")
from tests.kit.gemini import sdk_decode

_STOP = {"STOP": "stop", "MAX_TOKENS": "length"}


def stop_of(decoded: Decoded) -> str:
    """The stop reason the SDK's view implies, by the documented mapping."""
    if decoded.blocked or decoded.finish is None:
        return "error"
    if decoded.finish == "STOP" and decoded.calls:
        return "tool_use"
    return _STOP.get(decoded.finish, "error")


def assert_agree(message: AssistantMessage, theirs: Decoded) -> None:
    ours = ours_view(message)
    assert ours.text == theirs.text
    assert ours.thoughts == theirs.thoughts
    assert ours.calls == theirs.calls
    assert ours.signatures == theirs.signatures
    assert ours.usage == theirs.usage
    assert message.stop_reason == stop_of(theirs)


FIXTURES = [
    "gemini_text.sse",
    "gemini_tools.sse",
    "gemini_thinking.sse",
    "gemini_max_tokens.sse",
    "gemini_safety.sse",
    "gemini_recitation.sse",
    "gemini_blocked.sse",
]


@pytest.mark.parametrize("name", FIXTURES)
async def test_recorded_streams_agree_with_the_sdk(name: str, server: Server) -> None:
    server.add(recorded(name, split=29))
    async with make_model("gemini", server.url) as model:
        message = final(await collect(model))
    assert_agree(message, sdk_decode([(STREAMS / name).read_bytes()]))


async def test_plain_text_usage_and_request(server: Server) -> None:
    server.add(recorded("gemini_text.sse"))
    async with make_model("gemini", server.url) as model:
        events = await collect(model)
    message = final(events)
    assert isinstance(events[-1], Done)
    assert message.content == (
        Text(
            text="The project is called tiny-pi — a small agent runtime\u2028(see README).",
            signature=signature("text"),
        ),
    )
    assert message.stop_reason == "stop"
    assert message.usage == Usage(input_tokens=163, output_tokens=12, cache_read_tokens=1024)
    assert message.provider == "gemini"
    [sent] = server.requests
    assert sent.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert sent.headers["x-goog-api-key"] == KEY
    assert "authorization" not in sent.headers
    assert sent.json() == {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "systemInstruction": {"parts": [{"text": "You are terse."}]},
    }


async def test_calls_get_stable_ids(server: Server) -> None:
    server.add(recorded("gemini_tools.sse"), recorded("gemini_tools.sse", split=3))
    async with make_model("gemini", server.url) as model:
        first = final(await collect(model))
        second = final(await collect(model))
    assert first.stop_reason == "tool_use"
    assert [(c.name, dict(c.arguments)) for c in first.tool_calls] == [
        ("read", {"path": "README.md"}),
        ("grep", {"pattern": "TODO", "path": "src"}),
        ("ls", {}),
    ]
    ids = [c.id for c in first.tool_calls]
    assert len(set(ids)) == 3
    assert all(i.startswith("call_") for i in ids)
    # The same stream, cut differently, gives the same ids.
    assert [c.id for c in second.tool_calls] == ids
    assert ids[0] == stable_call_id("resp-g1", 0, "read", {"path": "README.md"})
    assert ids[0] != stable_call_id("resp-g2", 0, "read", {"path": "README.md"})


async def test_a_call_id_from_the_api_is_kept(server: Server) -> None:
    server.add(sse(body(Reply(parts=(Part("call", name="ls", args={}, id="fc-7"),)))))
    async with make_model("gemini", server.url) as model:
        message = final(await collect(model))
    assert message.tool_calls == (ToolCall(id="fc-7", name="ls", arguments={}),)


async def test_thoughts_and_signatures(server: Server) -> None:
    server.add(recorded("gemini_thinking.sse"))
    async with make_model("gemini", server.url) as model:
        message = final(await collect(model))
    assert message.content[:3] == (
        Thinking(
            thinking="**Planning**\nThe user wants a.txt read.", signature=signature("thought")
        ),
        Text(text="Let me look."),
        # The call's signature, kept just before it.
        Thinking(thinking="", signature=signature("call")),
    )
    assert isinstance(message.content[3], ToolCall)
    # Output counts the thoughts too; 256 of the 420 prompt tokens were cached.
    assert message.usage == Usage(input_tokens=164, output_tokens=96, cache_read_tokens=256)


@pytest.mark.parametrize(
    ("name", "stop", "says"),
    [
        ("gemini_max_tokens.sse", "length", None),
        ("gemini_safety.sse", "error", "finishReason SAFETY"),
        ("gemini_recitation.sse", "error", "finishReason RECITATION"),
        ("gemini_blocked.sse", "error", "blocked the prompt: PROHIBITED_CONTENT"),
    ],
)
async def test_finish_reasons(name: str, stop: str, says: str | None, server: Server) -> None:
    server.add(recorded(name))
    async with make_model("gemini", server.url) as model:
        events = await collect(model)
    message = final(events)
    assert message.stop_reason == stop
    if says is not None:
        assert isinstance(events[-1], Error)
        assert says in (message.error_message or "")


async def test_error_mid_stream_keeps_the_partial_text(server: Server) -> None:
    server.add(recorded("gemini_error.sse", end="stall"))
    async with make_model("gemini", server.url) as model:
        message = final(await collect(model))
    assert message.content == (Text(text="Hel"),)
    assert "The model is overloaded." in (message.error_message or "")


async def test_options_tools_and_thinking_in_the_request(server: Server) -> None:
    server.add(recorded("gemini_text.sse"))
    spec = ToolSpec(name="ls", description="List.", parameters={"type": "object"})
    options = ModelOptions(model="gemini-2.5-pro", reasoning="low", max_tokens=99, temperature=0.2)
    req = ModelRequest(
        system_prompt="", messages=(UserMessage.text("x"),), tools=(spec,), options=options
    )
    async with make_model("gemini", server.url) as model:
        await collect(model, req)
    sent = server.requests[0]
    assert sent.path == "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    assert sent.json()["tools"] == [
        {
            "functionDeclarations": [
                {"name": "ls", "description": "List.", "parametersJsonSchema": {"type": "object"}}
            ]
        }
    ]
    assert sent.json()["generationConfig"] == {
        "maxOutputTokens": 99,
        "temperature": 0.2,
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 2048},
    }


async def test_parts_received_on_one_turn_are_sent_back_on_the_next(server: Server) -> None:
    first = Reply(
        parts=(
            Part("thought", "Read both.", signature=signature("t1")),
            Part("text", "Reading.", signature=signature("x1")),
            Part("call", name="read", args={"path": "a.txt"}, signature=signature("c1")),
            Part("call", name="read", args={"path": "b.txt"}),
        )
    )
    second = Reply(parts=(Part("call", name="add", args={"a": 2, "b": 3}),), response_id="r2")
    third = Reply(parts=(Part("text", "hello world, 5"),), response_id="r3")
    server.add(*(sse(body(r), split=40) for r in (first, second, third)))
    context = Context(system_prompt="Agent.", tools=TOOLS)
    async with make_model("gemini", server.url) as model:
        with trio.fail_after(10):
            result = await run_agent_loop([UserMessage.text("go")], context, model)
    assert result.reason == "stop"
    sent = [r.json()["contents"] for r in server.requests]
    assert sent[1] == [
        {"role": "user", "parts": [{"text": "go"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Read both.", "thought": True, "thoughtSignature": signature("t1")},
                {"text": "Reading.", "thoughtSignature": signature("x1")},
                {
                    "functionCall": {"name": "read", "args": {"path": "a.txt"}},
                    "thoughtSignature": signature("c1"),
                },
                {"functionCall": {"name": "read", "args": {"path": "b.txt"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "read", "response": {"output": "hello"}}},
                {"functionResponse": {"name": "read", "response": {"output": "world"}}},
            ],
        },
    ]
    assert sent[2][:3] == sent[1]
    assert sent[2][3:] == [
        {"role": "model", "parts": [{"functionCall": {"name": "add", "args": {"a": 2, "b": 3}}}]},
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "add", "response": {"output": "5"}}}],
        },
    ]


def test_errors_images_and_other_providers_history() -> None:
    reply = AssistantMessage(
        content=(
            Thinking(thinking="hmm", signature="anthropic-sig"),
            ToolCall(id="toolu_1", name="shot", arguments={}),
        ),
        stop_reason="tool_use",
        provider="anthropic",
    )
    result = ToolResultMessage(
        tool_call_id="toolu_1",
        tool_name="shot",
        content=(Image(data="AAAA", mime_type="image/png"),),
        is_error=True,
    )
    req = ModelRequest(system_prompt="", messages=(UserMessage.text("a"), reply, result))
    contents = Gemini("m", api_key="k").request_body(req)["contents"]
    assert contents[1:] == [
        {
            "role": "model",
            "parts": [{"text": "hmm"}, {"functionCall": {"name": "shot", "args": {}}}],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "shot",
                        "response": {"error": "(see attached image)"},
                    }
                },
                {"inlineData": {"mimeType": "image/png", "data": "AAAA"}},
            ],
        },
    ]


async def test_the_key_is_never_in_a_url(server: Server) -> None:
    # Every request (a retried error, a reply) and every error text: the key is only ever
    # in the x-goog-api-key header.
    busy = {"error": {"code": 503, "message": f"bad key {KEY}", "status": "UNAVAILABLE"}}
    server.add(error(503, busy), recorded("gemini_text.sse"), error(400, busy))
    async with make_model("gemini", server.url) as model:
        ok = final(await collect(model))
        bad = final(
            await collect(
                model,
                ModelRequest(
                    system_prompt="", messages=(UserMessage.text("x"),), options=ModelOptions()
                ),
            )
        )
        assert KEY not in repr(model)
    assert ok.stop_reason == "stop"
    assert len(server.requests) == 3
    for received in server.requests:
        assert KEY not in received.path
        assert "key=" not in received.path
        assert received.headers["x-goog-api-key"] == KEY
    assert KEY not in (bad.error_message or "")
    assert "[redacted]" in (bad.error_message or "")
    # And a refused connection names the URL, without the key.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    http = attrs.evolve(FAST, retry=RetryPolicy(max_retries=0))
    async with make_model("gemini", f"http://127.0.0.1:{port}", http=http) as model:
        refused = final(await collect(model))
    assert f"127.0.0.1:{port}" in (refused.error_message or "")
    assert KEY not in (refused.error_message or "")


# --- random streams, cut at random byte boundaries, decoded by both ----------------------

_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=25)
_args = st.dictionaries(st.text(max_size=5), st.integers() | _text, max_size=3)
_sig = st.none() | st.binary(min_size=1, max_size=12).map(lambda b: signature(b.hex()))


@st.composite
def replies(draw: st.DrawFn) -> Reply:
    parts = []
    previous = None
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["text", "thought", "call"]))
        if kind == previous and kind != "call":
            continue  # consecutive text parts of one kind are one block: the grammar's unit
        previous = kind
        if kind == "call":
            parts.append(
                Part(
                    "call",
                    name=draw(st.sampled_from(["ls", "read"])),
                    args=draw(_args),
                    signature=draw(_sig),
                )
            )
        else:
            parts.append(Part(kind, draw(_text.filter(bool)), signature=draw(_sig)))
    finish = draw(st.sampled_from(["STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "OTHER"]))
    prompt = draw(st.integers(0, 10_000))
    usage = (
        prompt,
        draw(st.integers(0, 999)),
        draw(st.integers(0, 999)),
        draw(st.integers(0, prompt)),
    )
    return Reply(
        tuple(parts),
        finish=finish,
        usage=usage,
        pieces=draw(st.integers(1, 8)),
        response_id=draw(st.text("abc123", min_size=1, max_size=6)),
    )


@given(reply=replies(), cuts=st.lists(st.integers(0, 10_000), max_size=40))
def test_random_streams_cut_anywhere_agree_with_the_sdk(reply: Reply, cuts: list[int]) -> None:
    data = body(reply).encode()
    theirs = sdk_decode(chunked(data, cuts))
    result = decode_chunks(_Decoder(ReplyBuilder(model="m", provider="p")), chunked(data, cuts))
    if result.message.stop_reason == "error":
        assert "finishReason" in (result.message.error_message or "")
    assert_agree(result.message, theirs)
