"""The Agent's queues (docs/guarantees.md, "Exactly once"): exactly once, FIFO, put back
when a run ends early, late arrivals, interrupting steers, and the thread-safe variants.

Each race is placed deterministically: tools wait on a ``trio.Event``, hooks wait on a
gate, ScriptedModel pauses at a given event, and ``wait_all_tasks_blocked`` says when
the run is parked where the test wants it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kit.agent import Probe, collect, guarded, probe_use, texts, user_texts_of
from tests.kit.loop import reply, results_of
from trio_agent import (
    AgentEnd,
    AgentEvent,
    AgentRunResult,
    AssistantMessage,
    LoopConfig,
    MessageEnd,
    Tool,
    ToolExecutionEnd,
    TurnEnd,
    UserMessage,
    check_transcript,
    open_agent,
)
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from trio_agent import Agent


async def prompt_into(agent: Agent, text: str, out: list[AgentRunResult]) -> None:
    out.append(await agent.prompt(text))


# --- exactly once, in FIFO order -----------------------------------------------------------


@guarded
async def test_one_at_a_time_delivers_each_message_once_in_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    model = ScriptedModel([probe_use("c1", wait=True), reply(), reply(), reply(), reply()])
    async with open_agent(model, tools=[probe.tool]) as agent, trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "go")
        await probe.started["c1"].wait()
        agent.follow_up("f1")
        agent.steer("s1")
        agent.follow_up("f2")
        agent.steer(UserMessage.text("s2"))
        assert texts(agent.queued_steering) == ["s1", "s2"]
        assert texts(agent.queued_follow_ups) == ["f1", "f2"]
        assert "s1" not in texts(agent.state.messages)  # queued, not in the transcript
        probe.gates["c1"].set()
    # Steering one per turn after the batch, then follow-ups one per turn at the end.
    assert [user_texts_of(model, i)[-1] for i in range(5)] == ["go", "s1", "s2", "f1", "f2"]
    assert texts(agent.state.messages) == ["go", "s1", "s2", "f1", "f2"]
    assert not agent.has_queued_messages


async def test_all_mode_delivers_the_whole_queue_in_one_poll() -> None:
    probe = Probe()
    model = ScriptedModel([probe_use("c1", wait=True), reply(), reply()])
    async with (
        open_agent(model, tools=[probe.tool], steering_mode="all", follow_up_mode="all") as agent,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(agent.prompt, "go")
        await probe.started["c1"].wait()
        for name in ("s1", "s2", "s3"):
            agent.steer(name)
        agent.follow_up("f1")
        agent.follow_up("f2")
        probe.gates["c1"].set()
    assert len(model.requests) == 3
    assert user_texts_of(model, 1)[-3:] == ["s1", "s2", "s3"]
    assert user_texts_of(model, 2)[-2:] == ["f1", "f2"]
    assert texts(agent.state.messages) == ["go", "s1", "s2", "s3", "f1", "f2"]


@guarded
async def test_the_queue_mode_can_change_between_polls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    model = ScriptedModel([probe_use("c1", wait=True), reply(), reply()])
    async with open_agent(model, tools=[probe.tool]) as agent, trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "go")
        await probe.started["c1"].wait()
        for name in ("s1", "s2", "s3"):
            agent.steer(name)
        agent.steering_mode = "all"
        probe.gates["c1"].set()
    assert len(model.requests) == 2
    assert user_texts_of(model, 1)[-3:] == ["s1", "s2", "s3"]


# --- a run that ends early puts taken messages back ----------------------------------------


@pytest.mark.parametrize("how", ["abort", "cancel", "max_steps"])
@guarded
async def test_taken_but_undelivered_messages_go_back_to_the_front(
    autojump_clock: trio.testing.MockClock, how: str
) -> None:
    """The steering poll after the batch has taken s1; the run ends before s1 is sent."""
    probe = Probe()
    entered, gate = trio.Event(), trio.Event()

    async def prepare_next_turn(ctx: Any) -> None:
        entered.set()
        await gate.wait()

    config = LoopConfig(
        prepare_next_turn=prepare_next_turn, max_steps=1 if how == "max_steps" else 32
    )
    model = ScriptedModel([probe_use("c1", wait=True)])
    results: list[AgentRunResult] = []
    async with open_agent(model, tools=[probe.tool], config=config) as agent:
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def run() -> None:
                with scope:
                    results.append(await agent.prompt("go"))

            nursery.start_soon(run)
            await probe.started["c1"].wait()
            agent.steer("s1")
            agent.steer("s2")
            agent.follow_up("f1")
            probe.gates["c1"].set()
            if how != "max_steps":
                await entered.wait()
                # s1 is in the loop's hands (pending), s2 still queued.
                assert texts(agent.queued_steering) == ["s2"]
                if how == "abort":
                    agent.abort()
                else:
                    scope.cancel()
        if how == "cancel":
            assert scope.cancelled_caught
        else:
            assert results[0].reason == ("aborted" if how == "abort" else "max_steps")
            assert texts(results[0].undelivered) == ["s1"]
        assert texts(agent.queued_steering) == ["s1", "s2"]
        assert texts(agent.queued_follow_ups) == ["f1"]
        assert texts(agent.state.messages) == ["go"]
        check_transcript(agent.state.messages)

        # The next prompt delivers them, in order, exactly once.
        gate.set()
        agent.config = LoopConfig(prepare_next_turn=prepare_next_turn)
        model.add(reply(), reply(), reply())
        await agent.prompt("x")
        assert user_texts_of(model, 1)[-2:] == ["s1", "x"]
        assert user_texts_of(model, 2)[-1] == "s2"
        assert user_texts_of(model, 3)[-1] == "f1"
        assert texts(agent.state.messages) == ["go", "s1", "x", "s2", "f1"]
        assert not agent.has_queued_messages


@guarded
async def test_an_abort_before_the_first_turn_puts_the_taken_steering_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([reply(), reply()])
    async with open_agent(model) as agent, trio.open_nursery() as nursery:
        agent.steer("s1")
        async with agent.subscribe() as events:

            async def abort_then_read() -> None:
                # The run waits to hand AgentStart to us: its first scheduling point,
                # after prompt() took s1 from the queue, before the loop added it.
                await trio.testing.wait_all_tasks_blocked()
                agent.abort("too early")
                seen.extend([event.type async for event in events])

            seen: list[str] = []
            nursery.start_soon(abort_then_read)
            result = await agent.prompt("x")
        # prompt() sends the queued steering ahead of "x"; neither entered the
        # transcript, so the loop reports both in `undelivered`, and the agent puts s1
        # (taken from its queue) back.
        assert result.reason == "aborted"
        assert result.messages == ()
        assert texts(result.undelivered) == ["s1", "x"]
        assert texts(agent.queued_steering) == ["s1"]
        await agent.prompt("y")
        assert user_texts_of(model, 0) == ["s1", "y"]
    # The subscriber still got the run's opening and closing events.
    assert seen == ["agent_start", "agent_end"]


# --- a message queued after the run's last poll --------------------------------------------


@guarded
async def test_a_message_queued_after_the_last_poll_is_delivered_by_the_next_prompt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([reply("one"), reply("two"), reply("three")])
    results: list[AgentRunResult] = []
    rest: list[AgentEvent] = []
    async with open_agent(model) as agent:
        async with agent.subscribe() as events, trio.open_nursery() as nursery:
            nursery.start_soon(prompt_into, agent, "one", results)
            async for event in events:
                if type(event) is MessageEnd and event.message.role == "assistant":
                    break
            # We stop reading before TurnEnd: the agent waits to hand it to us, and the
            # loop, past its last steering and follow-up polls, waits to hand over
            # AgentEnd. The run is still active.
            await trio.testing.wait_all_tasks_blocked()
            assert agent.state.is_running
            agent.steer("late steer")
            agent.follow_up("late follow-up")
            nursery.start_soon(collect, events, rest)
            await agent.wait_for_idle()
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        assert [type(e) for e in rest] == [TurnEnd, AgentEnd]
        # Not lost, not delivered twice: still queued, in order.
        assert results[0].reason == "stop"
        assert texts(results[0].messages) == ["one"]
        assert texts(agent.queued_steering) == ["late steer"]
        assert texts(agent.queued_follow_ups) == ["late follow-up"]
        # The next prompt sends the late steering first, ahead of its own message, and
        # the late follow-up when the model would otherwise stop.
        await agent.prompt("two")
        assert user_texts_of(model, 1) == ["one", "late steer", "two"]
        assert user_texts_of(model, 2) == ["one", "late steer", "two", "late follow-up"]
        assert not agent.has_queued_messages


@guarded
async def test_continue_answers_late_messages_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([reply("one"), reply("two"), reply("three")])
    async with open_agent(model) as agent:
        await agent.prompt("one")
        agent.follow_up("f1")
        agent.steer("s1")
        while agent.has_queued_messages:
            await agent.continue_()
        assert texts(agent.state.messages) == ["one", "s1", "f1"]
        assert len(model.requests) == 3


# --- interrupting steers -------------------------------------------------------------------


@guarded
async def test_interrupting_steer_during_a_batch(autojump_clock: trio.testing.MockClock) -> None:
    probe = Probe()
    model = ScriptedModel([probe_use("c1", "c2", wait=True), reply("after"), reply("later")])
    seen: list[AgentEvent] = []
    async with open_agent(model, tools=[probe.tool]) as agent:
        async with agent.subscribe() as events, trio.open_nursery() as nursery:
            nursery.start_soon(collect, events, seen)
            results: list[AgentRunResult] = []
            nursery.start_soon(prompt_into, agent, "go", results)
            await probe.started["c2"].wait()
            probe.gates["c1"].set()
            await trio.testing.wait_all_tasks_blocked()
            assert probe.finished == ["c1"]
            agent.steer("queued before")
            agent.steer("stop that", interrupt=True)
            await agent.wait_for_idle()
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    assert results[0].reason == "stop"
    by_id = results_of(agent.state.messages)
    assert by_id["c1"].text == "ok c1"  # finished: keeps its result
    assert by_id["c2"].text == "Tool call skipped: interrupted by user."
    assert by_id["c2"].is_error
    outcomes = {e.call_id: e.outcome for e in seen if type(e) is ToolExecutionEnd}
    assert outcomes == {"c1": "ok", "c2": "skipped"}
    # Delivered at once, ahead of what was already queued; the run went on.
    assert user_texts_of(model, 1) == ["go", "stop that"]
    assert texts(agent.state.messages) == ["go", "stop that", "queued before"]
    check_transcript(agent.state.messages)


@guarded
async def test_interrupting_steer_during_a_stream(autojump_clock: trio.testing.MockClock) -> None:
    probe = Probe()
    model = ScriptedModel([probe_use("c1", text="let me look"), reply("ok")])
    # Request 0 streams Start, TextStart, TextDelta, TextEnd, ToolCallStart,
    # ToolCallDelta, ToolCallEnd, Done: pause before Done, the call complete.
    pause = model.pause_at(0, 7)
    async with open_agent(model, tools=[probe.tool]) as agent, trio.open_nursery() as nursery:
        results: list[AgentRunResult] = []
        nursery.start_soon(prompt_into, agent, "go", results)
        await pause.reached.wait()
        agent.steer("wait, no", interrupt=True)
    assert results[0].reason == "stop"
    cut = agent.state.messages[1]
    assert type(cut) is AssistantMessage
    assert cut.stop_reason == "aborted"
    assert cut.text == "let me look"
    assert [c.id for c in cut.tool_calls] == ["c1"]
    assert results_of(agent.state.messages)["c1"].text == "Tool call skipped: interrupted by user."
    assert "c1" not in probe.started  # the tool never ran
    assert user_texts_of(model, 1) == ["go", "wait, no"]
    assert len(model.requests) == 2
    check_transcript(agent.state.messages)


@guarded
async def test_an_interrupt_before_the_request_goes_out_joins_that_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Neither a batch nor a reply runs when the steer arrives (the request is being
    prepared): the loop takes the steering into that request before sending it, so no
    reply is cut and nothing is wasted."""
    probe = Probe()
    entered, gate = trio.Event(), trio.Event()

    async def transform(messages: Any) -> Any:
        if not entered.is_set():
            entered.set()
            await gate.wait()
        return messages

    model = ScriptedModel([probe_use("c1", text="plan A"), reply("plan B")])
    config = LoopConfig(transform_context=transform)
    async with (
        open_agent(model, tools=[probe.tool], config=config) as agent,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(agent.prompt, "go")
        await entered.wait()
        agent.steer("new plan", interrupt=True)
        gate.set()
    assert user_texts_of(model, 0) == ["go", "new plan"]
    first = agent.state.messages[2]
    assert type(first) is AssistantMessage
    assert first.stop_reason == "tool_use"
    assert "c1" in probe.started
    assert len(model.requests) == 2
    assert type(agent.state.messages[-1]) is AssistantMessage
    assert agent.state.messages[-1].stop_reason == "stop"
    check_transcript(agent.state.messages)


@guarded
async def test_an_interrupt_delivered_by_the_poll_does_not_cut_the_next_reply(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The steer arrives after the batch, before the poll: the poll delivers it, and the
    reply to it is not interrupted."""
    probe = Probe()
    entered, gate = trio.Event(), trio.Event()

    async def should_stop(ctx: Any) -> bool:
        if not entered.is_set():
            entered.set()
            await gate.wait()
        return False

    model = ScriptedModel([probe_use("c1"), reply("answer")])
    config = LoopConfig(should_stop_after_turn=should_stop)
    results: list[AgentRunResult] = []
    async with (
        open_agent(model, tools=[probe.tool], config=config) as agent,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(prompt_into, agent, "go", results)
        await entered.wait()
        agent.steer("note", interrupt=True)
        gate.set()
    assert results[0].reason == "stop"
    assert results_of(agent.state.messages)["c1"].text == "ok c1"
    assert user_texts_of(model, 1)[-1] == "note"
    last = agent.state.messages[-1]
    assert type(last) is AssistantMessage
    assert (last.stop_reason, last.text) == ("stop", "answer")


# --- from other threads (real clock: a thread is real I/O for trio) -------------------------


async def test_steer_and_follow_up_from_a_thread() -> None:
    probe = Probe()
    model = ScriptedModel([probe_use("c1", wait=True), reply(), reply()])
    with trio.fail_after(10):
        async with open_agent(model, tools=[probe.tool]) as agent, trio.open_nursery() as nursery:
            nursery.start_soon(agent.prompt, "go")
            await probe.started["c1"].wait()

            def elsewhere() -> None:
                agent.follow_up_from_thread("f1")
                agent.steer_from_thread("s1")
                agent.steer_from_thread(UserMessage.text("s2"))

            await trio.to_thread.run_sync(elsewhere)
            # The calls returned once the messages were queued.
            assert texts(agent.queued_steering) == ["s1", "s2"]
            assert texts(agent.queued_follow_ups) == ["f1"]
            agent.steering_mode = "all"
            probe.gates["c1"].set()
    assert texts(agent.state.messages) == ["go", "s1", "s2", "f1"]


async def test_abort_from_a_thread() -> None:
    probe = Probe()
    model = ScriptedModel([probe_use("c1", wait=True)])
    results: list[AgentRunResult] = []
    with trio.fail_after(10):
        async with open_agent(model, tools=[probe.tool]) as agent, trio.open_nursery() as nursery:
            nursery.start_soon(prompt_into, agent, "go", results)
            await probe.started["c1"].wait()
            await trio.to_thread.run_sync(agent.abort_from_thread, "stopped from a thread")
    assert results[0].reason == "aborted"
    assert (
        results_of(agent.state.messages)["c1"].text == "Tool call aborted: stopped from a thread."
    )


async def test_interrupting_steer_from_a_thread() -> None:
    probe = Probe()
    model = ScriptedModel([probe_use("c1", wait=True), reply("ok")])
    with trio.fail_after(10):
        async with open_agent(model, tools=[probe.tool]) as agent, trio.open_nursery() as nursery:
            nursery.start_soon(agent.prompt, "go")
            await probe.started["c1"].wait()

            def elsewhere() -> None:
                agent.steer_from_thread("stop", interrupt=True)

            await trio.to_thread.run_sync(elsewhere)
    assert results_of(agent.state.messages)["c1"].text == "Tool call skipped: interrupted by user."
    assert texts(agent.state.messages) == ["go", "stop"]


# --- the guarantee under random timing -------------------------------------------------------

Arrival = tuple[int, Literal["steer", "follow_up"]]
fixture_ok = settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=200, deadline=None
)


@fixture_ok
@given(
    arrivals=st.lists(
        st.tuples(st.integers(0, 40), st.sampled_from(["steer", "follow_up"])), max_size=8
    ),
    abort_at=st.none() | st.integers(0, 40),
    steering_mode=st.sampled_from(["one_at_a_time", "all"]),
    follow_up_mode=st.sampled_from(["one_at_a_time", "all"]),
    max_steps=st.integers(1, 6),
)
async def test_every_queued_message_is_delivered_once_in_fifo_order(
    autojump_clock: trio.testing.MockClock,
    arrivals: list[Arrival],
    abort_at: int | None,
    steering_mode: Any,
    follow_up_mode: Any,
    max_steps: int,
) -> None:
    """Messages arrive at random times (in steps of 0.1 s) while tools sleep 0.3 s; the run
    may be aborted or hit max_steps. Then continue_() until nothing is queued: every
    message is delivered exactly once, and each queue's messages in the order queued."""

    async def slow(call: Any, args: Any, ctx: Any) -> str:
        await trio.sleep(0.3)
        return "slept"

    tool = Tool(name="probe", description="sleeps", parameters={}, execute=slow)
    # Alternate: a call, then a plain answer, so runs have several turns and end often.
    model = ScriptedModel([probe_use(f"c{i}") if i % 2 == 0 else reply() for i in range(200)])
    config = LoopConfig(max_steps=max_steps)
    queued: dict[str, list[str]] = {"steer": [], "follow_up": []}  # in the order queued
    with trio.fail_after(600):
        async with open_agent(
            model,
            tools=[tool],
            config=config,
            steering_mode=steering_mode,
            follow_up_mode=follow_up_mode,
        ) as agent:
            async with trio.open_nursery() as nursery:
                for i, (at, kind) in enumerate(arrivals):
                    nursery.start_soon(_arrive, agent, at / 10, kind, f"{kind}-{i}", queued)
                if abort_at is not None:
                    nursery.start_soon(_abort, agent, abort_at / 10)
                await agent.prompt("go")
            for _ in range(100):
                if not agent.has_queued_messages:
                    break
                if agent.state.messages:
                    await agent.continue_()
                else:  # an abort before the first turn: nothing to continue from
                    await agent.prompt("go")
            assert not agent.has_queued_messages
    check_transcript(agent.state.messages)
    delivered = texts(agent.state.messages)
    # The prompt itself is lost only to an abort that comes before its first turn (and
    # is then sent again above).
    assert delivered.count("go") == 1 or abort_at is not None
    delivered = [d for d in delivered if d != "go"]
    assert sorted(delivered) == sorted(queued["steer"] + queued["follow_up"])
    assert [d for d in delivered if d.startswith("steer")] == queued["steer"]
    assert [d for d in delivered if d.startswith("follow_up")] == queued["follow_up"]


async def _arrive(
    agent: Agent, delay: float, kind: str, name: str, queued: dict[str, list[str]]
) -> None:
    await trio.sleep(delay)
    queued[kind].append(name)
    if kind == "steer":
        agent.steer(name)
    else:
        agent.follow_up(name)


async def _abort(agent: Agent, delay: float) -> None:
    await trio.sleep(delay)
    agent.abort()
