"""The pairing invariant under fire: abort, outer cancels, deadlines and limits
(docs/guarantees.md, "Cancellation: any stop leaves a paired transcript, and nothing
alive").

Every test checks the end reason, the paired transcript, the number of model requests
(and that none came after an abort), and that cancelled tools ran their ``finally``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing

from tests.kit.loop import (
    Recorder,
    assert_consistent,
    call,
    ctx,
    make_tool,
    prompt,
    reply,
    reply_cut_in_its_third_block,
    results_of,
    sleeper,
    tool_use,
)
from trio_agent import (
    AgentEvent,
    AgentRunError,
    AssistantMessage,
    Done,
    LoopConfig,
    Start,
    Text,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolContext,
    ToolExecutionEnd,
    ToolResultMessage,
    check_transcript,
    open_agent_loop,
    run_agent_loop,
)
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from collections.abc import Mapping


def live_tasks() -> int:
    def count(task: trio.lowlevel.Task) -> int:
        return 1 + sum(count(t) for n in task.child_nurseries for t in n.child_tasks)

    return count(trio.lowlevel.current_root_task())


# --- abort --------------------------------------------------------------------------------


async def test_abort_mid_stream_keeps_partial_reply_and_skips_its_calls() -> None:
    a = ToolCall(id="a", name="probe", arguments={})
    model = ScriptedModel(
        [
            [
                Start(),
                ToolCallStart(index=0, id="a", name="probe"),
                ToolCallDelta(index=0, delta="{}"),
                ToolCallEnd(index=0, tool_call=a),
                TextStart(index=1),
                TextDelta(index=1, delta="partial "),
                TextDelta(index=1, delta="never seen"),
            ],
            reply(),
        ]
    )
    pause = model.pause_at(0, 6)
    executed: list[str] = []

    async def probe(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:
        await trio.lowlevel.checkpoint()
        executed.append(c.id)
        return "ran"

    events: list[AgentEvent] = []
    with trio.fail_after(5):
        async with open_agent_loop(prompt(), ctx(make_tool("probe", probe)), model) as run:
            async with trio.open_nursery() as nursery:

                async def abort_when_paused() -> None:
                    await pause.reached.wait()
                    run.abort("user pressed stop")

                nursery.start_soon(abort_when_paused)
                async for event in run.events:
                    events.append(event)
    result = run.result
    assert result is not None
    assert (result.reason, result.steps, len(model.requests)) == ("aborted", 1, 1)
    assert executed == []
    assistant = result.messages[1]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.stop_reason == "aborted"
    assert assistant.error_message == "user pressed stop"
    assert assistant.content == (a, Text(text="partial "))
    tr = results_of(result.messages)["a"]
    assert tr.is_error
    assert "aborted" in tr.text
    assert [e.outcome for e in events if isinstance(e, ToolExecutionEnd)] == ["skipped"]
    assert_consistent(result, events, model.requests)


async def test_abort_mid_batch(autojump_clock: Any) -> None:
    log: list[str] = []
    model = ScriptedModel(
        [
            tool_use(
                call("quick", "sleep", s=1),
                call("slow", "sleep", s=100),
                call("slow2", "sleep", s=50),
            ),
            reply(),
        ]
    )
    rec = Recorder()
    async with open_agent_loop(prompt(), ctx(sleeper("sleep", 0, log)), model) as run:
        async with trio.open_nursery() as nursery:

            async def abort_later() -> None:
                await trio.sleep(2)
                run.abort()

            nursery.start_soon(abort_later)
            async for event in run.events:
                rec(event)
    result = run.result
    assert result is not None
    assert (result.reason, result.steps, len(model.requests)) == ("aborted", 1, 1)
    by_id = results_of(result.messages)
    assert not by_id["quick"].is_error
    assert by_id["slow"].is_error
    assert by_id["slow2"].is_error
    assert "aborted" in by_id["slow"].text
    assert [m.tool_call_id for m in result.messages if isinstance(m, ToolResultMessage)] == [
        "quick",
        "slow",
        "slow2",
    ]
    outcomes = {e.call_id: e.outcome for e in rec.of(ToolExecutionEnd)}
    assert outcomes == {"quick": "ok", "slow": "aborted", "slow2": "aborted"}
    assert {"finally slow", "finally slow2", "finally quick"} <= set(log)
    assert "end slow" not in log
    assert_consistent(result, rec.events, model.requests)


async def test_abort_between_turns_makes_no_new_request(autojump_clock: Any) -> None:
    polled = trio.Event()
    gate = trio.Event()

    async def steering() -> list[Any]:
        polled.set()
        await gate.wait()
        return []

    model = ScriptedModel([tool_use(call("a")), reply()])
    config = LoopConfig(get_steering_messages=steering)
    async with open_agent_loop(prompt(), ctx(make_tool()), model, config, buffer=100) as run:
        # first poll is at the start; let it through, then stop at the poll after turn 0
        await polled.wait()
        polled = trio.Event()
        gate.set()
        gate = trio.Event()
        await polled.wait()
        run.abort()
        events = [e async for e in run.events]
    result = run.result
    assert result is not None
    assert (result.reason, result.steps, len(model.requests)) == ("aborted", 1, 1)
    assert_consistent(result, events, model.requests)


async def test_abort_with_grace_lets_running_tools_finish(autojump_clock: Any) -> None:
    log: list[str] = []
    model = ScriptedModel([tool_use(call("a", "sleep", s=3), call("b", "sleep", s=1)), reply()])
    async with open_agent_loop(prompt(), ctx(sleeper("sleep", 0, log)), model, buffer=100) as run:
        await trio.sleep(0.5)
        run.abort(grace=5)
        events = [e async for e in run.events]
    result = run.result
    assert result is not None
    assert trio.current_time() == pytest.approx(3)
    assert (result.reason, result.steps) == ("aborted", 1)
    assert not any(r.is_error for r in results_of(result.messages).values())
    assert_consistent(result, events, model.requests)


async def test_abort_grace_expires_and_cancels(autojump_clock: Any) -> None:
    log: list[str] = []
    model = ScriptedModel([tool_use(call("a", "sleep", s=100), call("b", "sleep", s=1)), reply()])
    async with open_agent_loop(prompt(), ctx(sleeper("sleep", 0, log)), model, buffer=100) as run:
        await trio.sleep(0.5)
        run.abort(grace=2)
        events = [e async for e in run.events]
    result = run.result
    assert result is not None
    assert trio.current_time() == pytest.approx(2.5)
    by_id = results_of(result.messages)
    assert by_id["a"].is_error
    assert not by_id["b"].is_error
    assert "finally a" in log
    assert (result.reason, len(model.requests)) == ("aborted", 1)
    assert_consistent(result, events, model.requests)


async def test_abort_from_another_thread() -> None:
    started = threading.Event()
    model = ScriptedModel([tool_use(call("a", "wait")), reply()])

    async def wait_forever(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:
        started.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    with trio.fail_after(10):
        async with open_agent_loop(
            prompt(), ctx(make_tool("wait", wait_forever)), model, buffer=100
        ) as run:

            def from_thread() -> None:
                started.wait()
                run.abort_from_thread("bye")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.to_thread.run_sync, from_thread)
                events = [e async for e in run.events]
    result = run.result
    assert result is not None
    assert (result.reason, len(model.requests)) == ("aborted", 1)
    assert "bye" in results_of(result.messages)["a"].text
    assert_consistent(result, events, model.requests)


async def test_abort_after_the_end_is_a_no_op() -> None:
    async with open_agent_loop(prompt(), ctx(), ScriptedModel([reply()])) as run:
        events = [e async for e in run.events]
        run.abort()
    assert run.result is not None
    assert run.result.reason == "stop"
    assert events[-1].type == "agent_end"


# --- outer cancellation -------------------------------------------------------------------


async def test_outer_deadline_around_run_agent_loop(autojump_clock: Any) -> None:
    log: list[str] = []
    rec = Recorder()
    model = ScriptedModel([tool_use(call("a", "sleep", s=1), call("b", "sleep", s=100)), reply()])
    with trio.move_on_after(5) as scope:
        await run_agent_loop(prompt(), ctx(sleeper("sleep", 0, log)), model, on_event=rec)
    assert scope.cancelled_caught
    assert "finally b" in log
    end = rec.events[-1]
    assert end.type == "agent_end"
    assert end.reason == "aborted"
    check_transcript(end.messages)
    assert len(model.requests) == 1
    assert [e.outcome for e in rec.of(ToolExecutionEnd)] == ["ok", "aborted"]


async def test_outer_cancel_around_open_agent_loop_keeps_paired_result(autojump_clock: Any) -> None:
    log: list[str] = []
    model = ScriptedModel([tool_use(call("a", "sleep", s=100)), reply()])
    events: list[AgentEvent] = []
    with trio.move_on_after(3) as scope:
        async with open_agent_loop(prompt(), ctx(sleeper("sleep", 0, log)), model) as run:
            async for event in run.events:
                events.append(event)
    assert scope.cancelled_caught
    assert run.result is not None
    assert run.result.reason == "aborted"
    assert run.messages == run.result.messages
    check_transcript(run.result.transcript)
    assert results_of(run.result.messages)["a"].is_error
    assert "finally a" in log


async def test_outer_cancel_raises_bare_cancelled_not_a_group(autojump_clock: Any) -> None:
    model = ScriptedModel([tool_use(call("a", "sleep", s=100), call("b", "sleep", s=100))])
    caught: list[BaseException] = []
    with trio.CancelScope() as scope:

        async def cancel_soon() -> None:
            await trio.sleep(1)
            scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel_soon)
            try:
                await run_agent_loop(prompt(), ctx(sleeper("sleep", 0)), model)
            except BaseException as exc:
                caught.append(exc)
                raise
    assert len(caught) == 1
    assert isinstance(caught[0], trio.Cancelled)


# --- timeouts -----------------------------------------------------------------------------


async def test_tool_timeout_from_config(autojump_clock: Any) -> None:
    log: list[str] = []
    rec = Recorder()
    model = ScriptedModel(
        [tool_use(call("slow", "sleep", s=10), call("ok", "sleep", s=1)), reply()]
    )
    result = await run_agent_loop(
        prompt(), ctx(sleeper("sleep", 0, log)), model, LoopConfig(tool_timeout=2), on_event=rec
    )
    by_id = results_of(result.messages)
    assert by_id["slow"].text == "Tool sleep timed out after 2s"
    assert by_id["slow"].is_error
    assert not by_id["ok"].is_error
    assert {e.call_id: e.outcome for e in rec.of(ToolExecutionEnd)} == {
        "slow": "timed_out",
        "ok": "ok",
    }
    assert "finally slow" in log
    assert (result.reason, result.steps) == ("stop", 2)


async def test_per_tool_timeout_overrides_config(autojump_clock: Any) -> None:
    async def slow(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:
        await trio.sleep(1)
        return "done"

    model = ScriptedModel([tool_use(call("a", "short"), call("b", "long")), reply()])
    tools = ctx(make_tool("short", slow, timeout=0.5), make_tool("long", slow, timeout=5))
    result = await run_agent_loop(prompt(), tools, model, LoopConfig(tool_timeout=0.1))
    by_id = results_of(result.messages)
    assert by_id["a"].text == "Tool short timed out after 0.5s"
    assert by_id["b"].text == "done"


async def test_stream_idle_timeout_ends_a_silent_stream(autojump_clock: Any) -> None:
    model = ScriptedModel([[Start(), TextStart(index=0), TextDelta(index=0, delta="hel")], reply()])
    model.pause_at(0, 3)  # never released: the stream goes silent
    result = await run_agent_loop(prompt(), ctx(), model, LoopConfig(stream_idle_timeout=30))
    assert trio.current_time() == pytest.approx(30)
    assistant = result.messages[-1]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.stop_reason == "error"
    assert assistant.error_message is not None
    assert "silent for 30s" in assistant.error_message
    assert assistant.text == "hel"
    assert (result.reason, result.steps) == ("error", 1)


async def test_idle_timeout_does_not_count_a_slow_consumer(autojump_clock: Any) -> None:
    model = ScriptedModel([reply("abcdef")], chunk_size=1)

    async def slow_sink(event: AgentEvent) -> None:
        await trio.sleep(10)

    result = await run_agent_loop(
        prompt(), ctx(), model, LoopConfig(stream_idle_timeout=5), on_event=slow_sink
    )
    assert result.reason == "stop"


async def test_run_timeout_mid_stream_ends_timeout_with_the_reply_kept(autojump_clock: Any) -> None:
    model = ScriptedModel(
        [
            tool_use(call("a", "sleep", s=1)),
            [Start(), TextStart(index=0), TextDelta(index=0, delta="hal")],
        ]
    )
    model.pause_at(1, 3)  # never released: the model stalls in its second reply
    rec = Recorder()
    result = await run_agent_loop(
        prompt(), ctx(sleeper("sleep", 0)), model, LoopConfig(run_timeout=30), on_event=rec
    )
    assert trio.current_time() == pytest.approx(30)
    assert (result.reason, result.steps, len(model.requests)) == ("timeout", 2, 2)
    stalled = result.messages[-1]
    assert isinstance(stalled, AssistantMessage)
    assert (stalled.stop_reason, stalled.text) == ("aborted", "hal")
    assert stalled.error_message == "the run timed out after 30s (run_timeout)"
    ends = [e for e in rec.events if e.type == "agent_end"]
    assert ends == [rec.events[-1]]
    assert ends[0].reason == "timeout"
    assert_consistent(result, rec.events, model.requests)


async def test_run_timeout_mid_batch_aborts_the_unfinished_calls(autojump_clock: Any) -> None:
    log: list[str] = []
    model = ScriptedModel([tool_use(call("quick", "sleep", s=1), call("slow", "sleep", s=100))])
    events: list[AgentEvent] = []
    async with open_agent_loop(
        prompt(), ctx(sleeper("sleep", 0, log)), model, LoopConfig(run_timeout=5)
    ) as run:
        async for event in run.events:
            events.append(event)
    result = run.result
    assert result is not None
    assert trio.current_time() == pytest.approx(5)
    assert (result.reason, result.steps) == ("timeout", 1)
    by_id = results_of(result.messages)
    assert by_id["quick"].text == "quick slept"
    assert by_id["slow"].text == "Tool call aborted: the run timed out after 5s (run_timeout)."
    outcomes = {e.call_id: e.outcome for e in events if isinstance(e, ToolExecutionEnd)}
    assert outcomes == {"quick": "ok", "slow": "aborted"}
    assert "finally slow" in log
    assert [e.type for e in events][-1] == "agent_end"
    assert sum(e.type == "agent_end" for e in events) == 1
    assert_consistent(result, events, model.requests)


async def test_run_timeout_not_reached_changes_nothing_and_survives_an_interrupt(
    autojump_clock: Any,
) -> None:
    model = ScriptedModel([tool_use(call("a", "sleep", s=100)), reply()])
    async with open_agent_loop(
        prompt(), ctx(sleeper("sleep", 0)), model, LoopConfig(run_timeout=50), buffer=100
    ) as run:
        await trio.sleep(1)
        assert run.interrupt()  # the batch is cut; the run goes on, still bounded
        events = [e async for e in run.events]
    result = run.result
    assert result is not None
    assert (result.reason, result.steps) == ("stop", 2)
    assert trio.current_time() == pytest.approx(1)
    assert_consistent(result, events, model.requests)

    stalled = ScriptedModel([tool_use(call("a", "sleep", s=100)), reply()])
    with trio.fail_after(500):  # a deadline lost at the interrupt would hang here
        async with open_agent_loop(
            prompt(), ctx(sleeper("sleep", 0)), stalled, LoopConfig(run_timeout=50), buffer=100
        ) as run:
            await trio.sleep(1)
            assert run.interrupt()
            stalled.pause_at(1, 0)  # the reply after the interrupt never comes
            events = [e async for e in run.events]
    assert run.result is not None
    assert run.result.reason == "timeout"
    assert trio.current_time() == pytest.approx(51)  # the deadline kept across the interrupt
    assert_consistent(run.result, events, stalled.requests)


async def test_run_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="run_timeout must be a number of seconds"):
        LoopConfig(run_timeout=0)


# --- malformed streams -------------------------------------------------------------------


async def test_block_events_before_start_are_an_implicit_start() -> None:
    final = AssistantMessage(content=(Text(text="hi"),), stop_reason="stop")
    model = ScriptedModel(
        [[TextDelta(index=0, delta="hi"), TextEnd(index=0, text="hi"), Done(message=final)]]
    )
    rec = Recorder()
    result = await run_agent_loop(prompt(), ctx(), model, on_event=rec)
    assert result.reason == "stop"
    assert result.messages[-1] == final
    assert_consistent(result, rec.events, model.requests)


async def test_a_single_done_is_a_valid_stream() -> None:
    final = AssistantMessage(content=(Text(text="hi"),), stop_reason="stop")
    rec = Recorder()
    result = await run_agent_loop(
        prompt(), ctx(), ScriptedModel([[Done(message=final)]]), on_event=rec
    )
    assert result.messages[-1] == final
    assert [t for t in rec.types()].count("message_start") == 2


async def test_stream_ending_without_a_terminal_event_is_an_error() -> None:
    model = ScriptedModel([[Start(), TextStart(index=0), TextDelta(index=0, delta="half")]])
    result = await run_agent_loop(prompt(), ctx(), model)
    assistant = result.messages[-1]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.stop_reason == "error"
    assert assistant.text == "half"
    assert assistant.error_message is not None
    assert "without a Done or Error" in assistant.error_message
    assert result.reason == "error"


async def test_a_provider_that_raises() -> None:
    model = ScriptedModel(
        [[Start(), TextStart(index=0), TextDelta(index=0, delta="x"), Done(message=reply())]]
    )
    model.fail_at(0, 3, ConnectionResetError("peer went away"))
    result = await run_agent_loop(prompt(), ctx(), model)
    assistant = result.messages[-1]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.stop_reason == "error"
    assert assistant.error_message is not None
    assert "peer went away" in assistant.error_message
    assert assistant.text == "x"
    assert result.reason == "error"


async def test_a_second_terminal_event_is_ignored() -> None:
    first = reply("first")
    model = ScriptedModel([[Start(), Done(message=first), Done(message=reply("second"))]])
    result = await run_agent_loop(prompt(), ctx(), model)
    assert result.messages[-1] == first
    assert result.reason == "stop"


async def test_unfinished_tool_call_json_is_an_error_and_never_runs() -> None:
    executed: list[str] = []

    async def probe(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:
        await trio.lowlevel.checkpoint()
        executed.append(c.id)
        return "ran"

    model = ScriptedModel(
        [
            [
                Start(),
                ToolCallStart(index=0, id="a", name="probe"),
                ToolCallDelta(index=0, delta='{"pa'),
            ]
        ]
    )
    rec = Recorder()
    result = await run_agent_loop(prompt(), ctx(make_tool("probe", probe)), model, on_event=rec)
    assistant = result.messages[-1]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.stop_reason == "error"
    assert assistant.tool_calls == ()
    assert assistant.error_message is not None
    assert "probe (a)" in assistant.error_message
    assert executed == []
    assert_consistent(result, rec.events, model.requests)


async def test_error_event_is_kept_with_its_partial_content() -> None:
    from trio_agent import Error

    partial = AssistantMessage(
        content=(Text(text="par"),), stop_reason="error", error_message="overloaded_error"
    )
    result = await run_agent_loop(
        prompt(), ctx(), ScriptedModel([[Start(), Error(message=partial)]])
    )
    assert result.messages[-1] == partial
    assert (result.reason, result.error_message) == ("error", "overloaded_error")


async def test_a_reply_cut_mid_stream_keeps_the_same_partial_content_watched_or_not() -> None:
    # Nobody watching, block events are only queued; a failure applies them, so the
    # kept reply is the one a watched run keeps.
    events, partial = reply_cut_in_its_third_block()
    for watched in (False, True):
        model = ScriptedModel([events, reply()])
        model.fail_at(0, len(events), ConnectionError("connection reset"))
        rec = Recorder()
        result = await run_agent_loop(
            prompt(), ctx(make_tool("probe")), model, on_event=rec if watched else None
        )
        assert result.reason == "error"
        assert any(e.type == "message_update" for e in rec.events) == watched
        assistant = result.messages[1]
        assert isinstance(assistant, AssistantMessage)
        assert assistant.content == partial
        assert assistant.stop_reason == "error"
        assert assistant.error_message is not None
        assert "connection reset" in assistant.error_message


async def test_garbage_in_the_stream_is_a_model_error() -> None:
    result = await run_agent_loop(prompt(), ctx(), ScriptedModel([[Start(), "junk"]]))  # type: ignore[list-item]
    assert result.reason == "error"


# --- bugs and hook failures --------------------------------------------------------------


async def test_a_failing_hook_raises_agent_run_error_with_a_paired_result() -> None:
    calls = 0

    def transform(messages: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise ValueError("transform broke")
        return messages

    rec = Recorder()
    model = ScriptedModel([tool_use(call("a")), reply()])
    with pytest.raises(AgentRunError) as info:
        await run_agent_loop(
            prompt(), ctx(make_tool()), model, LoopConfig(transform_context=transform), on_event=rec
        )
    error = info.value
    assert isinstance(error.__cause__, ValueError)
    assert error.result.reason == "error"
    check_transcript(error.result.transcript)
    assert [e.type for e in rec.events].count("agent_end") == 1
    assert rec.events[-1].type == "agent_end"
    assert len(model.requests) == 1


async def test_a_failing_event_sink_raises_agent_run_error() -> None:
    def sink(event: AgentEvent) -> None:
        if event.type == "tool_execution_end":
            raise RuntimeError("sink broke")

    with pytest.raises(AgentRunError) as info:
        await run_agent_loop(
            prompt(), ctx(make_tool()), ScriptedModel([tool_use(call("a")), reply()]), on_event=sink
        )
    assert isinstance(info.value.__cause__, RuntimeError)
    check_transcript(info.value.result.transcript)


async def test_a_failing_hook_in_open_agent_loop_raises_on_exit() -> None:
    def stop_hook(ctx: Any) -> bool:
        raise KeyError("nope")

    model = ScriptedModel([tool_use(call("a")), reply()])
    events: list[AgentEvent] = []
    with pytest.raises(AgentRunError) as info:
        async with open_agent_loop(
            prompt(), ctx(make_tool()), model, LoopConfig(should_stop_after_turn=stop_hook)
        ) as run:
            async for event in run.events:
                events.append(event)
    assert isinstance(info.value.__cause__, KeyError)
    assert events[-1].type == "agent_end"
    assert events[-1].reason == "error"  # type: ignore[union-attr]
    assert run.result is not None
    check_transcript(run.result.transcript)


async def test_keyboard_interrupt_in_a_tool_propagates_unwrapped() -> None:
    async def interrupt(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:
        await trio.lowlevel.checkpoint()
        raise KeyboardInterrupt

    rec = Recorder()
    model = ScriptedModel([tool_use(call("a", "kb"), call("b", "sleep", s=10)), reply()])
    with pytest.raises(KeyboardInterrupt):
        await run_agent_loop(
            prompt(), ctx(make_tool("kb", interrupt), sleeper("sleep", 0)), model, on_event=rec
        )
    end = rec.events[-1]
    assert end.type == "agent_end"
    check_transcript(end.messages)  # type: ignore[union-attr]
    assert all(e.outcome != "ok" for e in rec.of(ToolExecutionEnd))


async def test_consumer_closing_the_channel_ends_the_run_cleanly(autojump_clock: Any) -> None:
    log: list[str] = []
    model = ScriptedModel([tool_use(call("a", "sleep", s=100)), reply()])
    async with open_agent_loop(prompt(), ctx(sleeper("sleep", 0, log)), model) as run:
        async for event in run.events:
            if event.type == "tool_execution_start":
                await run.events.aclose()
                break
    assert run.result is not None
    assert run.result.reason == "aborted"
    check_transcript(run.result.transcript)
    assert "finally a" in log
    assert len(model.requests) == 1


async def test_leaving_the_block_early_aborts_and_body_errors_propagate_unchanged(
    autojump_clock: Any,
) -> None:
    log: list[str] = []
    model = ScriptedModel([tool_use(call("a", "sleep", s=100)), reply()])
    with pytest.raises(ValueError, match="mine") as info:
        async with open_agent_loop(prompt(), ctx(sleeper("sleep", 0, log)), model) as run:
            async for event in run.events:
                if event.type == "tool_execution_start":
                    raise ValueError("mine")
    assert type(info.value) is ValueError
    assert run.result is not None
    assert run.result.reason == "aborted"
    check_transcript(run.result.transcript)
    assert "finally a" in log


async def test_leaving_the_block_without_reading_aborts() -> None:
    model = ScriptedModel([tool_use(call("a")), reply()])
    async with open_agent_loop(prompt(), ctx(make_tool()), model) as run:
        pass
    assert run.result is not None
    assert run.result.reason == "aborted"
    assert model.requests == []


# --- leaks and backpressure --------------------------------------------------------------


async def test_no_task_is_left_alive(autojump_clock: Any) -> None:
    before = live_tasks()
    model = ScriptedModel([tool_use(call("a", "sleep", s=5), call("b", "sleep", s=50)), reply()])
    with trio.move_on_after(10):
        async with open_agent_loop(prompt(), ctx(sleeper("sleep", 0)), model) as run:
            async for event in run.events:
                if event.type == "tool_execution_end":
                    run.abort()
    assert live_tasks() == before
    with trio.move_on_after(1):
        await run_agent_loop(
            prompt(), ctx(sleeper("sleep", 0)), ScriptedModel([tool_use(call("c", "sleep", s=9))])
        )
    assert live_tasks() == before


async def test_buffer_zero_backpressure_slows_the_run_and_drops_nothing(
    autojump_clock: Any,
) -> None:
    model = ScriptedModel([tool_use(call("a")), reply("abc")], chunk_size=1)
    received: list[AgentEvent] = []
    async with open_agent_loop(prompt(), ctx(make_tool()), model) as run:
        async for event in run.events:
            received.append(event)
            await trio.sleep(1)
            # the run cannot be more than one event ahead of this consumer
            assert run.steps <= 2
    assert run.result is not None
    assert trio.current_time() == pytest.approx(len(received))
    reference = Recorder()
    await run_agent_loop(
        prompt(),
        ctx(make_tool()),
        ScriptedModel([tool_use(call("a")), reply("abc")], chunk_size=1),
        on_event=reference,
    )
    assert [e.type for e in received] == reference.types()
    assert_consistent(run.result, received, model.requests)
