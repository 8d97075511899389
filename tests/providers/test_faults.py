"""Every fault ends a reply with an ``Error`` that says what happened and keeps the
partial content — for both providers, against a real server on 127.0.0.1."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio

from tests.kit.http_server import (
    STREAMS,
    Received,
    Responder,
    error,
    frames,
    hang_up,
    recorded,
    sse,
)
from tests.kit.providers import (
    FAST,
    KEY,
    KEY_ENVS,
    TEXT_STREAMS,
    collect,
    final,
    make_model,
    request,
)
from tests.kit.responses import Call, Message, Reply, events
from trio_agent import Done, Error, Text, TextDelta
from trio_agent.providers import RetryPolicy

if TYPE_CHECKING:
    from tests.kit.http_server import Server

PROVIDERS = ["openai", "anthropic", "responses", "gemini"]
pytestmark = pytest.mark.parametrize("kind", PROVIDERS)


def partial(kind: str, text: str = "Hel") -> str:
    """The start of a reply: one text block holding ``text``, no end."""
    if kind == "openai":
        return frames(
            {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
        )
    if kind == "gemini":
        return frames({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}}]})
    if kind == "responses":
        # Up to the text delta: no done events, no terminal event.
        stream = events(Reply(items=(Message((text,), id="msg_p"),), status=None, pieces=99))
        return frames(*stream[:6], named=True)
    return frames(
        {"type": "message_start", "message": {"usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        named=True,
    )


def error_body(kind: str, kind_name: str, message: str) -> dict[str, Any]:
    if kind == "gemini":
        return {"error": {"code": 400, "message": message, "status": kind_name}}
    if kind in ("openai", "responses"):
        return {"error": {"message": message, "type": kind_name, "param": None, "code": None}}
    return {"type": "error", "error": {"type": kind_name, "message": message}}


def terminator(kind: str) -> str:
    return {
        "openai": "data: [DONE]",
        "anthropic": "message_stop",
        "responses": "response.completed",
        "gemini": "a finishReason",
    }[kind]


async def failed(kind: str, url: str, **kwargs: Any) -> tuple[Error, str]:
    async with make_model(kind, url, **kwargs) as model:
        events = await collect(model)
    last = events[-1]
    assert isinstance(last, Error)
    assert last.message.stop_reason == "error"
    return last, last.message.error_message or ""


async def test_http_4xx_reports_the_server_text_without_retrying(kind: str, server: Server) -> None:
    server.add(error(400, error_body(kind, "invalid_request_error", "max_tokens: too large")))
    _, text = await failed(kind, server.url)
    assert "HTTP 400" in text
    assert "invalid_request_error: max_tokens: too large" in text
    assert len(server.requests) == 1


async def test_http_401_without_a_key_says_how_to_set_one(kind: str, server: Server) -> None:
    server.add(error(401, error_body(kind, "authentication_error", "invalid x-api-key")))
    _, text = await failed(kind, server.url, api_key="")
    assert "HTTP 401" in text
    assert "authentication_error" in text
    assert KEY_ENVS[kind] in text


async def test_http_5xx_is_retried_then_reported(kind: str, server: Server) -> None:
    server.default = error(503, error_body(kind, "overloaded_error", "try later"))
    _, text = await failed(kind, server.url)
    assert "HTTP 503" in text
    assert "overloaded_error: try later" in text
    assert "gave up after 3 retries" in text
    assert len(server.requests) == 4


async def test_non_json_error_body_is_shown_trimmed(kind: str, server: Server) -> None:
    async def html(request: Received, r: Responder) -> None:
        page = b"<html>\n<body>Bad   gateway " + b"x" * 2000 + b"</body></html>"
        head = f"HTTP/1.1 418 Teapot\r\ncontent-type: text/html\r\ncontent-length: {len(page)}"
        await r.stream.send_all(head.encode() + b"\r\n\r\n" + page)

    server.add(html)
    _, text = await failed(kind, server.url)
    assert "HTTP 418" in text
    assert "<html> <body>Bad gateway x" in text
    assert len(text) < 800


async def test_connection_refused(kind: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    _, text = await failed(kind, f"http://127.0.0.1:{port}")
    assert f"cannot connect to http://127.0.0.1:{port}" in text
    assert "gave up after 3 retries" in text


@pytest.mark.parametrize("how", ["abort", "cut"])
async def test_disconnect_mid_stream_keeps_partial_text(
    kind: str, how: str, server: Server
) -> None:
    server.add(sse(partial(kind), end=how))
    last, text = await failed(kind, server.url)
    assert last.message.content == (Text(text="Hel"),)
    assert "connection was lost mid-stream" in text
    assert len(server.requests) == 1


async def test_body_ending_without_terminator_is_an_error(kind: str, server: Server) -> None:
    server.add(sse(partial(kind)))
    last, text = await failed(kind, server.url)
    assert last.message.content == (Text(text="Hel"),)
    assert f"ended before {terminator(kind)}" in text


async def test_complete_reply_without_terminator_is_still_an_error(
    kind: str, server: Server
) -> None:
    # Everything but the terminator: the official SDKs accept this silently.
    name = TEXT_STREAMS[kind]
    server.add(sse((STREAMS / name).read_text().rsplit("\n\n", 2)[0] + "\n\n"))
    last, message = await failed(kind, server.url)
    assert "tiny-pi" in last.message.text
    assert f"ended before {terminator(kind)}" in message


async def test_malformed_json_frame(kind: str, server: Server) -> None:
    server.add(sse(partial(kind) + 'data: {"choices": [ {oops\n\n', end="stall"))
    last, text = await failed(kind, server.url)
    assert last.message.content == (Text(text="Hel"),)
    assert "malformed JSON in a stream frame" in text
    assert "{oops" in text


async def test_malformed_tool_arguments(kind: str, server: Server) -> None:
    if kind == "gemini":
        pytest.skip("Gemini sends a call's arguments as a JSON object, never as text")
    if kind == "openai":
        body = frames(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "c1",
                                    "function": {"name": "ls", "arguments": "{x"},
                                }
                            ]
                        },
                        "finish_reason": "tool_calls",
                    }
                ]
            },
            "[DONE]",
        )
    elif kind == "responses":
        body = frames(*events(Reply(items=(Call("c1", "ls", "{x", id=""),))), named=True)
    else:
        body = frames(
            {"type": "message_start", "message": {"usage": {}}},
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "tool_use", "id": "c1", "name": "ls", "input": {}},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": "[1, 2]"},
            },
            {"type": "content_block_stop", "index": 0},
            named=True,
        )
    server.add(sse(body))
    last, text = await failed(kind, server.url)
    assert "tool call ls (c1)" in text
    assert "unfinished tool call(s) dropped: ls (c1)" in text
    assert last.message.content == ()


async def test_idle_stall(kind: str, server: Server) -> None:
    server.add(sse(partial(kind), end="stall"))
    start = trio.current_time()
    last, text = await failed(kind, server.url, http=attrs.evolve(FAST, idle_timeout=0.3))
    elapsed = trio.current_time() - start
    assert 0.29 <= elapsed < 2.0
    assert "the stream stalled: no data for 0.3s (idle_timeout)" in text
    assert last.message.content == (Text(text="Hel"),)


async def test_stall_before_the_response(kind: str, server: Server) -> None:
    async def silent(request: Received, r: Responder) -> None:
        await r.wait_disconnect()

    server.add(silent)
    _, text = await failed(kind, server.url, http=attrs.evolve(FAST, idle_timeout=0.3))
    assert "no response from" in text
    assert "within 0.3s (idle_timeout)" in text


async def test_oversized_event(kind: str, server: Server) -> None:
    huge = "data: " + "x" * 4096 + "\n\n"
    server.add(sse(partial(kind) + huge, split=512, end="stall"))
    last, text = await failed(kind, server.url, http=attrs.evolve(FAST, max_event_bytes=1024))
    assert "exceeded the 1024-byte limit" in text
    assert last.message.content == (Text(text="Hel"),)


async def test_oversized_line_without_end(kind: str, server: Server) -> None:
    # A server that never ends a line cannot make us buffer without limit.
    server.add(sse(partial(kind) + "data: " + "y" * 4096, split=256, end="stall"))
    _, text = await failed(kind, server.url, http=attrs.evolve(FAST, max_event_bytes=1024))
    assert "exceeded the 1024-byte limit" in text


async def test_not_an_event_stream(kind: str, server: Server) -> None:
    server.add(error(200, {"id": "x", "choices": []}))
    _, text = await failed(kind, server.url)
    assert "instead of an event stream" in text
    assert "application/json" in text


async def test_hang_up_before_answering(kind: str, server: Server) -> None:
    server.default = hang_up
    _, text = await failed(
        kind, server.url, http=attrs.evolve(FAST, retry=RetryPolicy(max_retries=0))
    )
    assert "failed" in text
    assert "RemoteProtocolError" in text


async def test_key_is_redacted_from_server_errors(kind: str, server: Server) -> None:
    echo = f"Incorrect API key provided: {KEY}. Partial: {KEY[:20]}…"
    server.add(error(401, error_body(kind, "invalid_api_key", echo)))
    _, text = await failed(kind, server.url)
    assert KEY not in text
    assert KEY[:20] not in text
    assert "[redacted]" in text


async def test_stream_split_into_single_bytes_decodes_the_same(kind: str, server: Server) -> None:
    name = TEXT_STREAMS[kind]
    server.add(recorded(name), recorded(name, split=1))
    async with make_model(kind, server.url) as model:
        whole = final(await collect(model))
        bytewise = final(await collect(model))
    assert bytewise.content == whole.content
    assert bytewise.usage == whole.usage
    assert "\u2028" in bytewise.text


async def test_crlf_and_cr_line_ends(kind: str, server: Server) -> None:
    raw = (STREAMS / TEXT_STREAMS[kind]).read_text()
    server.add(sse(raw.replace("\n", "\r\n"), split=7), sse(raw.replace("\n", "\r"), split=5))
    async with make_model(kind, server.url) as model:
        crlf = final(await collect(model))
        cr = final(await collect(model))
    assert crlf.content == cr.content
    assert "tiny-pi" in cr.text


async def test_leaving_the_stream_closes_the_connection(kind: str, server: Server) -> None:
    left = trio.Event()

    async def slow(request: Received, r: Responder) -> None:
        await r.head()
        await r.body(partial(kind).encode())
        await r.wait_disconnect()
        left.set()

    server.add(slow, recorded(TEXT_STREAMS[kind]))
    async with make_model(kind, server.url) as model:
        with trio.fail_after(5):
            async with model.stream(request()) as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        break
            # The connection is closed when the block is left, not later.
            await left.wait()
            # And the model works on.
            events2 = await collect(model)
    assert isinstance(events2[-1], Done)
    assert server.open_connections <= 1


async def test_cancelled_while_waiting_to_retry(kind: str, server: Server) -> None:
    server.default = error(
        503, error_body(kind, "overloaded_error", "busy"), [("retry-after", "30")]
    )
    async with make_model(kind, server.url) as model:
        start = trio.current_time()
        with trio.move_on_after(0.3) as scope:
            await collect(model)
        assert scope.cancelled_caught
        assert trio.current_time() - start < 1.0
    assert len(server.requests) == 1
