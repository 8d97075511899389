"""W4, streaming: one reply of N text deltas, with an ``on_event`` consumer.

The consumer makes the loop build a ``MessageUpdate`` (with its partial-message snapshot)
per delta; it reads each update's delta, as a live display would, but not the partial
message (that is built only when read). The floor reads the same events from an
in-memory stream and joins the deltas once. The target is a flat cost per delta: no
O(N²) snapshots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from trio_agent import (
    AssistantMessage,
    Context,
    Done,
    MessageUpdate,
    Start,
    Text,
    TextDelta,
    TextEnd,
    TextStart,
    UserMessage,
    run_agent_loop,
)
from trio_agent._bench._harness import Case, Stopwatch, Timing
from trio_agent._run._streams import MemoryStream
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from trio_agent import AgentEvent, AssistantEvent

SIZES = (1_000, 10_000, 100_000)
DELTA = "tok "


def script(deltas: int) -> list[AssistantEvent]:
    text = DELTA * deltas
    message = AssistantMessage(content=(Text(text=text),), stop_reason="stop")
    events: list[AssistantEvent] = [Start(), TextStart(index=0)]
    events.extend(TextDelta(index=0, delta=DELTA) for _ in range(deltas))
    events.extend([TextEnd(index=0, text=text), Done(message=message)])
    return events


async def _ours(deltas: int, events: list[AssistantEvent]) -> Timing:
    model = ScriptedModel([events], keep_requests=False)
    seen = 0

    def on_event(event: AgentEvent) -> None:
        nonlocal seen
        if type(event) is MessageUpdate and type(event.event) is TextDelta:
            seen += len(event.event.delta)

    with Stopwatch() as watch:
        result = await run_agent_loop([UserMessage.text("go")], Context(), model, on_event=on_event)
    assert result.reason == "stop"
    assert seen == len(DELTA) * deltas
    return watch.timing


def ours(deltas: int, events: list[AssistantEvent]) -> Timing:
    return trio.run(_ours, deltas, events)


async def _floor(events: list[AssistantEvent]) -> Timing:
    with Stopwatch() as watch:
        parts: list[str] = []
        final: Any = None
        async for event in MemoryStream(events):
            if type(event) is TextDelta:
                parts.append(event.delta)
            elif type(event) is Done:
                final = event.message
                break
        text = "".join(parts)
    assert final is not None
    assert text == final.text
    return watch.timing


def floor(deltas: int, events: list[AssistantEvent]) -> Timing:
    return trio.run(_floor, events)


CASES = (
    Case(
        workload="W4",
        name="streaming",
        size_label="N",
        unit="delta",
        sizes=SIZES,
        quick_sizes=(1_000,),
        ours=ours,
        floor=floor,
        prepare=script,
        module=__name__,
    ),
)
