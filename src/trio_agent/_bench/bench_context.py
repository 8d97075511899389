"""Context policies: what compaction costs per turn, next to what a turn of the loop
costs.

``python -m trio_agent._bench.bench_context`` (and ``trio-agent bench --only context``)
grows a transcript one turn at a time — a user prompt, then turns of one tool call and
its 2 KB result — and before each turn's request asks the policy for the view, as a
run with ``LoopConfig(context=...)`` does. ``ours`` is the time of those ``compact``
calls over 1,000 turns; the floor is W1's ``run_agent_loop`` (no consumer) over the same
1,000 turns: the ratio is compaction's cost per turn in W1 turns. A second row per
policy times one request at turn 10,000 against one at turn 1,000 (median of the last
50 calls of each; at 10,000 the policy starts 100 turns before the end, its first call
not counted): a policy that costs the turns it keeps, not the history, reads about 1×.

The window (16,000 tokens, about 28 such turns) makes ``KeepRecent(turns=20)`` keep 20
turns and ``Summarize(keep_recent=4)`` summarise about every 20 turns; its summariser
is a ``ScriptedModel`` that answers at once, so the row is the policy's own work, not a
model's. ``ElideToolOutputs`` alone keeps every turn (elided): its view is the whole
history, built by copying references (the elided part is extended, not remade).

Times are the process's CPU time: on a shared machine, waiting for a core is not the
policy's cost. As for the suite's other in-process rows, the heap is frozen
(``gc.freeze()``) before each timed run.
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import TYPE_CHECKING, Any

import trio

from trio_agent import (
    AssistantMessage,
    Message,
    ModelOptions,
    Text,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from trio_agent._bench import bench_turns
from trio_agent.context import (
    ContextRequest,
    ElideToolOutputs,
    KeepRecent,
    Policy,
    Summarize,
    compose,
)
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from collections.abc import Callable

TURNS = 1000
FAR = 10_000
WINDOW = 16_000
OUTPUT = "x" * 2000
LAST = 50


def history(turns: int) -> tuple[tuple[Message, ...], list[int]]:
    """A prompt and ``turns`` turns of one call and its 2 KB result; and where each
    turn's request is made (the transcript's length then)."""
    out: list[Message] = [UserMessage.text("Read every file and report.")]
    ends = []
    for i in range(turns):
        ends.append(len(out))
        call = ToolCall(id=f"c{i}", name="read", arguments={"path": f"f{i}.py"})
        out.append(AssistantMessage(content=(call,), stop_reason="tool_use"))
        out.append(
            ToolResultMessage(tool_call_id=call.id, tool_name="read", content=(Text(text=OUTPUT),))
        )
    ends.append(len(out))
    return tuple(out), ends


def _summariser() -> ScriptedModel:
    reply = AssistantMessage(content=(Text(text="summary: files were read"),), stop_reason="stop")
    # More answers than a 10,000-turn run asks for (one summary about every 20 turns).
    return ScriptedModel([reply] * 2000, keep_requests=False)


POLICIES: dict[str, Callable[[], Policy]] = {
    "KeepRecent(turns=20)": lambda: KeepRecent(turns=20),
    "ElideToolOutputs(older_than=2)": lambda: ElideToolOutputs(older_than=2),
    "ElideToolOutputs + KeepRecent(20)": lambda: compose(
        ElideToolOutputs(older_than=2), KeepRecent(turns=20)
    ),
    "Summarize(keep_recent=4)": lambda: Summarize(_summariser(), keep_recent=4),
}


def _grow(factory: Callable[[], Policy], turns: int, *, tail: bool = False) -> tuple[float, float]:
    """Seconds of every ``compact`` call of a ``turns``-turn run, and the median of its
    last :data:`LAST` calls. ``tail``: only the last ``2 * LAST`` turns are run (the
    policy's first call, which fills its caches, is not among the last ones)."""
    messages, ends = history(turns)
    if tail:
        ends = ends[-2 * LAST :]
    request = ContextRequest(
        system_prompt="",
        tools=(),
        model=ScriptedModel(keep_requests=False),
        options=ModelOptions(context_window=WINDOW),
    )

    async def run() -> tuple[float, float]:
        policy = factory()
        total = 0.0
        last: list[float] = []
        for i, end in enumerate(ends):
            view = messages[:end]  # the transcript when the turn's request is made
            start = time.process_time()
            await policy.compact(view, request)
            took = time.process_time() - start
            total += took
            if i >= len(ends) - LAST:
                last.append(took)
        return total, statistics.median(last)

    # As the suite's in-process rows: what exists before the run (the history) is moved
    # out of the collector's reach, so a collection during it does not walk 10,000
    # turns that no policy touches.
    gc.collect()
    gc.freeze()
    try:
        return trio.run(run)
    finally:
        gc.unfreeze()


def _w1(turns: int) -> float:
    replies = bench_turns.script(turns)
    gc.collect()
    gc.freeze()
    try:
        return bench_turns.ours_plain(turns, replies)[1]
    finally:
        gc.unfreeze()


def run(quick: bool = False, repeats: int = 3) -> list[dict[str, Any]]:
    """Rows for the suite: per policy, its cost over a 1,000-turn run against W1's, and
    one request at turn 10,000 against one at turn 1,000 (medians of ``repeats``)."""
    turns, far = (100, 1000) if quick else (TURNS, FAR)
    repeats = 1 if quick else repeats
    w1 = statistics.median(_w1(turns) for _ in range(repeats))
    rows: list[dict[str, Any]] = []
    for name, factory in POLICIES.items():
        near = [_grow(factory, turns) for _ in range(repeats)]
        total = statistics.median(t for t, _ in near)
        at_near = statistics.median(c for _, c in near)
        at_far = statistics.median(_grow(factory, far, tail=True)[1] for _ in range(repeats))
        rows.append(
            {
                "case": f"{name} per turn vs a W1 turn",
                "ours": total,
                "floor": w1,
                "size": f"T={turns:,}",
                "n": turns,
                "unit": "turn",
            }
        )
        rows.append(
            {
                "case": f"{name} one request at T={far:,} vs T={turns:,}",
                "ours": at_far,
                "floor": at_near,
                "size": "1 request",
                "n": 1,
                "unit": "request",
            }
        )
    return rows


def main() -> None:
    for row in run():
        ratio = row["ours"] / row["floor"]
        per = row["ours"] / row["n"]
        print(f"{row['case']:<70} {row['size']:>10} {per * 1e6:10.1f} µs  {ratio:6.2f}×")


if __name__ == "__main__":
    main()
