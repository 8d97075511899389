"""Event delivery whatever stops the run: exactly once to an ``on_event`` sink, a bounded
clean-up after an abort, and ``open_agent_loop`` with a sink and a consumer together."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing

from tests.kit.loop import call, ctx, make_tool, prompt, reply, tool_use
from trio_agent import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    JsonlTranscript,
    LoopConfig,
    MessageEnd,
    MessageStart,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
    check_transcript,
    load_transcript,
    open_agent,
    open_agent_loop,
    run_agent_loop,
)
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from trio_agent import ToolCall, ToolContext

CLEANUP = LoopConfig().cleanup_timeout


def script() -> list[Any]:
    return [tool_use(call("c1"), call("c2")), reply("done")]


class SlowSink:
    """An async sink that keeps the event, then awaits 1 ms."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    async def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)
        await trio.sleep(0.001)


class CancellingJsonlSink:
    """Writes each event to ``transcript``; at the ``k``-th ``MessageEnd`` it cancels
    ``scope`` before the write (``at_once``) or right after it; ``then_sleep`` awaits
    1 ms after each write (a UI, say)."""

    def __init__(
        self,
        transcript: JsonlTranscript,
        scope: trio.CancelScope,
        k: int,
        *,
        at_once: bool = False,
        then_sleep: bool = False,
    ) -> None:
        self.transcript = transcript
        self.scope = scope
        self.k = k
        self.at_once = at_once
        self.then_sleep = then_sleep
        self.events: list[AgentEvent] = []
        self.ends = 0

    async def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)
        if type(event) is MessageEnd:
            self.ends += 1
            if self.ends == self.k and self.at_once:
                self.scope.cancel()
        await self.transcript.write_event(event)
        if type(event) is MessageEnd and self.ends == self.k and not self.at_once:
            self.scope.cancel()  # lands after the write, while the sink still awaits
        if self.then_sleep:
            await trio.sleep(0.001)


async def read_slowly(
    events: trio.MemoryReceiveChannel[AgentEvent], into: list[AgentEvent]
) -> None:
    async for event in events:
        into.append(event)
        await trio.sleep(0.1)  # the loop waits in `send` when a deadline fires


def assert_exactly_once(events: list[AgentEvent]) -> None:
    """No event delivered twice; the closing events present; MessageEnds = AgentEnd's."""
    assert len({id(e) for e in events}) == len(events), [e.type for e in events]
    assert [type(e) for e in events].count(AgentStart) == 1
    assert [type(e) for e in events].count(AgentEnd) == 1
    assert type(events[-1]) is AgentEnd
    end = events[-1]
    assert isinstance(end, AgentEnd)
    assert tuple(e.message for e in events if type(e) is MessageEnd) == end.messages
    starts = [e for e in events if type(e) is TurnStart]
    assert len(starts) == len({e.index for e in starts})
    assert len(starts) == sum(type(e) is TurnEnd for e in events)


# --- exactly once, whatever cancels the run -----------------------------------------------


async def test_an_async_sink_gets_each_event_once_under_an_outer_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A sink call that a cancel interrupts counts as delivered: it is never made again
    in the clean-up (which used to deliver AgentStart three times at deadline 0)."""
    tool = make_tool("probe")
    for tenths_of_ms in range(0, 200, 3):
        sink = SlowSink()
        with trio.fail_after(60):
            with trio.move_on_after(tenths_of_ms / 10_000) as scope:
                await run_agent_loop(prompt(), ctx(tool), ScriptedModel(script()), on_event=sink)
        assert_exactly_once(sink.events)
        types = [type(e) for e in sink.events]
        if scope.cancelled_caught:
            assert sink.events[-1].reason == "aborted"  # type: ignore[union-attr]
        if tenths_of_ms == 0:
            # Cancelled at the first event: AgentStart counts as delivered, the run
            # ends at once (the prompt is undelivered), AgentEnd still reaches the sink.
            assert types == [AgentStart, AgentEnd]
        else:
            assert types.count(MessageStart) == types.count(MessageEnd)
        check_transcript(sink.events[-1].messages)  # type: ignore[union-attr]


async def test_a_jsonl_sink_never_writes_a_line_twice_under_an_outer_deadline(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """A sink that writes the message to a ``JsonlTranscript``, then awaits 1 ms (say, a
    UI): a cancel landing after the write interrupts the call, which counts as
    delivered. Redoing it (as the clean-up used to) wrote the line twice.

    Right after the k-th message is written, the caller's scope is cancelled, so the
    sink's 1 ms wait is interrupted, for each k (``cleanup_timeout`` is infinite here, so
    the clock cannot jump through the clean-up).
    """
    tool = make_tool("probe")
    config = LoopConfig(cleanup_timeout=math.inf)
    for k in range(1, 6):
        path = tmp_path / f"run{k}.jsonl"
        async with JsonlTranscript(path, fsync=True) as transcript:
            with trio.CancelScope() as scope:
                sink = CancellingJsonlSink(transcript, scope, k, then_sleep=True)
                await run_agent_loop(
                    prompt(), ctx(tool), ScriptedModel(script()), config, on_event=sink
                )
        seen = sink.events
        lines = path.read_text(encoding="utf-8").splitlines()[1:]
        assert len(lines) == len(set(lines)), [line[:80] for line in lines]
        assert_exactly_once(seen)
        assert scope.cancelled_caught, k
        end = seen[-1]
        assert isinstance(end, AgentEnd)
        assert end.reason == "aborted"
        assert load_transcript(path).messages == end.messages


async def test_a_jsonl_sink_cancelled_before_its_write_still_writes_the_line(
    tmp_path: Path,
) -> None:
    """The call that a cancel interrupts counts as delivered, so the transcript writes a
    message it was handed even when the cancel is already there: no line is lost.
    (Real clock: an autojump clock would jump through the clean-up's bound while the
    worker thread writes.)"""
    tool = make_tool("probe")
    for k in range(1, 6):
        path = tmp_path / f"run{k}.jsonl"
        async with JsonlTranscript(path, fsync=False) as transcript:
            with trio.fail_after(30), trio.CancelScope() as scope:
                sink = CancellingJsonlSink(transcript, scope, k, at_once=True)
                await run_agent_loop(prompt(), ctx(tool), ScriptedModel(script()), on_event=sink)
        seen = sink.events
        assert scope.cancelled_caught, k
        assert_exactly_once(seen)
        end = seen[-1]
        assert isinstance(end, AgentEnd)
        assert load_transcript(path).messages == end.messages


async def test_a_cancelled_channel_send_is_retried_and_the_consumer_gets_every_event(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A ``send`` that a cancel interrupted delivered nothing: the clean-up sends it. The
    consumer reads a clone of the channel in a task of its own, outside the deadline."""
    tool = make_tool("probe")
    config = LoopConfig(cleanup_timeout=100)
    for deadline in (0.0, 0.05, 0.15, 0.25, 0.45, 0.75):
        received: list[AgentEvent] = []
        with trio.fail_after(600):
            async with trio.open_nursery() as nursery:
                with trio.move_on_after(deadline):
                    async with open_agent_loop(
                        prompt(), ctx(tool), ScriptedModel(script()), config
                    ) as run:
                        # A clone outlives the block (which closes run.events).
                        nursery.start_soon(read_slowly, run.events.clone(), received)  # noqa: ASYNC111
                        await trio.sleep_forever()
        assert_exactly_once(received)
        assert run.result is not None
        assert tuple(e.message for e in received if type(e) is MessageEnd) == run.result.messages


# --- abort() ends the run while the consumer takes nothing --------------------------------


def gated_tool(gate: trio.Event) -> Any:
    async def execute(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
        await gate.wait()
        return "ok"

    return make_tool("probe", execute)


async def test_abort_ends_an_open_agent_loop_whose_consumer_stopped_reading(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel(script())
    tool = gated_tool(trio.Event())
    with trio.fail_after(600):
        async with open_agent_loop(prompt(), ctx(tool), model) as run:
            async for event in run.events:
                if type(event) is ToolExecutionStart:
                    break
            start = trio.current_time()
            run.abort("stop")
            # The consumer reads nothing more: the run must end on its own, within
            # cleanup_timeout, with its transcript paired.
            await trio.sleep(CLEANUP + 0.01)
            with pytest.raises(trio.EndOfChannel):
                run.events.receive_nowait()
            assert run.result is not None
            assert run.result.reason == "aborted"
            check_transcript(run.result.transcript)
        assert trio.current_time() - start <= CLEANUP + 0.02


async def test_abort_bounds_the_closing_events_of_a_run_that_has_already_ended(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The run ended (stop) and waits to hand over its last events: an abort bounds that."""
    model = ScriptedModel([reply("hi")])
    with trio.fail_after(600):
        async with open_agent_loop(prompt(), ctx(), model) as run:
            async for event in run.events:
                if type(event) is TurnEnd:
                    break
            # The run has ended (stop) and waits to hand over AgentEnd.
            await trio.testing.wait_all_tasks_blocked()
            assert run.result is not None
            run.abort()
            await trio.sleep(CLEANUP + 0.01)
            with pytest.raises(trio.EndOfChannel):
                run.events.receive_nowait()
            assert run.result is not None
            assert run.result.reason == "stop"


async def test_abort_ends_an_open_agent_loop_whose_sink_is_stuck(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An ``on_event`` sink that never returns: the abort cancels it (that call counts as
    delivered), and the closing events' calls are cut at ``cleanup_timeout``."""
    calls: list[AgentEvent] = []

    async def stuck(event: AgentEvent) -> None:
        calls.append(event)
        first_start = type(event) is ToolExecutionStart and event.call_id == "c1"
        if first_start or type(event) is AgentEnd:
            await trio.sleep_forever()

    model = ScriptedModel(script())
    tool = gated_tool(trio.Event())
    received: list[AgentEvent] = []
    with trio.fail_after(600):
        async with open_agent_loop(prompt(), ctx(tool), model, on_event=stuck) as run:
            async for event in run.events:
                received.append(event)
                if type(event) is MessageEnd and event.message.role == "assistant":
                    break
            await trio.testing.wait_all_tasks_blocked()
            start = trio.current_time()
            run.abort("stop")
            # The consumer stays, reading: it gets the closing events the sink let through.
            async for event in run.events:
                received.append(event)
        assert trio.current_time() - start <= CLEANUP + 0.01
    assert run.result is not None
    assert run.result.reason == "aborted"
    check_transcript(run.result.transcript)
    assert_exactly_once(calls)
    # Each event goes to the sink, then to the channel: AgentEnd, on which the sink hung
    # until the bound cut it, never reached the consumer; everything before it did.
    assert [type(e) for e in received] == [type(e) for e in calls[:-1]]


async def test_agent_abort_ends_the_run_while_a_subscriber_takes_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tool = gated_tool(trio.Event())
    model = ScriptedModel(script())
    with trio.fail_after(600):
        async with open_agent(model, tools=[tool]) as agent, trio.open_nursery() as nursery:
            async with agent.subscribe() as events:
                nursery.start_soon(agent.prompt, "go")
                async for event in events:
                    if type(event) is ToolExecutionStart:
                        break
                # From here on the subscriber takes nothing (it stays subscribed).
                start = trio.current_time()
                agent.abort("stop")
                with trio.move_on_after(CLEANUP + 0.01):
                    await agent.wait_for_idle()
                assert not agent.state.is_running
                assert trio.current_time() - start <= CLEANUP + 0.01
                check_transcript(agent.state.messages)
                assert agent.state.messages[-1].role == "tool_result"


# --- open_agent_loop with a sink and a consumer -------------------------------------------


async def test_open_agent_loop_feeds_a_jsonl_sink_and_a_consumer(tmp_path: Path) -> None:
    """Each event goes to ``on_event`` first, then to the channel: the consumer reading a
    ``MessageEnd`` finds the message already written."""
    path = tmp_path / "run.jsonl"
    tool = make_tool("probe")
    received: list[AgentEvent] = []
    lines_at_end: list[int] = []
    with trio.fail_after(30):
        async with JsonlTranscript(path, fsync=False) as transcript:
            async with open_agent_loop(
                prompt(), ctx(tool), ScriptedModel(script()), on_event=transcript
            ) as run:
                async for event in run.events:
                    received.append(event)
                    if type(event) is MessageEnd:
                        lines_at_end.append(len(path.read_text(encoding="utf-8").splitlines()))
    assert run.result is not None
    assert_exactly_once(received)
    messages = tuple(e.message for e in received if type(e) is MessageEnd)
    assert messages == run.result.messages
    assert load_transcript(path).messages == messages
    # The header line, then one line per message already written when its event arrived.
    assert lines_at_end == [n + 2 for n in range(len(messages))]
    header = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert isinstance(header, dict)


async def test_open_agent_loop_sink_failure_ends_the_run_and_the_consumer_sees_the_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from trio_agent import AgentRunError

    def sink(event: AgentEvent) -> None:
        if type(event) is TurnStart:
            raise ValueError("sink broke")

    received: list[AgentEvent] = []
    with pytest.raises(AgentRunError) as info, trio.fail_after(60):
        async with open_agent_loop(
            prompt(), ctx(make_tool("probe")), ScriptedModel(script()), on_event=sink
        ) as run:
            async for event in run.events:
                received.append(event)
    assert isinstance(info.value.__cause__, ValueError)
    assert type(received[-1]) is AgentEnd
    assert received[-1].reason == "error"
    check_transcript(info.value.result.transcript)
