"""Batch statistics (issue 7): ``TurnEnd.stats`` and ``AgentRunResult.turns``.

Every figure is checked against what the tools themselves saw on the trio clock, with
``autojump_clock`` so that "sleep 3 s" takes exactly 3 s of trio time and no real time.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import pytest
import trio

from trio_agent import (
    AssistantMessage,
    CallTiming,
    Context,
    LoopConfig,
    Text,
    Tool,
    ToolCall,
    TurnEnd,
    TurnStart,
    TurnStats,
    UserMessage,
    open_agent_loop,
    run_agent_loop,
)
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from trio_agent import AgentEvent, AgentRunResult, ToolContext

SCHEMA = {
    "type": "object",
    "properties": {"seconds": {"type": "number"}},
    "required": ["seconds"],
}


class Clocked:
    """A tool that sleeps ``seconds`` and records when it really ran (trio clock)."""

    def __init__(self, name: str = "sleep", mode: Any = "parallel") -> None:
        self.ran: dict[str, tuple[float, float]] = {}
        self.tool = Tool(
            name=name,
            description="Sleeps.",
            parameters=SCHEMA,
            execute=self._execute,
            execution_mode=mode,
        )

    async def _execute(self, call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
        start = trio.current_time()
        try:
            await trio.sleep(args["seconds"])
        finally:
            self.ran[call.id] = (start, trio.current_time())
        return "slept"


def calls(*seconds: float, name: str = "sleep") -> AssistantMessage:
    return AssistantMessage(
        content=tuple(
            ToolCall(id=f"c{i}", name=name, arguments={"seconds": s}) for i, s in enumerate(seconds)
        ),
        stop_reason="tool_use",
    )


DONE = AssistantMessage(content=(Text(text="done"),), stop_reason="stop")


async def run(
    replies: Sequence[AssistantMessage], tools: Sequence[Tool], **config: Any
) -> tuple[AgentRunResult, list[AgentEvent]]:
    events: list[AgentEvent] = []
    with trio.fail_after(600):
        result = await run_agent_loop(
            [UserMessage.text("go")],
            Context(tools=tuple(tools)),
            ScriptedModel(replies),
            LoopConfig(**config),
            on_event=events.append,
        )
    return result, events


def by_id(stats: TurnStats) -> dict[str, CallTiming]:
    return {c.call_id: c for c in stats.calls}


def check_against_tools(stats: TurnStats, tool: Clocked) -> None:
    """Each call's timing is what the tool itself saw."""
    timings = by_id(stats)
    assert set(timings) == set(tool.ran)
    for call_id, (start, end) in tool.ran.items():
        assert timings[call_id].start == pytest.approx(start)
        assert timings[call_id].end == pytest.approx(end)
        assert timings[call_id].duration == pytest.approx(end - start)


async def test_three_parallel_calls(autojump_clock: Any) -> None:
    tool = Clocked()
    result, _ = await run([calls(1, 2, 3), DONE], [tool.tool])
    stats = result.turns[0]
    assert stats.wall_time == pytest.approx(3)
    assert stats.critical_path == pytest.approx(3)
    assert stats.total_call_time == pytest.approx(6)
    assert stats.peak_concurrency == 3
    assert stats.waited_on_limit == 0
    assert [c.call_id for c in stats.calls] == ["c0", "c1", "c2"]  # declaration order
    assert [c.tool_name for c in stats.calls] == ["sleep"] * 3
    assert all(c.waited == 0 for c in stats.calls)
    check_against_tools(stats, tool)
    # They all started together.
    assert len({c.start for c in stats.calls}) == 1


async def test_max_concurrency_one_waits_and_serializes(autojump_clock: Any) -> None:
    tool = Clocked()
    result, _ = await run([calls(1, 2, 3), DONE], [tool.tool], max_concurrency=1)
    stats = result.turns[0]
    assert stats.peak_concurrency == 1
    assert stats.wall_time == pytest.approx(6)
    assert stats.critical_path == pytest.approx(3)
    assert stats.total_call_time == pytest.approx(6)
    check_against_tools(stats, tool)
    # One after the other: each starts when the previous one ended, and waited for the
    # slot exactly that long since the batch started.
    ordered = sorted(stats.calls, key=lambda c: c.start)
    first = ordered[0].start
    assert ordered[0].waited == pytest.approx(0)
    for before, after in itertools.pairwise(ordered):
        assert after.start == pytest.approx(before.end)
    for c in ordered:
        assert c.waited == pytest.approx(c.start - first)
    assert stats.waited_on_limit == pytest.approx(sum(c.waited for c in stats.calls))
    assert stats.waited_on_limit > 0


async def test_max_concurrency_one_equal_calls(autojump_clock: Any) -> None:
    # Equal durations: the waits are 0, 1 and 2 s whatever order the slots go in.
    tool = Clocked()
    result, _ = await run([calls(1, 1, 1), DONE], [tool.tool], max_concurrency=1)
    stats = result.turns[0]
    assert sorted(c.waited for c in stats.calls) == pytest.approx([0, 1, 2])
    assert stats.waited_on_limit == pytest.approx(3)
    assert stats.wall_time == pytest.approx(3)
    assert stats.peak_concurrency == 1


async def test_max_concurrency_two(autojump_clock: Any) -> None:
    tool = Clocked()
    result, _ = await run([calls(2, 2, 2, 2), DONE], [tool.tool], max_concurrency=2)
    stats = result.turns[0]
    assert stats.peak_concurrency == 2
    assert stats.wall_time == pytest.approx(4)
    assert stats.total_call_time == pytest.approx(8)
    assert sorted(c.waited for c in stats.calls) == pytest.approx([0, 0, 2, 2])
    assert stats.waited_on_limit == pytest.approx(4)


async def test_limit_not_reached_means_no_wait(autojump_clock: Any) -> None:
    tool = Clocked()
    result, _ = await run([calls(1, 2), DONE], [tool.tool], max_concurrency=5)
    stats = result.turns[0]
    assert stats.peak_concurrency == 2
    assert stats.waited_on_limit == 0
    assert stats.wall_time == pytest.approx(2)


async def test_sequential_mode(autojump_clock: Any) -> None:
    tool = Clocked()
    result, _ = await run([calls(1, 2, 3), DONE], [tool.tool], tool_execution="sequential")
    stats = result.turns[0]
    assert stats.peak_concurrency == 1
    assert stats.wall_time == pytest.approx(6)
    assert stats.critical_path == pytest.approx(3)
    assert stats.total_call_time == pytest.approx(6)
    # Sequential calls do not wait on a concurrency limit: they were never started early.
    assert stats.waited_on_limit == 0
    assert [c.call_id for c in sorted(stats.calls, key=lambda c: c.start)] == ["c0", "c1", "c2"]
    check_against_tools(stats, tool)


async def test_one_stats_per_turn_and_turn_end_carries_them(autojump_clock: Any) -> None:
    tool = Clocked()
    result, events = await run([calls(1), calls(2, 2), DONE], [tool.tool])
    turn_ends = [e for e in events if isinstance(e, TurnEnd)]
    assert len(result.turns) == len(turn_ends) == 3
    assert len([e for e in events if isinstance(e, TurnStart)]) == 3
    assert [e.stats for e in turn_ends] == list(result.turns)
    assert [s.peak_concurrency for s in result.turns] == [1, 2, 0]
    assert result.turns[0].wall_time == pytest.approx(1)
    assert result.turns[1].wall_time == pytest.approx(2)
    # A turn without tools has empty statistics.
    assert result.turns[2] == TurnStats()


async def test_turn_stats_with_open_agent_loop(autojump_clock: Any) -> None:
    tool = Clocked()
    with trio.fail_after(600):
        async with open_agent_loop(
            [UserMessage.text("go")],
            Context(tools=(tool.tool,)),
            ScriptedModel([calls(1, 3), DONE]),
        ) as agent_run:
            stats = [e.stats async for e in agent_run.events if isinstance(e, TurnEnd)]
    assert agent_run.result is not None
    assert stats == list(agent_run.result.turns)
    assert stats[0].critical_path == pytest.approx(3)
    assert stats[0].total_call_time == pytest.approx(4)


async def test_calls_stopped_before_execution_are_not_timed(autojump_clock: Any) -> None:
    tool = Clocked()
    reply = AssistantMessage(
        content=(
            ToolCall(id="ok", name="sleep", arguments={"seconds": 1}),
            ToolCall(id="bad", name="sleep", arguments={"seconds": "soon"}),
            ToolCall(id="ghost", name="nope", arguments={}),
        ),
        stop_reason="tool_use",
    )
    result, _ = await run([reply, DONE], [tool.tool])
    stats = result.turns[0]
    assert [c.call_id for c in stats.calls] == ["ok"]
    assert stats.peak_concurrency == 1
    assert stats.total_call_time == pytest.approx(1)


async def test_failing_and_timed_out_calls_are_timed(autojump_clock: Any) -> None:
    async def boom(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
        await trio.sleep(0.5)
        raise RuntimeError("boom")

    tool = Clocked()
    failing = Tool(name="boom", description="Fails.", parameters={"type": "object"}, execute=boom)
    reply = AssistantMessage(
        content=(
            ToolCall(id="slow", name="sleep", arguments={"seconds": 10}),
            ToolCall(id="boom", name="boom", arguments={}),
        ),
        stop_reason="tool_use",
    )
    result, _ = await run([reply, DONE], [tool.tool, failing], tool_timeout=2)
    timings = by_id(result.turns[0])
    assert timings["slow"].duration == pytest.approx(2)  # cut by the timeout
    assert timings["boom"].duration == pytest.approx(0.5)
    assert result.turns[0].critical_path == pytest.approx(2)
    assert result.turns[0].wall_time == pytest.approx(2)


async def test_aborted_batch_has_stats_up_to_the_abort(autojump_clock: Any) -> None:
    tool = Clocked()
    with trio.fail_after(600):
        async with open_agent_loop(
            [UserMessage.text("go")],
            Context(tools=(tool.tool,)),
            ScriptedModel([calls(1, 2, 3), DONE]),
        ) as agent_run:
            async with trio.open_nursery() as nursery:

                async def abort_later() -> None:
                    await trio.sleep(1.5)
                    agent_run.abort()

                nursery.start_soon(abort_later)
                turn_ends = [e async for e in agent_run.events if isinstance(e, TurnEnd)]
    result = agent_run.result
    assert result is not None
    assert result.reason == "aborted"
    assert len(turn_ends) == len(result.turns) == 1
    stats = result.turns[0]
    assert turn_ends[0].stats == stats
    assert stats.peak_concurrency == 3
    assert stats.wall_time == pytest.approx(1.5)
    assert sorted(c.duration for c in stats.calls) == pytest.approx([1, 1.5, 1.5])
    assert stats.critical_path == pytest.approx(1.5)
    assert stats.total_call_time == pytest.approx(4)


async def test_wall_time_covers_preparation_not_just_calls(autojump_clock: Any) -> None:
    # The wall time is the batch's; a slow before_tool_call hook is inside it, while the
    # calls' own durations are not.
    async def slow_gate(ctx: Any) -> None:
        await trio.sleep(1)

    tool = Clocked()
    result, _ = await run([calls(2), DONE], [tool.tool], before_tool_call=slow_gate)
    stats = result.turns[0]
    assert stats.critical_path == pytest.approx(2)
    assert stats.wall_time == pytest.approx(3)
