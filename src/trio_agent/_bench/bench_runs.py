"""W3, many runs: R independent runs at once, each one 10 ms tool call then a stop.

``ours`` starts R ``run_agent_loop`` s in one nursery (one ``ScriptedModel`` each, the
context and config shared, as an application would); the floor starts R bare loops.
Every repeat runs in a fresh interpreter (``fresh=True``, as W2). Memory per run is the
peak RSS growth of a fresh subprocess divided by R.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from trio_agent import Context, LoopConfig, UserMessage, run_agent_loop
from trio_agent._bench._harness import Case, Stopwatch, Timing
from trio_agent._bench.bench_batch import FINAL, SLEEP, SLEEP_TOOL, reply_with_calls, sleep_tool
from trio_agent._bench.bench_turns import floor_loop
from trio_agent.testing import ScriptedModel, events_for

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trio_agent import AgentRunResult, AssistantEvent

SIZES = (1_000,)


def script(runs: int) -> tuple[list[AssistantEvent], ...]:
    """The two replies every run gets (the same lists: a model never changes them)."""
    return (events_for(reply_with_calls(1)), events_for(FINAL))


async def _ours(runs: int, replies: Sequence[list[AssistantEvent]]) -> Timing:
    models = [ScriptedModel(replies, keep_requests=False) for _ in range(runs)]
    context = Context(tools=(SLEEP_TOOL,))
    config = LoopConfig()
    prompts = [UserMessage.text("go")]
    results: list[AgentRunResult | None] = [None] * runs

    async def one(i: int) -> None:
        results[i] = await run_agent_loop(prompts, context, models[i], config)

    with Stopwatch() as watch:
        async with trio.open_nursery() as nursery:
            for i in range(runs):
                nursery.start_soon(one, i)
    for result in results:
        assert result is not None
        assert result.reason == "stop"
        assert len(result.messages) == 4
        assert result.turns[0].critical_path >= SLEEP
    return watch.timing


def ours(runs: int, replies: Sequence[list[AssistantEvent]]) -> Timing:
    return trio.run(_ours, runs, replies)


async def _floor(runs: int, replies: Sequence[list[AssistantEvent]]) -> Timing:
    tools = {"sleep": sleep_tool}
    transcripts: list[list[Any]] = [[] for _ in range(runs)]

    async def one(i: int) -> None:
        transcripts[i] = await floor_loop(replies, tools)

    with Stopwatch() as watch:
        async with trio.open_nursery() as nursery:
            for i in range(runs):
                nursery.start_soon(one, i)
    assert all(len(t) == 4 for t in transcripts)
    return watch.timing


def floor(runs: int, replies: Sequence[list[AssistantEvent]]) -> Timing:
    return trio.run(_floor, runs, replies)


CASES = (
    Case(
        workload="W3",
        name="many runs",
        size_label="R",
        unit="run",
        sizes=SIZES,
        quick_sizes=(10,),
        ours=ours,
        floor=floor,
        prepare=script,
        module=__name__,
        memory=True,
        memory_per_unit=True,
        peer_sizes=(1_000,),
        fresh=True,
    ),
)
