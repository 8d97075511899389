"""W2, wide batch: one turn of N calls, each sleeping 10 ms, then a final stop.

``ours`` runs ``run_agent_loop`` (no consumer) and checks the turn's batch statistics
(``AgentRunResult.turns``) against what happened: N calls timed, peak concurrency N,
critical path at least the 10 ms sleep, total call time at least N × 10 ms, batch wall
time between the critical path and the measured time. The floor streams the same reply
from an in-memory stream and runs the calls in one nursery, results in a list.

The overhead per call is ``(wall time − 10 ms) / N``. Every repeat runs in a fresh
interpreter (``fresh=True``: what an application's process sees, see
:mod:`trio_agent._bench._harness`); peak RSS growth is measured in a fresh subprocess
per contender and size too (:mod:`trio_agent._bench._rss`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from trio_agent import (
    AssistantMessage,
    Context,
    LoopConfig,
    Text,
    Tool,
    ToolCall,
    UserMessage,
    run_agent_loop,
)
from trio_agent._bench._harness import Case, Stopwatch, Timing
from trio_agent._bench.bench_turns import floor_loop
from trio_agent.testing import ScriptedModel, events_for

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from trio_agent import AssistantEvent, ToolContext

SIZES = (10, 100, 1_000, 10_000)
SLEEP = 0.010


async def sleep_tool(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext | None) -> str:
    await trio.sleep(SLEEP)
    return "ok"


SLEEP_TOOL = Tool(
    name="sleep",
    description="Sleeps 10 ms.",
    parameters={"type": "object", "properties": {}},
    execute=sleep_tool,
)


def reply_with_calls(n: int, prefix: str = "call") -> AssistantMessage:
    return AssistantMessage(
        content=tuple(ToolCall(id=f"{prefix}-{i}", name="sleep", arguments={}) for i in range(n)),
        stop_reason="tool_use",
    )


FINAL = AssistantMessage(content=(Text(text="done"),), stop_reason="stop")


def script(calls: int) -> tuple[list[AssistantEvent], ...]:
    """One reply with ``calls`` calls, then a final text, as event lists."""
    return (events_for(reply_with_calls(calls)), events_for(FINAL))


def check_stats(result: Any, calls: int, elapsed: float) -> None:
    """The batch statistics must describe what ran (issue 7, point 1)."""
    stats = result.turns[0]
    assert len(stats.calls) == calls
    assert stats.peak_concurrency == calls, stats.peak_concurrency
    assert stats.waited_on_limit == 0
    assert stats.critical_path >= SLEEP
    assert stats.total_call_time >= calls * SLEEP
    assert stats.critical_path <= stats.wall_time <= elapsed
    assert all(c.start <= c.end for c in stats.calls)
    assert result.turns[1].calls == ()


async def _ours(calls: int, replies: Sequence[list[AssistantEvent]]) -> Timing:
    model = ScriptedModel(replies, keep_requests=False)
    context = Context(tools=(SLEEP_TOOL,))
    with Stopwatch() as watch:
        result = await run_agent_loop([UserMessage.text("go")], context, model, LoopConfig())
    assert result.reason == "stop", result.reason
    assert len(result.messages) == calls + 3
    check_stats(result, calls, watch.timing[0])
    return watch.timing


def ours(calls: int, replies: Sequence[list[AssistantEvent]]) -> Timing:
    return trio.run(_ours, calls, replies)


async def _floor(calls: int, replies: Sequence[list[AssistantEvent]]) -> Timing:
    tools = {"sleep": sleep_tool}
    with Stopwatch() as watch:
        transcript = await floor_loop(replies, tools)
    assert len(transcript) == calls + 3
    return watch.timing


def floor(calls: int, replies: Sequence[list[AssistantEvent]]) -> Timing:
    return trio.run(_floor, calls, replies)


CASES = (
    Case(
        workload="W2",
        name="wide batch",
        size_label="N",
        unit="call",
        sizes=SIZES,
        quick_sizes=(10,),
        ours=ours,
        floor=floor,
        prepare=script,
        module=__name__,
        offset=SLEEP,
        memory=True,
        peer_sizes=(10_000,),
        fresh=True,
    ),
)
