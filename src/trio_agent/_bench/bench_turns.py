"""W1, turn overhead: T turns of one no-op tool call, then a final stop.

``ours`` runs ``run_agent_loop`` (no event consumer) or ``open_agent_loop`` with a
consumer reading every event; the model is ``ScriptedModel`` replaying prebuilt event
lists (no task per stream) and keeping no requests (a provider does not hold every
request it sent; kept, they would be a copy of the conversation per turn). The floor is
the loop a trio user would write by hand with nothing else: read the reply from an
in-memory stream (``ScriptedModel``'s own: the same events, the same scheduling),
append it to a list, run its calls in a nursery, append the results. No validation, no
events, no result objects.

A third case puts the consumer in perspective: its floor is the same bare loop sending
as many events as ours does, through the same kind of channel (buffer 0) to a consumer
task — the cost of handing every event to another task, which no loop can avoid.

The same run through an ``Agent`` (``agent.prompt``, the agent opened outside the timed
region): against the bare floor; against ``run_agent_loop`` itself, interleaved (what
the agent's state keeping costs); and with one subscriber reading every event, against
the events floor (one hand-off per event, as the subscriber's channel needs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from trio_agent import (
    AssistantMessage,
    Context,
    Done,
    LoopConfig,
    Start,
    Text,
    Tool,
    ToolCall,
    UserMessage,
    open_agent,
    open_agent_loop,
    run_agent_loop,
)
from trio_agent._bench._harness import Case, Stopwatch, Timing
from trio_agent._run import MemoryStream
from trio_agent.testing import ScriptedModel, events_for

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from trio_agent import AssistantEvent, ToolContext

SIZES = (20, 200, 1000)


async def _noop(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext | None) -> str:  # noqa: ASYNC124
    return "ok"


NOOP = Tool(
    name="noop",
    description="Does nothing.",
    parameters={"type": "object", "properties": {}},
    execute=_noop,
)


def script(turns: int) -> tuple[list[AssistantEvent], ...]:
    """The replies as event lists: ``turns`` one-call replies, then a final text."""
    replies = [
        AssistantMessage(
            content=(ToolCall(id=f"call-{i}", name="noop", arguments={}),),
            stop_reason="tool_use",
        )
        for i in range(turns)
    ]
    replies.append(AssistantMessage(content=(Text(text="done"),), stop_reason="stop"))
    return tuple(events_for(m) for m in replies)


def events_per_run(replies: Sequence[list[AssistantEvent]]) -> int:
    """Events of a run: start, the prompt's two, per one-call turn 11 (turn start/end,
    message start/end, 3 updates, call start/end, result start/end), for the final
    text turn 7, the end."""
    return 3 + 11 * (len(replies) - 1) + 7 + 1


# --- ours --------------------------------------------------------------------------------


async def _ours(replies: Sequence[list[AssistantEvent]], consumer: bool) -> Timing:
    turns = len(replies) - 1
    model = ScriptedModel(replies, keep_requests=False)
    context = Context(tools=(NOOP,))
    config = LoopConfig(max_steps=len(replies))
    prompts = [UserMessage.text("go")]
    seen = 0
    with Stopwatch() as watch:
        if consumer:
            async with open_agent_loop(prompts, context, model, config) as run:
                async for _ in run.events:
                    seen += 1
            result = run.result
        else:
            result = await run_agent_loop(prompts, context, model, config)
    assert result is not None
    assert result.reason == "stop", result.reason
    assert result.steps == turns + 1
    assert len(result.turns) == turns + 1
    assert seen == (events_per_run(replies) if consumer else 0)
    return watch.timing


def ours_plain(turns: int, replies: Sequence[list[AssistantEvent]]) -> Timing:
    return trio.run(_ours, replies, False)


def ours_consumer(turns: int, replies: Sequence[list[AssistantEvent]]) -> Timing:
    return trio.run(_ours, replies, True)


async def _agent(replies: Sequence[list[AssistantEvent]], subscriber: bool) -> Timing:
    turns = len(replies) - 1
    model = ScriptedModel(replies, keep_requests=False)
    config = LoopConfig(max_steps=len(replies))
    seen = 0

    async def read(events: trio.MemoryReceiveChannel[Any]) -> None:
        nonlocal seen
        async for _ in events:
            seen += 1

    async with open_agent(model, tools=(NOOP,), config=config) as agent:
        if subscriber:
            # As the events floor: timed until the reader has taken the last event and
            # its channel closed (``prompt`` returns once the run handed every event
            # over; leaving ``subscribe`` closes the channel, which ends the reader: the
            # reader outliving the subscription is the point).
            with Stopwatch() as watch:
                async with trio.open_nursery() as nursery:
                    async with agent.subscribe() as events:
                        nursery.start_soon(read, events)  # noqa: ASYNC111
                        result = await agent.prompt("go")
        else:
            with Stopwatch() as watch:
                result = await agent.prompt("go")
        assert agent.state.messages[-1] == result.messages[-1]
    assert result.reason == "stop", result.reason
    assert result.steps == turns + 1
    assert len(result.turns) == turns + 1
    assert seen == (events_per_run(replies) if subscriber else 0), seen
    return watch.timing


def agent_plain(turns: int, replies: Sequence[list[AssistantEvent]]) -> Timing:
    return trio.run(_agent, replies, False)


def agent_subscriber(turns: int, replies: Sequence[list[AssistantEvent]]) -> Timing:
    return trio.run(_agent, replies, True)


# --- the floor ---------------------------------------------------------------------------


async def read_reply(events: Sequence[Any]) -> AssistantMessage:
    async for event in MemoryStream(events):
        if type(event) is Done:
            return event.message
    raise AssertionError("no Done")


async def run_call(tools: dict[str, Any], call: ToolCall, results: list[Any], i: int) -> None:
    results[i] = (call.id, await tools[call.name](call, call.arguments, None))


async def floor_loop(replies: Sequence[Sequence[Any]], tools: dict[str, Any]) -> list[Any]:
    """The bare loop: stream a reply, run its calls in a nursery, repeat."""
    transcript: list[Any] = ["go"]
    for events in replies:
        reply = await read_reply(events)
        transcript.append(reply)
        calls = reply.tool_calls
        if not calls:
            break
        results: list[Any] = [None] * len(calls)
        async with trio.open_nursery() as nursery:
            for i, call in enumerate(calls):
                nursery.start_soon(run_call, tools, call, results, i)
        transcript.extend(results)
    return transcript


async def floor_loop_events(
    replies: Sequence[Sequence[Any]], tools: dict[str, Any], emit: trio.MemorySendChannel[Any]
) -> list[Any]:
    """The bare loop sending as many events as ours does through a channel: run start,
    the prompt, per turn start / message start / each block event / message end / per
    call start and end / per result start and end / turn end, then run end."""
    transcript: list[Any] = ["go"]
    for tag in ("agent_start", "message_start", "message_end"):
        await emit.send((tag,))
    for events in replies:
        await emit.send(("turn_start",))
        await emit.send(("message_start",))
        reply = None
        async for event in MemoryStream(events):
            if type(event) is Done:
                reply = event.message
                break
            if type(event) is not Start:
                await emit.send(("message_update", event))
        assert reply is not None
        await emit.send(("message_end", reply))
        transcript.append(reply)
        calls = reply.tool_calls
        if not calls:
            await emit.send(("turn_end",))
            break
        results: list[Any] = [None] * len(calls)
        async with trio.open_nursery() as nursery:
            for i, call in enumerate(calls):
                nursery.start_soon(run_call_events, tools, call, results, i, emit)
        for result in results:
            await emit.send(("message_start", result))
            await emit.send(("message_end", result))
        await emit.send(("turn_end",))
        transcript.extend(results)
    await emit.send(("agent_end",))
    return transcript


async def run_call_events(
    tools: dict[str, Any],
    call: ToolCall,
    results: list[Any],
    i: int,
    emit: trio.MemorySendChannel[Any],
) -> None:
    await emit.send(("tool_execution_start", call))
    results[i] = (call.id, await tools[call.name](call, call.arguments, None))
    await emit.send(("tool_execution_end", call))


async def _floor_events(replies: Sequence[list[AssistantEvent]]) -> Timing:
    tools = {"noop": _noop}
    send, receive = trio.open_memory_channel[Any](0)
    seen = 0

    async def consume() -> None:
        nonlocal seen
        async for _ in receive:
            seen += 1

    with Stopwatch() as watch:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            with send:
                transcript = await floor_loop_events(replies, tools, send)
    assert len(transcript) == 2 * len(replies)
    assert seen == events_per_run(replies)
    return watch.timing


def floor_events(turns: int, replies: Sequence[list[AssistantEvent]]) -> Timing:
    return trio.run(_floor_events, replies)


async def _floor(replies: Sequence[list[AssistantEvent]]) -> Timing:
    tools = {"noop": _noop}
    with Stopwatch() as watch:
        transcript = await floor_loop(replies, tools)
    assert len(transcript) == 2 * len(replies)
    return watch.timing


def floor(turns: int, replies: Sequence[list[AssistantEvent]]) -> Timing:
    return trio.run(_floor, replies)


def w1_case(name: str, ours: Any, floor_: Any, *, module: str = __name__, **extra: Any) -> Case:
    """A W1 row: ``ours`` against ``floor_`` over the turn script, at W1's sizes (``module``
    is where a fresh process finds the two functions)."""
    return Case(
        workload="W1",
        name=name,
        size_label="T",
        unit="turn",
        sizes=SIZES,
        quick_sizes=(20,),
        ours=ours,
        floor=floor_,
        prepare=script,
        module=module,
        **extra,
    )


CASES = (
    w1_case("no consumer", ours_plain, floor, peer_sizes=(200,)),
    w1_case("consumer", ours_consumer, floor),
    w1_case("consumer vs events floor", ours_consumer, floor_events),
    w1_case("via the Agent", agent_plain, floor),
    w1_case("via the Agent vs run_agent_loop", agent_plain, ours_plain),
    w1_case("via the Agent, one subscriber, vs events floor", agent_subscriber, floor_events),
)
