"""Faults drawn over real traffic: a cassette recorded from a provider (the version 1
fixture, an OpenAI-compatible stream of three turns with tool calls) is replayed
strictly through the loop with one fault — raise, error, stall or cut at any event of
any request — and every run keeps the loop's invariants (``assert_run_invariants``):
paired before each request and at the end, one ``AgentEnd``, the context unchanged,
per-call events in order, the transcript round-tripping through JSON. A second property
adds an abort at any instant of such a replay (or of an unfaulted one): no request
follows it.

The tools answer from the cassette itself (the result recorded for each call id), so
strict matching holds up to the fault. Timing is replayed on the autojump clock.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kit.loop import results_of
from trio_agent import (
    AgentEvent,
    AgentRun,
    AssistantMessage,
    Context,
    LoopConfig,
    Tool,
    ToolResultMessage,
    UserMessage,
    open_agent_loop,
    run_agent_loop,
)
from trio_agent.replay import Cassette, Fault, ReplayModel, faults, load_cassette
from trio_agent.testing import assert_run_invariants

if TYPE_CHECKING:
    from collections.abc import Mapping

    from trio.testing import MockClock

    from trio_agent import ToolCall, ToolContext

FIXTURE = Path(__file__).parent.parent / "tests" / "data" / "cassette_v1.jsonl"
CASSETTE = load_cassette(FIXTURE)
IDLE = 30.0
GUARD = 10_000

with_clock = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


def recorded_tools(cassette: Cassette) -> tuple[Tool, ...]:
    """Tools named as in the cassette, each answering a call with its recorded result."""
    results: dict[str, ToolResultMessage] = {}
    for record in cassette.records:
        results.update(results_of(record.request.messages))

    async def execute(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
        await trio.sleep(0.01)
        result = results[call.id]
        if result.is_error:
            raise RuntimeError(result.text)
        return result.text

    return tuple(
        Tool(name=s.name, description=s.description, parameters=s.parameters, execute=execute)
        for s in cassette.records[0].request.tools
    )


FIRST = CASSETTE.records[0].request
PROMPT = FIRST.messages[0]
assert isinstance(PROMPT, UserMessage)
CONTEXT = Context(system_prompt=FIRST.system_prompt, tools=recorded_tools(CASSETTE))


async def replay(fault: Fault | None) -> tuple[Any, list[AgentEvent], ReplayModel]:
    model = ReplayModel(CASSETTE, faults=[fault] if fault else [])
    events: list[AgentEvent] = []
    config = LoopConfig(stream_idle_timeout=IDLE)
    with trio.fail_after(GUARD):
        result = await run_agent_loop([PROMPT], CONTEXT, model, config, on_event=events.append)
    assert_run_invariants(
        result,
        events,
        model.requests,
        CONTEXT,
        context=CONTEXT,
        prompts=[PROMPT],
        max_steps=config.max_steps,
    )
    assert model.mismatches == []
    assert model.open_streams == 0
    return result, events, model


async def test_the_unfaulted_replay_is_the_recorded_session(autojump_clock: MockClock) -> None:
    result, _, model = await replay(None)
    assert result.reason == "stop"
    assert len(model.requests) == len(CASSETTE.records)
    last = CASSETTE.records[-1].events[-1].event
    assert result.messages[-1] == last.message  # type: ignore[union-attr]


@with_clock
@given(fault=faults(CASSETTE))
async def test_any_fault_over_recorded_traffic_keeps_the_invariants(
    autojump_clock: MockClock, fault: Fault
) -> None:
    result, _, _ = await replay(fault)
    # The faulted request is the run's last: its reply is an error and ends the run.
    assert result.steps == fault.request + 1
    assert result.reason == "error"
    reply = [m for m in result.messages if isinstance(m, AssistantMessage)][-1]
    assert reply.stop_reason == "error"
    assert reply.error_message
    expected = {
        "raise": "InjectedFault: injected fault",
        "error": "injected fault: error",
        "stall": f"silent for {IDLE:g}s",
        "cut": "ended without a Done or Error event",
    }[fault.kind]
    assert expected in reply.error_message


# Instants across the replayed session: the recorded offsets are milliseconds, the
# tools sleep 10 ms each.
END = max(r.end.at for r in CASSETTE.records) * len(CASSETTE.records) + 0.05


@with_clock
@given(
    fault=st.none() | faults(CASSETTE),
    at=st.floats(0, END, allow_nan=False),
)
async def test_an_abort_at_any_instant_of_a_faulted_replay_keeps_the_invariants(
    autojump_clock: MockClock, fault: Fault | None, at: float
) -> None:
    model = ReplayModel(CASSETTE, faults=[fault] if fault else [])
    config = LoopConfig(stream_idle_timeout=IDLE)
    events: list[AgentEvent] = []
    at_abort: list[int] = []

    async def abort_later(run: AgentRun) -> None:
        await trio.sleep(at)
        at_abort.append(len(model.requests))
        run.abort("stop")

    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            async with open_agent_loop([PROMPT], CONTEXT, model, config) as run:
                nursery.start_soon(abort_later, run)  # noqa: ASYNC111  # cancelled below
                async for event in run.events:
                    events.append(event)
            nursery.cancel_scope.cancel()
    assert run.result is not None
    assert_run_invariants(
        run.result,
        events,
        model.requests,
        CONTEXT,
        context=CONTEXT,
        prompts=[PROMPT],
        max_steps=config.max_steps,
        requests_at_abort=at_abort[0] if at_abort else None,
    )
    assert model.mismatches == []
    assert model.open_streams == 0
    if at_abort and run.result.reason == "aborted":
        assert run.result.steps == at_abort[0]
