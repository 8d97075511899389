"""Summarize: its own model request, its events, abort and timeout while it streams,
compaction marker lines, and a resumed transcript going on from the compacted view."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import trio

from tests.kit.context import read, turns
from tests.kit.loop import reply
from trio_agent import (
    AgentEvent,
    AgentRunError,
    AssistantMessage,
    Context,
    ContextCompacted,
    JsonlTranscript,
    LoopConfig,
    ModelOptions,
    Text,
    Usage,
    UserMessage,
    check_transcript,
    load_transcript,
    open_agent,
    run_agent_loop,
)
from trio_agent.context import Summarize, model_view
from trio_agent.testing import ScriptedModel, assert_run_invariants

if TYPE_CHECKING:
    from pathlib import Path

WINDOW = ModelOptions(context_window=24_000)  # holds about three such turns
SUMMARY_USAGE = Usage(input_tokens=900, output_tokens=40)


def summariser(n: int = 20) -> ScriptedModel:
    return ScriptedModel(
        [
            AssistantMessage(
                content=(Text(text=f"summary {i}: files f0.. were read"),),
                stop_reason="stop",
                usage=SUMMARY_USAGE,
            )
            for i in range(n)
        ]
    )


def text_of(message: Any) -> str:
    return "".join(block.text for block in message.content)


def config(policy: Summarize, **kwargs: Any) -> LoopConfig:
    return LoopConfig(context=policy, max_steps=100, model_options=WINDOW, **kwargs)


async def test_summarize_replaces_the_older_part_with_one_summary() -> None:
    model, cheap = ScriptedModel(turns(12)), summariser()
    policy = Summarize(cheap, keep_recent=1)
    events: list[AgentEvent] = []
    context = Context(tools=[read])
    with trio.fail_after(10):
        result = await run_agent_loop("go", context, model, config(policy), on_event=events.append)
    assert_run_invariants(result, events, model.requests, context)
    assert result.reason == "stop"
    compacted = [e for e in events if type(e) is ContextCompacted]
    assert len(compacted) == cheap.request_count == policy.summaries >= 2
    # Far fewer summaries than requests: one is reused until the view passes the trigger.
    assert policy.summaries < model.request_count / 2
    for event in compacted:
        assert event.policy == "summarize"
        assert event.usage == SUMMARY_USAGE
        assert event.tokens_after < event.tokens_before
        assert event.plan["note"].startswith("[Summary of the earlier conversation]")
    # The summary request: the summariser's own instructions, the older part as text.
    first = cheap.requests[0]
    assert "working memory" in first.system_prompt
    assert "RESULT of read [id c0]" in text_of(first.messages[0])
    # A later summary covers the previous one.
    assert "<previous-summary>" in text_of(cheap.requests[1].messages[0])
    last = model.requests[-1].messages
    check_transcript(last)
    assert last[0] == result.transcript[0]
    summary = last[1]
    assert type(summary) is UserMessage
    assert summary.content[0].text.endswith(f"summary {policy.summaries - 1}: files f0.. were read")  # type: ignore[union-attr]
    # The task, the summary, and at most the three turns the trigger lets through.
    assert len(last) <= 2 + 2 * 3


async def test_a_summary_that_times_out_leaves_a_note_and_the_run_goes_on(
    autojump_clock: trio.abc.Clock,
) -> None:
    model, cheap = ScriptedModel(turns(6)), summariser()
    point = cheap.pause_at(0, 0)  # never released: the summary request hangs
    policy = Summarize(cheap, keep_recent=1, timeout=30)
    events: list[AgentEvent] = []
    with trio.fail_after(100):
        result = await run_agent_loop(
            "go", Context(tools=[read]), model, config(policy), on_event=events.append
        )
    assert point.reached.is_set()
    assert result.reason == "stop"
    compacted = [e for e in events if type(e) is ContextCompacted]
    assert "the summary request took more than 30s" in compacted[0].plan["note"]
    assert compacted[0].usage == Usage()
    assert cheap.open_streams == 0


async def test_a_failed_summary_request_leaves_a_note() -> None:
    model = ScriptedModel(turns(6))
    cheap = ScriptedModel([reply("no", "error")] * 5)
    policy = Summarize(cheap, keep_recent=1)
    events: list[AgentEvent] = []
    result = await run_agent_loop(
        "go", Context(tools=[read]), model, config(policy), on_event=events.append
    )
    assert result.reason == "stop"
    note = next(e for e in events if type(e) is ContextCompacted).plan["note"]
    assert "the summary request failed: boom" in note


async def test_abort_during_the_summary_request_keeps_the_run_paired() -> None:
    model, cheap = ScriptedModel(turns(8)), summariser()
    point = cheap.pause_at(0, 1)
    events: list[AgentEvent] = []
    async with open_agent(
        model, tools=[read], config=config(Summarize(cheap, keep_recent=1))
    ) as agent:
        agent.subscribe(events.append)
        async with trio.open_nursery() as nursery:
            results: list[Any] = []

            async def go() -> None:
                results.append(await agent.prompt("go"))

            nursery.start_soon(go)
            with trio.fail_after(10):
                await point.reached.wait()
            agent.abort("enough")
        result = results[0]
        assert result.reason == "aborted"
        check_transcript(result.transcript)
        assert cheap.open_streams == 0
        assert not any(type(e) is ContextCompacted for e in events)
        # The agent goes on: its next prompt runs (and summarises).
        point.release()
        model.add(*turns(1))
        with trio.fail_after(10):
            again = await agent.prompt("go on")
        assert again.reason == "stop"
        check_transcript(agent.state.messages)


async def test_an_outer_cancel_during_the_summary_request_keeps_the_run_paired() -> None:
    model, cheap = ScriptedModel(turns(8)), summariser()
    point = cheap.pause_at(0, 1)
    events: list[AgentEvent] = []
    with trio.move_on_after(5) as scope:
        async with trio.open_nursery() as nursery:

            async def cancel_when_summarising() -> None:
                await point.reached.wait()
                scope.cancel()

            nursery.start_soon(cancel_when_summarising)
            await run_agent_loop(
                "go",
                Context(tools=[read]),
                model,
                config(Summarize(cheap, keep_recent=1)),
                on_event=events.append,
            )
    assert scope.cancelled_caught
    end = events[-1]
    assert type(end).__name__ == "AgentEnd"
    assert end.reason == "aborted"  # type: ignore[union-attr]
    check_transcript([e.message for e in events if type(e).__name__ == "MessageEnd"])  # type: ignore[union-attr]
    assert cheap.open_streams == 0


async def test_a_resumed_transcript_goes_on_from_the_compacted_view(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    model, cheap = ScriptedModel(turns(8)), summariser()
    async with JsonlTranscript(path) as transcript:
        await run_agent_loop(
            "go",
            Context(tools=[read]),
            model,
            config(Summarize(cheap, keep_recent=1)),
            on_event=transcript,
        )
    loaded = load_transcript(path)
    markers = loaded.markers_of("compaction")
    assert len(markers) == cheap.request_count >= 1
    assert markers[-1].data["policy"] == "summarize"
    assert markers[-1].data["usage"] == {
        "input_tokens": 900,
        "output_tokens": 40,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }
    view = model_view(loaded)
    # What the model saw last is the view rebuilt from the markers.
    assert view == (*model.requests[-1].messages, loaded.messages[-1])
    assert len(view) < len(loaded.messages)
    # A new agent over the full history, its policy resumed: no new summary, and its
    # first request is that view and the new prompt.
    resumed = Summarize(cheap, keep_recent=1)
    resumed.resume(loaded)
    model2 = ScriptedModel([reply("again")])
    async with open_agent(
        model2, tools=[read], messages=loaded.messages, config=config(resumed)
    ) as agent:
        result = await agent.prompt("and now?")
    assert result.reason == "stop"
    assert resumed.summaries == 0
    sent = model2.requests[0].messages
    assert sent[:-1] == view
    assert sent[-1].content[0].text == "and now?"  # type: ignore[union-attr]
    # Without resuming, the same agent would show the whole history.
    fresh = ScriptedModel([reply("again")])
    async with open_agent(
        fresh, tools=[read], messages=loaded.messages, config=LoopConfig(model_options=WINDOW)
    ) as agent:
        await agent.prompt("and now?")
    assert len(fresh.requests[0].messages) == len(loaded.messages) + 1


async def test_the_agent_option_sets_the_policy() -> None:
    policy = Summarize(summariser(), keep_recent=1)
    async with open_agent(ScriptedModel(turns(6)), tools=[read], context=policy) as agent:
        assert agent.config.context is policy
        agent.config = config(policy)
        result = await agent.prompt("go")
    assert result.reason == "stop"
    assert policy.summaries >= 1


def test_summarize_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="trigger"):
        Summarize(trigger=0)
    with pytest.raises(ValueError, match="timeout"):
        Summarize(timeout=-1)
    with pytest.raises(ValueError, match="keep_recent"):
        Summarize(keep_recent=0)


async def test_summarize_as_a_transform_context_hook_needs_a_model() -> None:
    policy = Summarize(window=100)
    model = ScriptedModel(turns(3))
    with pytest.raises(AgentRunError) as caught:
        await run_agent_loop(
            "go", Context(tools=[read]), model, LoopConfig(transform_context=policy)
        )
    assert "needs a model" in str(caught.value.__cause__)
