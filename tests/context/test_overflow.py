"""Overflow recovery against fake OpenAI-compatible and Anthropic servers on 127.0.0.1
that refuse, with the real providers' documented error bodies, every request over a
byte budget."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import trio

from tests.kit.context import BUDGET, Budgeted, overflow_body, read
from tests.kit.http_server import error, serve
from tests.kit.providers import collect, final, make_model
from trio_agent import (
    AssistantMessage,
    Context,
    ContextCompacted,
    LoopConfig,
    ModelOptions,
    Text,
    UserMessage,
    check_transcript,
    open_agent,
    run_agent_loop,
)
from trio_agent.context import KeepRecent, is_context_overflow

if TYPE_CHECKING:
    from trio_agent import AgentEvent

KINDS = ["openai", "anthropic"]


@pytest.mark.parametrize("kind", KINDS)
async def test_the_providers_mark_their_documented_overflow_errors(kind: str) -> None:
    async with serve() as server:
        server.add(error(400, overflow_body(kind)))
        server.add(error(400, {"error": {"type": "invalid_request_error", "message": "bad"}}))
        model = make_model(kind, server.url)
        refused = final(await collect(model))
        other = final(await collect(model))
        await model.aclose()
    assert refused.stop_reason == "error"
    assert refused.error_message is not None
    assert refused.error_message.startswith("context overflow: HTTP 400")
    assert is_context_overflow(refused)
    assert not is_context_overflow(other)


def test_overflow_texts_of_other_servers_are_recognised() -> None:
    def failed(text: str) -> AssistantMessage:
        return AssistantMessage(content=(), stop_reason="error", error_message=text)

    assert is_context_overflow(failed("Error code: 400 - context_length_exceeded"))
    assert is_context_overflow(failed("This model's maximum context length is 8192 tokens"))
    assert not is_context_overflow(failed("HTTP 429 rate limited"))
    ok = AssistantMessage(content=(Text(text="prompt is too long"),), stop_reason="stop")
    assert not is_context_overflow(ok)


async def long_session(kind: str, window: int) -> tuple[Budgeted, Any, list[AgentEvent]]:
    """200 turns, each reading 20 KB, against a server refusing requests over BUDGET;
    KeepRecent is told the window is ``window`` tokens."""
    handler = Budgeted(kind, calls=200)
    events: list[AgentEvent] = []
    async with serve() as server:
        server.default = handler
        model = make_model(kind, server.url)
        config = LoopConfig(
            context=KeepRecent(turns=50),
            max_steps=400,
            model_options=ModelOptions(context_window=window),
        )
        with trio.fail_after(120):
            result = await run_agent_loop(
                "read the 200 files", Context(tools=[read]), model, config, on_event=events.append
            )
        await model.aclose()
    check_transcript(result.transcript)
    return handler, result, events


@pytest.mark.parametrize("kind", KINDS)
async def test_a_200_turn_session_stays_under_the_budget(kind: str) -> None:
    # The window matches the budget (4 characters a token, less the reply's room).
    handler, result, events = await long_session(kind, window=BUDGET // 5)
    assert result.reason == "stop"
    assert len(handler.accepted) == 201
    assert handler.refused == []
    assert max(handler.accepted) <= BUDGET
    assert any(type(e) is ContextCompacted for e in events)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_200_turn_session_recovers_from_each_overflow(kind: str) -> None:
    # The window is said to be four times what the server takes: requests are refused,
    # each time the policy compacts harder, the request goes again and is taken; from
    # then on the policy keeps under what was refused.
    handler, result, events = await long_session(kind, window=4 * BUDGET // 5)
    assert result.reason == "stop"
    assert len(handler.accepted) == 201
    assert 1 <= len(handler.refused) <= 3
    assert max(handler.accepted) <= BUDGET
    # Never two refusals in a row: each retry was taken.
    assert not any(
        a is False and b is False for a, b in zip(handler.log, handler.log[1:], strict=False)
    )
    retries = [e for e in events if type(e) is ContextCompacted and e.reason == "overflow"]
    assert len(retries) == len(handler.refused)
    # The refused replies are in the transcript (paired, never sent again).
    refused = [m for m in result.transcript if is_context_overflow(m)]
    assert len(refused) == len(handler.refused)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_second_overflow_ends_the_run_and_the_next_prompt_works(kind: str) -> None:
    handler = Budgeted(kind)
    async with serve() as server:
        server.default = handler
        model = make_model(kind, server.url)
        async with open_agent(model, tools=[read], context=KeepRecent(turns=8)) as agent:
            with trio.fail_after(20):
                first = await agent.prompt("hello")
                # A pasted log longer than the window: even the newest turn alone is
                # over it, so the retry is refused too.
                huge = await agent.prompt("here is the log: " + "x" * (2 * BUDGET))
                after = await agent.prompt("too long; in one line, what went wrong?")
            messages = agent.state.messages
        await model.aclose()
    assert first.reason == "stop"
    assert huge.reason == "context_overflow"
    assert huge.error_message is not None
    assert huge.error_message.startswith(
        "the request was still too long for the model's context window after the context "
        "policy compacted it: context overflow: HTTP 400"
    )
    assert handler.log == [True, False, False, True]
    assert after.reason == "stop"
    check_transcript(messages)
    # The request that worked left the log out (and kept the first prompt).
    assert handler.accepted[-1] < BUDGET
    last = server.requests[-1].body.decode()
    assert "hello" in last
    assert "x" * 1000 not in last


@pytest.mark.parametrize("kind", KINDS)
async def test_without_a_policy_an_overflow_ends_the_run(kind: str) -> None:
    handler = Budgeted(kind)
    async with serve() as server:
        server.default = handler
        model = make_model(kind, server.url)
        with trio.fail_after(20):
            result = await run_agent_loop(
                [UserMessage.text("x" * (2 * BUDGET))], Context(), model, LoopConfig()
            )
        await model.aclose()
    assert result.reason == "context_overflow"
    assert handler.log == [False]
    assert result.error_message is not None
    assert "no context policy is set" in result.error_message
