"""Helpers for provider tests: build models against the test server, collect a stream,
and check that a stream follows the assistant-event protocol."""

from __future__ import annotations

from typing import Any

import trio

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
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UserMessage,
)
from trio_agent.providers import Anthropic, HTTPOptions, OpenAIChat, RetryPolicy

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


def make_model(kind: str, url: str, **kwargs: Any) -> OpenAIChat | Anthropic:
    kwargs.setdefault("http", FAST)
    kwargs.setdefault("api_key", KEY)
    if kind == "openai":
        return OpenAIChat("gpt-4.1", base_url=url + "/v1", **kwargs)
    return Anthropic("claude-sonnet-4-5", base_url=url, **kwargs)


def request(text: str = "hi", **options: Any) -> ModelRequest:
    return ModelRequest(
        system_prompt="You are terse.",
        messages=(UserMessage.text(text),),
        options=ModelOptions(**options),
    )


async def collect(
    model: OpenAIChat | Anthropic, req: ModelRequest | None = None
) -> list[AssistantEvent]:
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
