"""The Agent: state, busy errors, continue_, subscribers, failures (what subscribers are
promised: docs/guarantees.md, "Exactly once").

The queue guarantees (exactly once, FIFO, put back, interrupts, threads) are in
test_queues.py; the probe tool and the builders both use are in tests/kit/agent.py.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing

from tests.kit.agent import Probe, collect, guarded, probe_use, texts, user_texts_of
from tests.kit.loop import reply
from trio_agent import (
    AgentBusyError,
    AgentEnd,
    AgentEvent,
    AgentRunError,
    AgentStart,
    AgentState,
    AgentUsageError,
    AssistantMessage,
    Context,
    LoopConfig,
    Message,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    NextTurn,
    Text,
    ToolResultMessage,
    TurnContext,
    TurnEnd,
    TurnStart,
    UserMessage,
    check_transcript,
    open_agent,
)
from trio_agent.testing import ScriptedModel

# --- default state, prompt, state while running ------------------------------------------


@guarded
async def test_default_state(autojump_clock: trio.testing.MockClock) -> None:
    async with open_agent(ScriptedModel()) as agent:
        assert agent.state == AgentState()
        assert agent.state.messages == ()
        assert agent.state.is_running is False
        assert agent.state.streaming_message is None
        assert agent.state.pending_tool_calls == frozenset()
        assert agent.state.error_message is None
        assert agent.steering_mode == "one_at_a_time"
        assert agent.follow_up_mode == "one_at_a_time"
        assert not agent.has_queued_messages
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            agent.state.is_running = True  # type: ignore[misc]


@guarded
async def test_prompt_runs_and_the_state_keeps_the_transcript(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    model = ScriptedModel([probe_use("c1"), reply("hello")])
    async with open_agent(model, tools=[probe.tool], system_prompt="be brief") as agent:
        result = await agent.prompt("hi")
        assert result.reason == "stop"
        assert [m.role for m in result.messages] == [
            "user",
            "assistant",
            "tool_result",
            "assistant",
        ]
        assert agent.state.messages == result.transcript
        assert agent.state.is_running is False
        assert model.requests[0].system_prompt == "be brief"
        assert [t.name for t in model.requests[0].tools] == ["probe"]
        # The next prompt continues the same transcript.
        model.add(reply("again"))
        second = await agent.prompt(UserMessage.text("more"))
        assert texts(model.requests[2].messages) == ["hi", "more"]
        assert agent.state.messages == result.transcript + second.messages


@guarded
async def test_prompt_accepts_several_messages_and_refuses_none(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([reply()])
    async with open_agent(model) as agent:
        await agent.prompt([UserMessage.text("a"), UserMessage.text("b")])
        assert user_texts_of(model, 0) == ["a", "b"]
        with pytest.raises(AgentUsageError, match="continue_"):
            await agent.prompt([])


@guarded
async def test_initial_messages_and_settable_fields(autojump_clock: trio.testing.MockClock) -> None:
    history = (UserMessage.text("old"), reply("old answer"))
    model = ScriptedModel([reply()])
    async with open_agent(model, messages=history) as agent:
        assert agent.state.messages == history
        agent.system_prompt = "new prompt"
        await agent.prompt("new")
        assert model.requests[0].system_prompt == "new prompt"
        assert user_texts_of(model, 0) == ["old", "new"]


@guarded
async def test_state_while_streaming_and_running_tools(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    model = ScriptedModel([probe_use("c1", wait=True, text="let me look"), reply()], chunk_size=3)
    # Events of request 0: Start, TextStart, TextDelta("let"), TextDelta(" me"), ...
    pause = model.pause_at(0, 4)
    async with open_agent(model, tools=[probe.tool]) as agent, trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "look")
        await pause.reached.wait()
        await trio.testing.wait_all_tasks_blocked()
        state = agent.state
        assert state.is_running
        assert state.streaming_message is not None
        assert state.streaming_message.text == "let me"
        assert [m.role for m in state.messages] == ["user"]  # only finished messages
        pause.release()
        await probe.started["c1"].wait()
        await trio.testing.wait_all_tasks_blocked()
        state = agent.state
        assert state.streaming_message is None
        assert state.pending_tool_calls == frozenset({"c1"})
        assert [m.role for m in state.messages] == ["user", "assistant"]
        probe.gates["c1"].set()
        await agent.wait_for_idle()
        assert agent.state.pending_tool_calls == frozenset()
        assert agent.state.is_running is False


@guarded
async def test_the_state_ends_with_the_runs_transcript_when_the_context_is_swapped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """prepare_next_turn may replace the context (compaction): the events then no longer
    add up to the transcript, and the run's own transcript is what the state keeps."""
    summary = UserMessage.text("summary of earlier work")

    def compact(ctx: TurnContext) -> NextTurn:
        return NextTurn(context=Context(messages=(summary, *ctx.context.messages[-2:])))

    probe = Probe()
    model = ScriptedModel([probe_use("c1"), reply()])
    history = (UserMessage.text("old"), reply("old answer"))
    config = LoopConfig(prepare_next_turn=compact)
    async with open_agent(model, tools=[probe.tool], config=config, messages=history) as agent:
        result = await agent.prompt("new")
        assert agent.state.messages == result.transcript
        assert texts(agent.state.messages) == ["summary of earlier work"]
        assert [m.role for m in agent.state.messages] == [
            "user", "assistant", "tool_result", "assistant"
        ]  # fmt: skip


# --- busy errors, abort, reset -------------------------------------------------------------


@guarded
async def test_prompt_continue_reset_while_running_raise_busy(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    model = ScriptedModel([probe_use("c1", wait=True), reply()])
    async with open_agent(model, tools=[probe.tool]) as agent, trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "first")
        await probe.started["c1"].wait()
        with pytest.raises(AgentBusyError, match=r"steer\(\) or follow_up\(\)"):
            await agent.prompt("second")
        with pytest.raises(AgentBusyError, match=r"wait_for_idle\(\) before continue_\(\)"):
            await agent.continue_()
        with pytest.raises(AgentBusyError, match=r"abort\(\)"):
            agent.reset()
        assert agent.state.is_running
        probe.gates["c1"].set()
        await agent.wait_for_idle()
    assert texts(agent.state.messages) == ["first"]


@guarded
async def test_abort_when_idle_is_safe(autojump_clock: trio.testing.MockClock) -> None:
    async with open_agent(ScriptedModel([reply()])) as agent:
        agent.abort()
        agent.abort("again")
        await agent.wait_for_idle()
        result = await agent.prompt("hi")  # an earlier abort does not leak into a run
        assert result.reason == "stop"


@guarded
async def test_abort_during_a_tool_keeps_the_transcript_paired(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    model = ScriptedModel([probe_use("c1", "c2", wait=True)])
    async with open_agent(model, tools=[probe.tool]) as agent, trio.open_nursery() as nursery:

        async def prompt() -> None:
            result = await agent.prompt("go")
            assert result.reason == "aborted"

        nursery.start_soon(prompt)
        await probe.started["c2"].wait()
        probe.gates["c1"].set()
        await trio.testing.wait_all_tasks_blocked()
        assert probe.finished == ["c1"]
        agent.abort("user pressed stop")
    messages = agent.state.messages
    check_transcript(messages)
    results = [m for m in messages if type(m) is ToolResultMessage]
    assert [r.text for r in results] == ["ok c1", "Tool call aborted: user pressed stop."]
    assert agent.state.error_message is None
    assert agent.state.is_running is False


@guarded
async def test_reset_forgets_transcript_queues_and_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([AssistantMessage(content=(), stop_reason="error", error_message="x")])
    async with open_agent(model) as agent:
        await agent.prompt("hi")
        agent.steer("s")
        agent.follow_up("f")
        assert agent.state.error_message == "x"
        agent.reset()
        assert agent.state == AgentState()
        assert not agent.has_queued_messages


@guarded
async def test_queues_can_be_inspected_and_cleared(autojump_clock: trio.testing.MockClock) -> None:
    async with open_agent(ScriptedModel([reply()])) as agent:
        agent.steer("s1")
        agent.steer("s0", interrupt=True)  # idle: just goes first
        agent.follow_up("f1")
        assert agent.has_queued_messages
        assert texts(agent.queued_steering) == ["s0", "s1"]
        steering, follow_ups = agent.clear_queues()
        assert (texts(steering), texts(follow_ups)) == (["s0", "s1"], ["f1"])
        assert not agent.has_queued_messages
        with pytest.raises(TypeError, match="expected a message or a str"):
            agent.steer(42)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="expected a message or a str"):
            await agent.prompt([UserMessage.text("ok"), 42])  # type: ignore[list-item]
        assert agent.state.is_running is False
        await agent.prompt("fine")


# --- continue_ -----------------------------------------------------------------------------


@guarded
async def test_continue_delivers_a_follow_up_from_an_assistant_tail(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([reply("processed")])
    history = (UserMessage.text("initial"), reply("initial response"))
    async with open_agent(model, messages=history) as agent:
        agent.follow_up("queued follow-up")
        await agent.continue_()
        assert texts(agent.state.messages) == ["initial", "queued follow-up"]
        assert agent.state.messages[-1].role == "assistant"
        assert not agent.has_queued_messages


@guarded
async def test_continue_keeps_one_at_a_time_steering_from_an_assistant_tail(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([reply("processed 1"), reply("processed 2")])
    history = (UserMessage.text("initial"), reply("initial response"))
    async with open_agent(model, messages=history) as agent:
        agent.steer("steering 1")
        agent.steer("steering 2")
        agent.follow_up("follow-up")
        model.add(reply("processed 3"))
        await agent.continue_()
        roles = [m.role for m in agent.state.messages[2:]]
        assert roles == ["user", "assistant", "user", "assistant", "user", "assistant"]
        assert texts(agent.state.messages)[1:] == ["steering 1", "steering 2", "follow-up"]
        assert len(model.requests) == 3


@guarded
async def test_continue_retries_from_a_user_tail(autojump_clock: trio.testing.MockClock) -> None:
    model = ScriptedModel(
        [AssistantMessage(content=(), stop_reason="error", error_message="overloaded"), reply()]
    )
    async with open_agent(model) as agent:
        result = await agent.prompt("hi")
        assert result.reason == "error"
        # Drop the failed reply and ask again, as a retry would.
        agent.replace_messages(agent.state.messages[:1])
        retry = await agent.continue_()
        assert retry.reason == "stop"
        assert agent.state.error_message is None
        assert [m.role for m in agent.state.messages] == ["user", "assistant"]


@guarded
async def test_continue_with_nothing_to_continue_is_a_usage_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_agent(ScriptedModel([reply()])) as agent:
        agent.steer("queued")
        with pytest.raises(AgentUsageError, match="transcript is empty"):
            await agent.continue_()
        await agent.prompt("hi")
        assert texts(agent.state.messages) == ["queued", "hi"]
        with pytest.raises(AgentUsageError, match="nothing queued"):
            await agent.continue_()
        assert agent.state.is_running is False
        await agent.wait_for_idle()  # the refused calls left no run behind


# --- failures ------------------------------------------------------------------------------


@guarded
async def test_a_model_error_is_a_result_with_error_message(
    autojump_clock: trio.testing.MockClock,
) -> None:
    failing = AssistantMessage(
        content=(Text(text="par"),), stop_reason="error", error_message="boom"
    )
    model = ScriptedModel([failing, reply()])
    async with open_agent(model) as agent:
        result = await agent.prompt("hi")
        assert result.reason == "error"
        assert result.error_message == "boom"
        assert agent.state.error_message == "boom"
        assert agent.state.messages[-1] == failing
        await agent.prompt("again")
        assert agent.state.error_message is None


@guarded
async def test_a_failing_hook_raises_and_keeps_the_paired_transcript(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls = 0

    def transform(messages: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise ValueError("transform broke")
        return messages

    probe = Probe()
    model = ScriptedModel([probe_use("c1", "c2"), reply()])
    config = LoopConfig(transform_context=transform)
    async with open_agent(model, tools=[probe.tool], config=config) as agent:
        with pytest.raises(AgentRunError) as info:
            await agent.prompt("go")
        assert isinstance(info.value.__cause__, ValueError)
        state = agent.state
        assert state.messages == info.value.result.transcript
        check_transcript(state.messages)
        # Not swallowed into an empty assistant message (pi #2188): the tail is the
        # last tool result and no reply was invented.
        assert [m.role for m in state.messages] == [
            "user",
            "assistant",
            "tool_result",
            "tool_result",
        ]
        assert state.error_message is not None
        assert "transform broke" in state.error_message
        assert state.is_running is False
        # The agent stays usable.
        model.add(reply())
        calls = 10
        assert (await agent.continue_()).reason == "stop"


@guarded
async def test_config_with_queue_hooks_is_refused(autojump_clock: trio.testing.MockClock) -> None:
    def poll() -> list[Message]:
        return []

    with pytest.raises(AgentUsageError, match=r"agent\.steer\(\)"):
        async with open_agent(ScriptedModel(), config=LoopConfig(get_steering_messages=poll)):
            pass  # pragma: no cover
    async with open_agent(ScriptedModel()) as agent:
        with pytest.raises(AgentUsageError, match=r"agent\.follow_up\(\)"):
            agent.config = LoopConfig(get_follow_up_messages=poll)
        agent.config = LoopConfig(max_steps=3)  # other fields are fine
        with pytest.raises(ValueError, match="steering_mode"):
            agent.steering_mode = "two"  # type: ignore[assignment]
    with pytest.raises(ValueError, match="follow_up_mode"):
        async with open_agent(ScriptedModel(), follow_up_mode="some"):  # type: ignore[arg-type]
            pass  # pragma: no cover


# --- subscribers ---------------------------------------------------------------------------


@guarded
async def test_subscribe_gets_every_event_and_nothing_before(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([probe_use("c1"), reply("the end")], chunk_size=2)
    probe = Probe()
    seen: list[AgentEvent] = []
    async with open_agent(model, tools=[probe.tool]) as agent:
        async with agent.subscribe() as events, trio.open_nursery() as nursery:
            with pytest.raises(trio.WouldBlock):
                events.receive_nowait()  # no event on subscribe
            nursery.start_soon(collect, events, seen)
            result = await agent.prompt("go")
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        assert type(seen[0]) is AgentStart
        assert seen[-1] == AgentEnd(reason="stop", messages=result.messages)
        assert [e.message for e in seen if type(e) is MessageEnd] == list(result.messages)
        assert sum(type(e) is TurnStart for e in seen) == sum(type(e) is TurnEnd for e in seen) == 2
        assert any(type(e) is MessageUpdate for e in seen)
        # Unsubscribed: the next run reaches nobody, and nothing fails.
        model.add(reply())
        count = len(seen)
        await agent.prompt("more")
        assert len(seen) == count


@guarded
async def test_agent_end_reaches_subscribers_with_the_state_final(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([reply("one"), reply("two")])
    observed: list[tuple[bool, int]] = []
    second: list[Any] = []
    done = trio.Event()
    async with open_agent(model) as agent:
        async with agent.subscribe() as events, trio.open_nursery() as nursery:

            async def prompt_again() -> None:
                second.append(await agent.prompt("two"))
                done.set()

            async def watch() -> None:
                async for event in events:
                    if type(event) is AgentEnd and not observed:
                        observed.append((agent.state.is_running, len(agent.state.messages)))
                        # Reacting to AgentEnd with a new prompt (from another task)
                        # works: it waits for the ending run's last step, no busy error.
                        nursery.start_soon(prompt_again)

            nursery.start_soon(watch)
            await agent.prompt("one")
            await done.wait()
            nursery.cancel_scope.cancel()
    assert observed == [(False, 2)]
    assert second[0].reason == "stop"
    assert texts(agent.state.messages) == ["one", "two"]


@guarded
async def test_a_slow_subscriber_applies_backpressure(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([reply()])
    async with open_agent(model) as agent, trio.open_nursery() as nursery:
        async with agent.subscribe() as events:
            nursery.start_soon(agent.prompt, "hi")
            await trio.testing.wait_all_tasks_blocked()
            # The run waits for us to take AgentStart: no request was made yet.
            assert agent.state.is_running
            assert model.requests == []
            assert type(await events.receive()) is AgentStart
            async for event in events:
                if type(event) is AgentEnd:
                    break
        await agent.wait_for_idle()
        assert len(model.requests) == 1


@guarded
async def test_drop_updates_subscriber_does_not_slow_the_stream(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([reply("x" * 40)], chunk_size=1)
    seen: list[AgentEvent] = []
    async with open_agent(model) as agent, trio.open_nursery() as nursery:
        async with agent.subscribe(drop_updates=True) as events:

            async def slow_reader() -> None:
                async for event in events:
                    seen.append(event)
                    await trio.sleep(1)

            nursery.start_soon(slow_reader)
            result = await agent.prompt("hi")
            nursery.cancel_scope.cancel()
    updates = [e for e in seen if type(e) is MessageUpdate]
    # Every other event arrived, in order; most of the 40 updates were dropped.
    assert [type(e) for e in seen if type(e) is not MessageUpdate] == [
        AgentStart, TurnStart, MessageStart, MessageEnd, MessageStart, MessageEnd, TurnEnd, AgentEnd
    ]  # fmt: skip
    assert len(updates) < 40
    assert seen[-1] == AgentEnd(reason="stop", messages=result.messages)


@guarded
async def test_a_subscriber_that_leaves_does_not_break_the_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    model = ScriptedModel([probe_use("c1"), reply()])
    kept: list[AgentEvent] = []
    async with open_agent(model, tools=[probe.tool]) as agent:
        async with agent.subscribe() as steady, trio.open_nursery() as nursery:
            nursery.start_soon(collect, steady, kept)
            async with agent.subscribe() as leaving:
                nursery.start_soon(agent.prompt, "go")
                assert type(await leaving.receive()) is AgentStart
                await trio.testing.wait_all_tasks_blocked()
                # The run is now blocked handing TurnStart to us; we leave instead.
                assert model.requests == []
            await agent.wait_for_idle()
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    assert kept[-1] == AgentEnd(reason="stop", messages=kept[-1].messages)  # type: ignore[union-attr]
    assert [m.role for m in agent.state.messages] == [
        "user", "assistant", "tool_result", "assistant"
    ]  # fmt: skip


@guarded
async def test_a_later_subscriber_sees_only_later_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([reply("one"), reply("two")])
    seen: list[AgentEvent] = []
    async with open_agent(model) as agent:
        await agent.prompt("one")
        async with agent.subscribe() as events, trio.open_nursery() as nursery:
            nursery.start_soon(collect, events, seen)
            result = await agent.prompt("two")
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    assert type(seen[0]) is AgentStart
    assert seen[-1] == AgentEnd(reason="stop", messages=result.messages)
    assert sum(type(e) is AgentStart for e in seen) == 1
    assert texts([e.message for e in seen if type(e) is MessageEnd]) == ["two"]


# --- cancellation and closing --------------------------------------------------------------


@guarded
async def test_cancelling_prompt_aborts_the_run_and_tells_subscribers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    model = ScriptedModel([probe_use("c1", wait=True)])
    seen: list[AgentEvent] = []
    async with open_agent(model, tools=[probe.tool]) as agent:
        async with agent.subscribe() as events, trio.open_nursery() as nursery:
            nursery.start_soon(collect, events, seen)
            with trio.CancelScope() as scope:

                async def cancel_when_started() -> None:
                    await probe.started["c1"].wait()
                    scope.cancel()

                nursery.start_soon(cancel_when_started)
                await agent.prompt("go")
            assert scope.cancelled_caught
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        assert agent.state.is_running is False
        check_transcript(agent.state.messages)
        assert agent.state.messages[-1].role == "tool_result"
        assert seen[-1] == AgentEnd(reason="aborted", messages=seen[-1].messages)  # type: ignore[union-attr]
        # The agent is usable again.
        model.add(reply())
        assert (await agent.continue_()).reason == "stop"


@guarded
async def test_leaving_open_agent_aborts_the_run_and_ends_subscriptions(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    model = ScriptedModel([probe_use("c1", wait=True)])
    seen: list[AgentEvent] = []
    results: list[Any] = []
    async with trio.open_nursery() as nursery:
        async with open_agent(model, tools=[probe.tool]) as agent:
            events_cm = agent.subscribe()
            events = await events_cm.__aenter__()

            # On purpose, these tasks outlive the agent's block: it must end them.
            async def watch() -> None:
                await collect(events, seen)

            async def run() -> None:
                results.append(await agent.prompt("go"))

            nursery.start_soon(watch)
            nursery.start_soon(run)
            await probe.started["c1"].wait()
        # The run ended before the block was left; the subscription's iteration ended.
        assert agent.state.is_running is False
        assert results[0].reason == "aborted"
        await events_cm.__aexit__(None, None, None)
    assert type(seen[-1]) is AgentEnd
    with pytest.raises(AgentUsageError, match="closed"):
        await agent.prompt("late")
    with pytest.raises(AgentUsageError, match="closed"):
        agent.steer("late")


@guarded
async def test_leaving_open_agent_does_not_wait_forever_for_a_stuck_subscriber(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    model = ScriptedModel([probe_use("c1", wait=True)])
    async with trio.open_nursery() as nursery:
        async with open_agent(model, tools=[probe.tool]) as agent:
            stuck = agent.subscribe()
            await stuck.__aenter__()  # never read

            async def run() -> None:  # outlives the agent's block, on purpose
                await agent.prompt("go")

            nursery.start_soon(run)
            await trio.testing.wait_all_tasks_blocked()
            start = trio.current_time()
        # Bounded by cleanup_timeout (5 s) with the subscriber, then without it.
        assert trio.current_time() - start == pytest.approx(5)
        assert agent.state.is_running is False


@guarded
async def test_cancelling_prompt_while_a_subscriber_is_slow_loses_no_event(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The event a cancelled hand-over did not deliver is handed over first in the
    clean-up: the subscriber's MessageEnds are exactly the messages the run added."""
    model = ScriptedModel([probe_use("c1"), reply()])
    probe = Probe()
    received: list[AgentEvent] = []
    async with open_agent(model, tools=[probe.tool]) as agent, trio.open_nursery() as nursery:
        async with agent.subscribe() as events:

            async def slow_reader() -> None:
                async for event in events:
                    received.append(event)
                    await trio.sleep(1)
                    if type(event) is AgentEnd:
                        return

            nursery.start_soon(slow_reader)
            # Lands at 2.5 s: the reader holds MessageStart(user) until 3 s, so the
            # agent is handing over MessageEnd(user).
            with trio.move_on_after(2.5):
                await agent.prompt("hi")
            await agent.wait_for_idle()
            await trio.sleep(100)
    ends = [e.message for e in received if type(e) is MessageEnd]
    starts = [e.message for e in received if type(e) is MessageStart]
    assert len(starts) == len(ends)
    assert received[-1].type == "agent_end"
    assert tuple(ends) == received[-1].messages  # type: ignore[union-attr]
    assert tuple(ends) == tuple(agent.state.messages)
    check_transcript(agent.state.messages)


@pytest.mark.parametrize("buffer", [0, 3])
@guarded
async def test_a_subscriber_that_closes_its_channel_is_dropped_and_the_others_get_everything(
    buffer: int, autojump_clock: Any
) -> None:
    """A reader that closes its receiving end mid-run: handing it an event fails (at
    once when the channel would take it without waiting, or while the run waits), it is
    unsubscribed, the run goes on, and every other subscriber gets every event."""
    probe = Probe()
    model = ScriptedModel([probe_use("a"), probe_use("b"), reply()])
    kept: list[AgentEvent] = []
    quitter: list[AgentEvent] = []
    async with open_agent(model, tools=(probe.tool,)) as agent:
        async with (
            agent.subscribe(buffer) as events,
            agent.subscribe(buffer) as leaving,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(collect, events, kept)

            async def quit_after_three() -> None:
                async for event in leaving:
                    quitter.append(event)
                    if len(quitter) == 3:
                        await leaving.aclose()
                        return

            nursery.start_soon(quit_after_three)
            result = await agent.prompt("go")
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    assert result.reason == "stop"
    assert len(quitter) == 3
    assert kept[0].type == "agent_start"
    assert kept[-1].type == "agent_end"
    assert [e.message for e in kept if type(e) is MessageEnd] == list(result.messages)
    assert sum(type(e) is TurnEnd for e in kept) == 3
    check_transcript(agent.state.messages)  # raises if unpaired


@pytest.mark.parametrize("reset_on_end", [False, True])
@guarded
async def test_a_failed_runs_error_is_kept_unless_a_subscriber_resets_on_agent_end(
    reset_on_end: bool, autojump_clock: Any
) -> None:
    """A run that raises AgentRunError (here a hook fails) leaves its error in the
    state; a subscriber that resets the agent as soon as it sees AgentEnd wins: the
    error written when the run's task ends does not come back."""

    def broken_hook(ctx: TurnContext) -> bool:
        raise RuntimeError("hook broke")

    model = ScriptedModel([reply("one")])
    config = LoopConfig(should_stop_after_turn=broken_hook)
    async with open_agent(model, config=config) as agent:
        async with agent.subscribe() as events, trio.open_nursery() as nursery:

            async def watch() -> None:
                async for event in events:
                    if type(event) is AgentEnd and reset_on_end:
                        agent.reset()

            nursery.start_soon(watch)
            with pytest.raises(AgentRunError, match="hook broke"):
                await agent.prompt("go")
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        if reset_on_end:
            assert agent.state == AgentState()
        else:
            assert agent.state.error_message is not None
            assert "hook broke" in agent.state.error_message
            assert texts(agent.state.messages) == ["go"]
