"""An emoji whose two UTF-16 halves arrive in separate frames (each a JSON escape, so
each decodes to a lone surrogate) comes out whole, in the deltas and in the final
message — for both providers, against a real server on 127.0.0.1."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from tests.kit.http_server import frames, sse
from tests.kit.providers import collect, final, make_model
from trio_agent import (
    Done,
    Error,
    JsonlTranscript,
    Text,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolCall,
    load_transcript,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from tests.kit.http_server import Server

PROVIDERS = ["openai", "anthropic"]
pytestmark = pytest.mark.parametrize("kind", PROVIDERS)

HIGH, LOW = "\ud83d", "\ude00"  # the UTF-16 halves of 😀


def openai_chunk(**delta: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def body(
    kind: str, texts: Sequence[str], *, thinking: Sequence[str] = (), args: Sequence[str] = ()
) -> str:
    """A whole reply: thinking pieces, text pieces, then a tool call whose argument JSON
    comes in ``args`` pieces. ``json.dumps`` writes a lone surrogate as its escape."""
    if kind == "openai":
        out: list[Any] = [openai_chunk(reasoning_content=t) for t in thinking]
        out += [openai_chunk(content=t) for t in texts]
        for i, piece in enumerate(args):
            call: dict[str, Any] = {"index": 0, "function": {"arguments": piece}}
            if i == 0:
                call.update(id="call_1", type="function")
                call["function"]["name"] = "note"
            out.append(openai_chunk(tool_calls=[call]))
        reason = "tool_calls" if args else "stop"
        out.append({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
        return frames(*out, "[DONE]")
    events: list[Any] = [{"type": "message_start", "message": {"usage": {"input_tokens": 1}}}]
    index = 0
    if thinking:
        events.append(
            {"type": "content_block_start", "index": index, "content_block": {"type": "thinking"}}
        )
        for t in thinking:
            delta = {"type": "thinking_delta", "thinking": t}
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        delta = {"type": "signature_delta", "signature": "sig"}
        events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    events.append(
        {"type": "content_block_start", "index": index, "content_block": {"type": "text"}}
    )
    for t in texts:
        delta = {"type": "text_delta", "text": t}
        events.append({"type": "content_block_delta", "index": index, "delta": delta})
    events.append({"type": "content_block_stop", "index": index})
    if args:
        index += 1
        block = {"type": "tool_use", "id": "toolu_1", "name": "note", "input": {}}
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        for piece in args:
            delta = {"type": "input_json_delta", "partial_json": piece}
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
    reason = "tool_use" if args else "end_turn"
    events.append({"type": "message_delta", "delta": {"stop_reason": reason}})
    events.append({"type": "message_stop"})
    return frames(*events, named=True)


async def test_an_emoji_split_across_frames_comes_out_whole(kind: str, server: Server) -> None:
    raw = body(kind, ["smile ", HIGH, LOW + "!"])
    assert "\\ud83d" in raw  # the halves travel as JSON escapes, in separate frames
    server.add(sse(raw, split=7))
    async with make_model(kind, server.url) as model:
        events = await collect(model)
    message = final(events)
    assert isinstance(events[-1], Done)
    assert message.content == (Text(text="smile 😀!"),)
    deltas = [e.delta for e in events if isinstance(e, TextDelta)]
    assert "".join(deltas) == "smile 😀!"
    assert not any(HIGH in d or LOW in d for d in deltas)  # no delta shows half a character


async def test_split_pairs_in_thinking_and_tool_arguments(kind: str, server: Server) -> None:
    # The argument JSON text itself is split between the halves of a raw character.
    arguments = json.dumps({"mood": "😀"}, ensure_ascii=False)
    cut = arguments.index("😀")
    pieces = [arguments[:cut] + HIGH, LOW + arguments[cut + 1 :]]
    server.add(sse(body(kind, ["ok"], thinking=["think ", HIGH, LOW], args=pieces)))
    async with make_model(kind, server.url) as model:
        events = await collect(model)
    message = final(events)
    assert isinstance(events[-1], Done)
    thinking = next(b for b in message.content if isinstance(b, Thinking))
    assert thinking.thinking == "think 😀"
    assert "".join(e.delta for e in events if isinstance(e, ThinkingDelta)) == "think 😀"
    call = next(b for b in message.content if isinstance(b, ToolCall))
    assert call.arguments == {"mood": "😀"}


async def test_a_half_that_stays_alone_is_kept(kind: str, server: Server) -> None:
    """A high half whose low half never comes (a bad server) is kept as it is, shown as
    a last delta, and still written to a transcript and read back."""
    server.add(sse(body(kind, ["end ", HIGH])))
    async with make_model(kind, server.url) as model:
        events = await collect(model)
    message = final(events)
    assert message.content == (Text(text="end " + HIGH),)
    assert "".join(e.delta for e in events if isinstance(e, TextDelta)) == "end " + HIGH


async def test_a_reply_cut_after_a_high_half_keeps_it(
    kind: str, server: Server, tmp_path: Path
) -> None:
    raw = body(kind, ["cut ", HIGH, LOW, " then ", HIGH])
    end = raw.rindex("\\ud83d")
    server.add(sse(raw[: raw.index("\n\n", end) + 2], end="abort"))
    async with make_model(kind, server.url) as model:
        events = await collect(model)
    assert isinstance(events[-1], Error)
    message = final(events)
    assert message.content == (Text(text="cut 😀 then " + HIGH),)
    path = tmp_path / "t.jsonl"
    async with JsonlTranscript(path) as transcript:
        await transcript.write_messages([message])
    assert load_transcript(path).messages == (message,)
