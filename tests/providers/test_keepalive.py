"""A stream that keeps the connection busy without moving the reply on ends, within
bounds, with an ``Error`` keeping the partial content: only keep-alives (SSE comments,
Anthropic ``ping`` events, empty frames), or bytes trickling in without ever ending a
line. Keep-alives still carry a reply through a long pause (Anthropic pings while the
model thinks) — against a real server on 127.0.0.1 with short bounds, real clock."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio

from tests.kit.http_server import Received, Responder, frames
from tests.kit.providers import FAST, check_protocol, final, make_model, request
from tests.kit.responses import Message, Reply, events
from trio_agent import Done, Error, Text, TextDelta, Thinking
from trio_agent.providers import Anthropic, Gemini, HTTPOptions, OpenAIChat, OpenAIResponses

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from tests.kit.http_server import Server
    from trio_agent import AssistantEvent

PROVIDERS = ["openai", "anthropic", "responses", "gemini"]
# Short bounds for the tests: 0.4 s without a whole line, 1 s without progress.
BOUNDS = attrs.evolve(FAST, idle_timeout=0.4, progress_timeout=1.0)


def _responses_frames(head: bool, text: str) -> str:
    """A Responses API text reply: its head (up to a first delta holding ``text``), or
    its tail (a last delta holding ``text``, then the done events and the end)."""
    stream = events(Reply(items=(Message(("x",), id=""),), pieces=99))
    delta = dict(stream[4], delta=text)
    return frames(*([*stream[:4], delta] if head else [delta, *stream[5:]]), named=True)


def _gemini_frame(text: str, finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate]}


def text_frames(kind: str, pieces: list[str]) -> str:
    """Frames adding ``pieces`` to the open text block of a reply ``start`` began."""
    if kind == "openai":
        return frames(*[{"choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces])
    if kind == "responses":
        return "".join(_responses_frames(False, p).split("\n\n", 1)[0] + "\n\n" for p in pieces)
    if kind == "gemini":
        return frames(*[_gemini_frame(p) for p in pieces])
    return frames(
        *[
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}
            for p in pieces
        ],
        named=True,
    )


def start(kind: str, text: str = "Hel") -> str:
    """The start of a reply: one text block holding ``text``."""
    if kind == "responses":
        return _responses_frames(True, text)
    if kind == "gemini":
        return frames(_gemini_frame(text))
    if kind == "openai":
        return frames({"choices": [{"index": 0, "delta": {"content": text}}]})
    return frames(
        {"type": "message_start", "message": {"usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        named=True,
    )


def finish(kind: str, text: str = "lo") -> str:
    if kind == "responses":
        return _responses_frames(False, text)
    if kind == "gemini":
        return frames(_gemini_frame(text, "STOP"))
    if kind == "openai":
        return frames(
            {"choices": [{"index": 0, "delta": {"content": text}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            "[DONE]",
        )
    return frames(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"},
        named=True,
    )


ANTHROPIC_PING = 'event: ping\ndata: {"type": "ping"}\n\n'
OPENAI_EMPTY = frames({"choices": [{"index": 0, "delta": {}}]})


@attrs.define(eq=False)
class Pinger:
    """Sends ``head``, then ``keepalive`` every ``every`` seconds (byte by byte when
    ``bytewise``), for ``seconds`` (forever if None), then ``tail`` and the end.
    ``left`` is set once the client has gone."""

    head: str
    keepalive: str
    every: float = 0.05
    seconds: float | None = None
    tail: str = ""
    bytewise: bool = False
    left: trio.Event = attrs.field(factory=trio.Event)

    async def __call__(self, request: Received, r: Responder) -> None:
        try:
            await r.head()
            await r.body(self.head.encode())
            end = None if self.seconds is None else trio.current_time() + self.seconds
            while end is None or trio.current_time() < end:
                if self.bytewise:
                    await r.body(self.keepalive.encode(), split=1, delay=self.every)
                else:
                    await r.body(self.keepalive.encode())
                    await trio.sleep(self.every)
            await r.body(self.tail.encode())
            await r.end()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.left.set()
            r.closed = True


async def run(
    kind: str,
    server: Server,
    handler: Callable[[Received, Responder], Awaitable[None]],
    http: HTTPOptions = BOUNDS,
) -> tuple[list[AssistantEvent], float]:
    server.add(handler)
    began = trio.current_time()
    with trio.fail_after(8):
        async with make_model(kind, server.url, http=http) as model:
            async with model.stream(request()) as stream:
                events = [event async for event in stream]
    check_protocol(events)
    return events, trio.current_time() - began


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_sse_comments_alone_end_the_reply_at_the_progress_bound(
    kind: str, server: Server
) -> None:
    pinger = Pinger(start(kind), ": ping\n\n")
    events, took = await run(kind, server, pinger)
    assert isinstance(events[-1], Error)
    message = final(events)
    assert message.content == (Text(text="Hel"),)
    assert "no progress for 1s" in (message.error_message or "")
    assert "(progress_timeout)" in (message.error_message or "")
    assert 1.0 <= took < 3.0
    with trio.fail_after(2):
        await pinger.left.wait()  # the connection was closed, not left open


@pytest.mark.parametrize(
    ("kind", "keepalive"),
    [("anthropic", ANTHROPIC_PING), ("openai", OPENAI_EMPTY)],
    ids=["anthropic-ping-events", "openai-empty-frames"],
)
async def test_keepalive_frames_alone_end_the_reply(
    kind: str, keepalive: str, server: Server
) -> None:
    events, took = await run(kind, server, Pinger(start(kind), keepalive))
    assert isinstance(events[-1], Error)
    assert "(progress_timeout)" in (final(events).error_message or "")
    assert final(events).content == (Text(text="Hel"),)
    assert 1.0 <= took < 3.0


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_server_trickling_bytes_without_a_line_end_ends_at_the_idle_bound(
    kind: str, server: Server
) -> None:
    """One byte at a time of a line that never ends: each byte used to reset the
    socket's read timeout, so the stream never ended."""
    pinger = Pinger(start(kind), "data: " + "x" * 1000, every=0.02, bytewise=True)
    events, took = await run(kind, server, pinger)
    assert isinstance(events[-1], Error)
    text = final(events).error_message or ""
    assert "bytes trickled in but no whole line for 0.4s (idle_timeout)" in text
    assert final(events).content == (Text(text="Hel"),)
    assert 0.4 <= took < 2.0


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_keepalives_trickled_byte_by_byte_still_end_at_the_progress_bound(
    kind: str, server: Server
) -> None:
    events, took = await run(
        kind, server, Pinger(start(kind), ": keep-alive\n\n", every=0.01, bytewise=True)
    )
    assert isinstance(events[-1], Error)
    assert "(progress_timeout)" in (final(events).error_message or "")
    assert 1.0 <= took < 3.0


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_keepalives_carry_a_reply_through_a_pause_longer_than_the_idle_bound(
    kind: str, server: Server
) -> None:
    keepalive = ANTHROPIC_PING if kind == "anthropic" else ": ping\n\n"
    pinger = Pinger(start(kind), keepalive, every=0.1, seconds=0.8, tail=finish(kind))
    events, took = await run(kind, server, pinger)
    assert isinstance(events[-1], Done), final(events).error_message
    assert final(events).content == (Text(text="Hello"),)
    assert took >= 0.8  # twice the idle bound, kept alive by the keep-alives


async def test_anthropic_pings_during_long_thinking(server: Server) -> None:
    """Thinking streams, then the model pauses (pings only) for longer than the idle
    bound but within the progress bound, then thinks on and answers."""

    def delta(kind: str, **fields: Any) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": 0, "delta": {"type": kind, **fields}}

    head = frames(
        {"type": "message_start", "message": {"usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking"}},
        delta("thinking_delta", thinking="Let me think"),
        named=True,
    )
    tail = frames(
        delta("thinking_delta", thinking=" hard."),
        delta("signature_delta", signature="sig"),
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text"}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "42"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"},
        named=True,
    )
    pinger = Pinger(head, ANTHROPIC_PING, every=0.1, seconds=0.7, tail=tail)
    events, _ = await run("anthropic", server, pinger)
    assert isinstance(events[-1], Done), final(events).error_message
    assert final(events).content == (
        Thinking(thinking="Let me think hard.", signature="sig"),
        Text(text="42"),
    )


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_slow_consumer_is_not_taken_for_a_stalled_server(kind: str, server: Server) -> None:
    """Time spent handing events to the consumer is not counted against the server."""
    pieces = [f"part {i} " for i in range(8)]
    if kind == "openai":
        body = text_frames(kind, pieces) + finish(kind, "")
    else:
        body = start(kind, "") + text_frames(kind, pieces) + finish(kind, "")

    async def quick(request: Received, r: Responder) -> None:
        # Every delta in one chunk (read at once, then handed over one by one), the
        # rest of the reply a moment later.
        await r.head()
        frames_sent = body.split("\n\n")[:-1]
        await r.chunk("".join(f + "\n\n" for f in frames_sent[:-3]).encode())
        await trio.sleep(0.05)
        await r.chunk("".join(f + "\n\n" for f in frames_sent[-3:]).encode())
        await r.end()

    server.add(quick)
    shown: list[str] = []
    last: AssistantEvent | None = None
    with trio.fail_after(8):
        async with make_model(kind, server.url, http=BOUNDS) as model:
            async with model.stream(request()) as stream:
                async for event in stream:
                    if isinstance(event, TextDelta):
                        shown.append(event.delta)
                        await trio.sleep(0.2)  # 8 x 0.2 s: past both bounds in all
                    last = event
    assert isinstance(last, Done), last
    assert "".join(shown) == "".join(pieces)


def test_the_defaults_bound_a_stream_that_does_not_move() -> None:
    for model in (OpenAIChat("m"), Anthropic("m"), OpenAIResponses("m"), Gemini("m")):
        assert model.options.idle_timeout == 120.0
        assert model.options.progress_timeout == 300.0
    assert HTTPOptions(progress_timeout=None).progress_timeout is None


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_no_progress_bound_when_disabled(kind: str, server: Server) -> None:
    """``progress_timeout=None``: keep-alives keep the stream alive (the idle bound
    still applies between them)."""
    pinger = Pinger(start(kind), ": ping\n\n", every=0.1, seconds=1.5, tail=finish(kind))
    http = attrs.evolve(BOUNDS, progress_timeout=None)
    events, took = await run(kind, server, pinger, http=http)
    assert isinstance(events[-1], Done), final(events).error_message
    assert took >= 1.5
    assert final(events).text == "Hello"
