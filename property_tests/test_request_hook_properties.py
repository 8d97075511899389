"""``LoopConfig.prepare_request`` on generated runs: called exactly once before every
model request (the first included), what it swaps is what the requests carry, and a
failure at any of its calls ends the run with every invariant kept."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
    AssistantMessage,
    LoopConfig,
    Message,
    ModelOptions,
    NextTurn,
    RequestContext,
    UserMessage,
    run_agent_loop,
)
from trio_agent.testing import HookFailure, Script, ScriptedModel, scripts

if TYPE_CHECKING:
    from trio.testing import MockClock

with_clock = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
GUARD = 10_000


@with_clock
@given(script=scripts(), at=st.integers(0, 3))
async def test_a_failing_prepare_request_keeps_every_invariant(
    autojump_clock: MockClock, script: Script, at: int
) -> None:
    failing = attrs.evolve(script, hook_failure=HookFailure(hook="prepare_request", at=at))
    with trio.fail_after(GUARD):
        run = await failing.run()
    run.check()  # the eight invariants, and AgentRunError iff the hook raised
    # No request is sent after the hook failed.
    assert not run.hook_failed or len(run.requests) == at


def _replies(calls_per_reply: list[int]) -> list[AssistantMessage]:
    out = [
        tool_use(*(call(f"c{i}.{j}") for j in range(n))) if n else reply(f"answer {i}")
        for i, n in enumerate(calls_per_reply)
    ]
    return [*out, reply("the end")]


@given(
    calls_per_reply=st.lists(st.integers(0, 3), max_size=5),
    steering=st.lists(st.integers(0, 2), max_size=6),
    follow_ups=st.integers(0, 2),
    max_steps=st.integers(1, 8),
    swaps=st.dictionaries(st.integers(0, 7), st.integers(1, 1000), max_size=3),
)
async def test_prepare_request_runs_once_per_request_and_its_swaps_hold(
    calls_per_reply: list[int],
    steering: list[int],
    follow_ups: int,
    max_steps: int,
    swaps: dict[int, int],
) -> None:
    model = ScriptedModel(_replies(calls_per_reply) * 3)  # never runs dry
    polls = [[UserMessage.text(f"steer {i}.{j}") for j in range(n)] for i, n in enumerate(steering)]
    follow = [[UserMessage.text(f"follow {i}")] for i in range(follow_ups)]
    seen: list[RequestContext] = []

    def prepare(rc: RequestContext) -> NextTurn | None:
        seen.append(rc)
        n = len(seen) - 1
        return NextTurn(options=ModelOptions(max_tokens=swaps[n])) if n in swaps else None

    def steer() -> list[Message]:
        return list(polls.pop(0)) if polls else []

    def follow_up() -> list[Message]:
        return list(follow.pop(0)) if follow else []

    rec = Recorder()
    with trio.fail_after(GUARD):
        result = await run_agent_loop(
            prompt(),
            ctx(make_tool()),
            model,
            LoopConfig(
                max_steps=max_steps,
                prepare_request=prepare,
                get_steering_messages=steer,
                get_follow_up_messages=follow_up,
            ),
            on_event=rec,
        )
    assert len(seen) == result.steps == len(model.requests)
    expected: int | None = None
    for n, (rc, request) in enumerate(zip(seen, model.requests, strict=True)):
        # The hook sees what the request is built from: every pending message included.
        assert rc.context.messages == request.messages
        assert rc.options.max_tokens == expected  # what the last swap set, or the default
        expected = swaps.get(n, expected)
        assert request.options.max_tokens == expected  # a swap applies to its own request
    assert_consistent(result, rec.events, model.requests)
