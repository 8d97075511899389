"""Token accounting and the policies that need no model, alone and in runs."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio

from tests.kit.context import BIG, read, turns
from tests.kit.loop import call, tool_use
from trio_agent import (
    AgentEvent,
    AssistantMessage,
    Context,
    ContextCompacted,
    LoopConfig,
    ModelOptions,
    Text,
    ToolResultMessage,
    Usage,
    UserMessage,
    check_transcript,
    run_agent_loop,
)
from trio_agent.context import (
    ContextRequest,
    ElideToolOutputs,
    KeepRecent,
    TokenCounter,
    compose,
    context_window,
    message_chars,
)
from trio_agent.testing import ScriptedModel, assert_run_invariants


async def run(
    policy: Any, n: int = 10, **options: Any
) -> tuple[Any, list[AgentEvent], ScriptedModel]:
    model = ScriptedModel(turns(n))
    events: list[AgentEvent] = []
    context = Context(tools=[read])
    config = LoopConfig(context=policy, max_steps=100, model_options=ModelOptions(**options))
    with trio.fail_after(10):
        result = await run_agent_loop("go", context, model, config, on_event=events.append)
    assert_run_invariants(result, events, model.requests, context)
    return result, events, model


def test_context_windows_of_known_models() -> None:
    assert context_window("gpt-4o") == 128_000
    assert context_window("claude-sonnet-4-5-20250929") == 200_000
    assert context_window("claude-sonnet-4-5") == 200_000
    assert context_window("gpt-4o-mini-2024-07-18") == 128_000
    assert context_window("my-local-model") is None


def test_counter_calibrates_from_the_reported_usage() -> None:
    counter = TokenCounter()
    assert counter.tokens(4000) == 1000
    counter.sent(1, 4000)
    history = (
        UserMessage.text("x"),
        AssistantMessage(
            content=(Text(text="ok"),),
            stop_reason="stop",
            usage=Usage(input_tokens=1500, cache_read_tokens=500),
        ),
    )
    counter.observe(history)
    assert counter.ratio == 2.0
    assert counter.tokens(4000) == 2000


def test_message_chars_counts_text_calls_and_results() -> None:
    result = ToolResultMessage(tool_call_id="c", tool_name="read", content=(Text(text=BIG),))
    assert message_chars(result) >= len(BIG)
    assert message_chars(result) < len(BIG) + 100


async def test_keep_recent_sends_the_newest_turns_and_reports_each_cut() -> None:
    result, events, model = await run(KeepRecent(3))
    assert result.reason == "stop"
    for request in model.requests:
        check_transcript(request.messages)
        assert request.messages[0] == result.transcript[0]  # the task is kept
        assert sum(type(m) is AssistantMessage for m in request.messages) <= 3
    last = model.requests[-1].messages
    assert last[-2:] == result.transcript[-3:-1]  # the newest turn, verbatim
    note = last[1]
    assert type(note) is UserMessage
    assert "earlier messages of this conversation were left out" in note.content[0].text  # type: ignore[union-attr]
    compacted = [e for e in events if type(e) is ContextCompacted]
    assert compacted, "every new cut is reported"
    assert all(e.tokens_after < e.tokens_before for e in compacted)
    assert all(e.policy == "keep_recent" and e.reason == "threshold" for e in compacted)
    # The event comes inside the turn, before the request's reply.
    i = events.index(compacted[0])
    assert type(events[i + 1]).__name__ == "MessageStart"


async def test_keep_recent_fits_the_window_from_model_options() -> None:
    # 20 KB outputs are ~5,000 tokens; a 12,000-token window holds one turn and a bit.
    result, _, model = await run(KeepRecent(8), context_window=12_000)
    assert result.reason == "stop"
    for request in model.requests[1:]:
        tool_results = [m for m in request.messages if type(m) is ToolResultMessage]
        assert len(tool_results) <= 2


async def test_elide_tool_outputs_keeps_calls_answered() -> None:
    result, _, model = await run(ElideToolOutputs(older_than=2, keep_chars=50), n=6)
    last = model.requests[-1].messages
    check_transcript(last)
    results = [m for m in last if type(m) is ToolResultMessage]
    assert [len(r.text) > 20_000 - 1 for r in results] == [False] * 4 + [True] * 2
    assert results[0].tool_call_id == "c0"
    assert results[0].text.startswith(BIG[:50])
    assert "call read again to see them" in results[0].text
    # The transcript itself is untouched.
    assert all(len(m.text) == len(BIG) for m in result.transcript if type(m) is ToolResultMessage)


async def test_a_policy_is_a_transform_context_hook_too() -> None:
    model = ScriptedModel(turns(5))
    config = LoopConfig(transform_context=KeepRecent(2), max_steps=20)
    result = await run_agent_loop("go", Context(tools=[read]), model, config)
    assert result.reason == "stop"
    assert sum(type(m) is AssistantMessage for m in model.requests[-1].messages) == 2


async def test_composed_policies_plan_in_order() -> None:
    policy = compose(ElideToolOutputs(older_than=1, keep_chars=10), KeepRecent(3))
    assert policy.name == "elide_tool_outputs+keep_recent"
    _, _, model = await run(policy, n=8)
    last = model.requests[-1].messages
    results = [m for m in last if type(m) is ToolResultMessage]
    assert len(results) == 3
    assert [len(r.text) < 1000 for r in results] == [True, True, False]


def test_bad_policies_are_refused() -> None:
    with pytest.raises(TypeError, match="context policy"):
        LoopConfig(context=lambda messages: messages)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="turns"):
        KeepRecent(0)
    with pytest.raises(ValueError, match="keep_chars"):
        ElideToolOutputs(keep_chars=-1)
    with pytest.raises(TypeError):
        compose()
    with pytest.raises(ValueError, match="context_window"):
        ModelOptions(context_window=0)


async def test_request_overflow_halves_the_turns_without_a_window() -> None:
    history = tuple(
        m
        for i in range(6)
        for m in (
            tool_use(call(f"c{i}", "read")),
            ToolResultMessage(tool_call_id=f"c{i}", tool_name="read", content=(Text(text="x"),)),
        )
    )
    history = (UserMessage.text("go"), *history)
    request = ContextRequest(
        system_prompt="", tools=(), model=ScriptedModel(), options=ModelOptions()
    )
    normal = await KeepRecent(4).compact(history, request)
    harder = await KeepRecent(4).compact(history, attrs.evolve(request, overflow=True))
    assert sum(type(m) is AssistantMessage for m in normal.messages) == 4
    assert sum(type(m) is AssistantMessage for m in harder.messages) == 2
    assert harder.compacted is not None
    assert harder.compacted.reason == "overflow"


async def test_a_growing_transcript_gets_the_same_views_as_fresh_policies() -> None:
    # The policies reuse what they made for the last request (elided results, the
    # elided part, message sizes): each view still equals a fresh policy's.
    history: list[Any] = [UserMessage.text("go")]
    request = ContextRequest(
        system_prompt="", tools=(), model=ScriptedModel(), options=ModelOptions(context_window=9000)
    )
    policies = [
        ElideToolOutputs(older_than=2, keep_chars=50),
        compose(ElideToolOutputs(older_than=1, keep_chars=10), KeepRecent(4)),
        KeepRecent(3),
    ]
    fresh = [
        lambda: ElideToolOutputs(older_than=2, keep_chars=50),
        lambda: compose(ElideToolOutputs(older_than=1, keep_chars=10), KeepRecent(4)),
        lambda: KeepRecent(3),
    ]
    for i in range(30):
        history.append(tool_use(call(f"c{i}", "read")))
        text = BIG[: 100 * (i % 7)]
        history.append(
            ToolResultMessage(tool_call_id=f"c{i}", tool_name="read", content=(Text(text=text),))
        )
        messages = tuple(history)
        for policy, make in zip(policies, fresh, strict=True):
            kept = await policy.compact(messages, request)
            again = await make().compact(messages, request)
            assert kept.messages == again.messages
            check_transcript(kept.messages)


def _python_calls(policy: Any, messages: tuple[Any, ...], ends: list[int]) -> int:
    """The Python function calls of the request at the end of ``messages``, after the
    policy served the turns before it (its caches warm, as in a run)."""
    import sys

    request = ContextRequest(
        system_prompt="",
        tools=(),
        model=ScriptedModel(),
        options=ModelOptions(context_window=16_000),
    )
    for end in ends[-6:-1]:
        run_sync(policy.compact(messages[:end], request))
    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(count)
    try:
        run_sync(policy.compact(messages, request))
    finally:
        sys.setprofile(None)
    return calls


def run_sync(coro: Any) -> Any:
    """The value of a coroutine that never awaits."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("the policy awaited")


@pytest.mark.parametrize(
    "make",
    [
        lambda: KeepRecent(turns=20),
        lambda: ElideToolOutputs(older_than=2),
        lambda: compose(ElideToolOutputs(older_than=2), KeepRecent(turns=20)),
    ],
    ids=["keep_recent", "elide", "composed"],
)
def test_a_request_costs_the_turns_kept_not_the_history(make: Any) -> None:
    from trio_agent._bench.bench_context import history

    near = _python_calls(make(), *history(1_000))
    far = _python_calls(make(), *history(10_000))
    assert far == near
