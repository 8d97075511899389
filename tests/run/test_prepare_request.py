"""``LoopConfig.prepare_request`` (called before every model request, the first included)
and ``ToolExecutionEnd.duration`` (how long a tool's ``execute`` ran, on the trio clock)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
import trio

from tests.kit.loop import (
    Recorder,
    assert_consistent,
    call,
    ctx,
    make_tool,
    prompt,
    reply,
    tool_use,
)
from trio_agent import (
    AfterToolCallContext,
    AgentEnd,
    AgentRunError,
    BeforeToolCallContext,
    BeforeToolCallResult,
    Context,
    LoopConfig,
    MessageEnd,
    MessageStart,
    ModelOptions,
    NextTurn,
    RequestContext,
    ToolCall,
    ToolContext,
    ToolExecutionEnd,
    TurnEnd,
    TurnStart,
    UserMessage,
    open_agent,
    open_agent_loop,
    run_agent_loop,
)
from trio_agent._core._events import AgentEvent
from trio_agent._core._serde import event_to_json, from_jsonable
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from collections.abc import Mapping

    from trio.testing import MockClock


# --- prepare_request ------------------------------------------------------------------------


async def test_prepare_request_runs_once_before_every_request_the_first_included() -> None:
    rec = Recorder()
    seen: list[tuple[int, RequestContext]] = []

    def prepare(rc: RequestContext) -> None:
        seen.append((len(rec.events), rc))

    steering = [[UserMessage.text("steer")], []]
    model = ScriptedModel([tool_use(call("a")), tool_use(call("b")), reply()])
    result = await run_agent_loop(
        prompt("first"),
        ctx(make_tool()),
        model,
        LoopConfig(
            prepare_request=prepare,
            get_steering_messages=lambda: steering.pop() if steering else [],
            model_options=ModelOptions(temperature=0.5),
        ),
        on_event=rec,
    )
    assert result.steps == len(model.requests) == len(seen) == 3
    for (at, rc), request in zip(seen, model.requests, strict=True):
        # The request is built from exactly the context the hook was shown.
        assert rc.context.messages == request.messages
        assert rc.model is model
        assert rc.options == request.options == ModelOptions(temperature=0.5)
        # After the pending messages' events, before the reply's first event.
        assert isinstance(rec.events[at - 1], MessageEnd | TurnStart)
        assert isinstance(rec.events[at], MessageStart)
        assert rec.events[at].message.role == "assistant"
    # The first request's hook already sees the prompt; the second the steering message.
    assert [m.role for m in seen[0][1].context.messages] == ["user"]
    assert seen[1][1].context.messages[-1].content[0].text == "steer"  # type: ignore[union-attr]
    assert_consistent(result, rec.events, model.requests)


async def test_prepare_request_swaps_take_effect_for_this_and_later_requests() -> None:
    other = ScriptedModel([tool_use(call("b")), reply("from the other model")])
    first = ScriptedModel([reply("never asked")])
    shown: list[RequestContext] = []

    async def prepare(rc: RequestContext) -> NextTurn | None:
        await trio.lowlevel.checkpoint()
        shown.append(rc)
        if len(shown) > 1:
            return None  # keeps what the first call chose
        return NextTurn(
            context=Context(
                system_prompt="swapped prompt",
                messages=(UserMessage.text("canonical"), *rc.context.messages),
                tools=rc.context.tools,
            ),
            model=other,
            options=ModelOptions(max_tokens=99),
        )

    result = await run_agent_loop(
        prompt("hi"),
        ctx(make_tool(), system_prompt="original"),
        first,
        LoopConfig(prepare_request=prepare),
    )
    assert first.requests == []  # swapped before the very first request
    assert [r.system_prompt for r in other.requests] == ["swapped prompt", "swapped prompt"]
    assert [r.options.max_tokens for r in other.requests] == [99, 99]
    assert [m.content[0].text for m in other.requests[0].messages] == ["canonical", "hi"]  # type: ignore[union-attr]
    assert shown[1].model is other
    assert shown[1].context.system_prompt == "swapped prompt"
    assert result.transcript[0].content[0].text == "canonical"  # type: ignore[union-attr]
    assert (result.reason, result.steps) == ("stop", 2)


@pytest.mark.parametrize("at", [0, 1])
async def test_an_error_in_prepare_request_ends_the_run_paired(at: int) -> None:
    calls = 0

    def prepare(rc: RequestContext) -> None:
        nonlocal calls
        calls += 1
        if calls - 1 == at:
            raise RuntimeError("no context today")

    rec = Recorder()
    model = ScriptedModel([tool_use(call("a"), call("b")), reply()])
    with pytest.raises(AgentRunError) as info:
        await run_agent_loop(
            prompt(), ctx(make_tool()), model, LoopConfig(prepare_request=prepare), on_event=rec
        )
    result = info.value.result
    assert isinstance(info.value.__cause__, RuntimeError)
    assert str(info.value.__cause__) == "no context today"
    assert result.reason == "error"
    # No request after the hook failed.
    assert len(model.requests) == result.steps == at
    assert rec.events[-1] == AgentEnd(reason="error", messages=result.messages)
    last_turn = rec.of(TurnEnd)[-1]
    assert last_turn.message is None  # the turn it was preparing sent nothing
    assert_consistent(result, rec.events, model.requests)


async def test_prepare_request_returning_something_else_fails_the_run_naming_it() -> None:
    model = ScriptedModel([reply()])
    with pytest.raises(AgentRunError) as info:
        await run_agent_loop(
            prompt(),
            ctx(),
            model,
            LoopConfig(prepare_request=lambda rc: "not a NextTurn"),  # type: ignore[arg-type,return-value]
        )
    assert "prepare_request returned" in str(info.value.__cause__)
    assert model.requests == []
    assert info.value.result.reason == "error"


async def test_prepare_request_is_not_called_when_no_request_follows() -> None:
    calls: list[int] = []
    model = ScriptedModel([tool_use(call("a")), reply()])
    result = await run_agent_loop(
        prompt(),
        ctx(make_tool()),
        model,
        LoopConfig(max_steps=1, prepare_request=lambda rc: calls.append(1)),  # type: ignore[func-returns-value]
    )
    assert (result.reason, len(calls)) == ("max_steps", 1)


async def test_an_agent_calls_prepare_request_for_every_request_of_every_prompt() -> None:
    seen: list[RequestContext] = []

    def prepare(rc: RequestContext) -> NextTurn | None:
        seen.append(rc)
        return None

    model = ScriptedModel([tool_use(call("a")), reply("one"), reply("two")])
    async with open_agent(
        model, tools=[make_tool()], config=LoopConfig(prepare_request=prepare)
    ) as agent:
        first = await agent.prompt("first")
        second = await agent.prompt("second")
    assert first.steps + second.steps == len(seen) == len(model.requests) == 3
    for rc, request in zip(seen, model.requests, strict=True):
        assert rc.context.messages == request.messages
    # The second prompt's request is prepared with the whole conversation, prompt included.
    assert [m.role for m in seen[2].context.messages] == [
        "user",
        "assistant",
        "tool_result",
        "assistant",
        "user",
    ]


# --- ToolExecutionEnd.duration -------------------------------------------------------------------


async def _nap(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:
    await trio.sleep(args["s"])
    return "rested"


def nap(**kwargs: Any) -> Any:
    """A tool that sleeps ``s`` seconds (a number)."""
    schema = {"type": "object", "properties": {"s": {"type": "number"}}, "required": ["s"]}
    return make_tool("nap", _nap, parameters=schema, **kwargs)


async def test_duration_is_how_long_execute_ran_on_the_trio_clock(
    autojump_clock: MockClock,
) -> None:
    async def slow_hooks_around(bc: BeforeToolCallContext) -> BeforeToolCallResult | None:
        await trio.sleep(100)  # not part of the call's duration
        if bc.tool_call.id == "blocked":
            return BeforeToolCallResult(block=True)
        return None

    async def after(ac: AfterToolCallContext) -> None:
        await trio.sleep(50)  # nor is this

    async def failing(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:
        await trio.sleep(1.5)
        raise ValueError("gave up")

    rec = Recorder()
    model = ScriptedModel(
        [
            tool_use(
                call("short", "nap", s=2),
                call("long", "nap", s=7.25),
                call("fails", "failing"),
                call("blocked", "nap", s=1),
                call("missing", "nowhere"),
                call("bad", "nap", s="soon"),
            ),
            reply(),
        ]
    )
    with trio.fail_after(1000):
        result = await run_agent_loop(
            prompt(),
            ctx(nap(), make_tool("failing", failing)),
            model,
            LoopConfig(
                before_tool_call=slow_hooks_around,
                after_tool_call=after,
                max_concurrency=1,  # waiting for a slot is not part of it either
            ),
            on_event=rec,
        )
    durations = {e.call_id: e.duration for e in rec.of(ToolExecutionEnd)}
    assert durations == {
        "short": 2.0,
        "long": 7.25,
        "fails": 1.5,
        "blocked": None,
        "missing": None,
        "bad": None,
    }
    assert_consistent(result, rec.events, model.requests)


async def test_duration_of_a_timed_out_or_aborted_call(autojump_clock: MockClock) -> None:
    model = ScriptedModel([tool_use(call("slow", "nap", s=60), call("stuck", "stuck"))])

    async def stuck(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    rec = Recorder()
    async with open_agent_loop(
        prompt(), ctx(nap(timeout=4), make_tool("stuck", stuck)), model
    ) as run:
        async for event in run.events:
            rec(event)
            if isinstance(event, ToolExecutionEnd) and event.call_id == "slow":
                await trio.sleep(6)  # the stuck call has run 10 s now
                run.abort("enough")
    ends = {e.call_id: e for e in rec.of(ToolExecutionEnd)}
    assert (ends["slow"].outcome, ends["slow"].duration) == ("timed_out", 4.0)
    assert (ends["stuck"].outcome, ends["stuck"].duration) == ("aborted", 10.0)
    assert run.result is not None
    assert_consistent(run.result, rec.events, model.requests)


async def test_duration_round_trips_through_event_json() -> None:
    from trio_agent import ToolResultMessage

    result = ToolResultMessage(tool_call_id="c", tool_name="t", content=(), timestamp=1.0)
    end = ToolExecutionEnd(
        call_id="c", tool_name="t", result=result, is_error=False, outcome="ok", duration=0.25
    )
    text = event_to_json(end)
    assert '"duration":0.25' in text
    assert from_jsonable(json.loads(text), AgentEvent) == end
    skipped = ToolExecutionEnd(
        call_id="c", tool_name="t", result=result, is_error=True, outcome="skipped"
    )
    assert skipped.duration is None
