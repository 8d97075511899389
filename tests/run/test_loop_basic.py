"""The core loop: the course chapter's nine observations, and how each stop reason ends a
run (the end reasons of docs/events.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import trio

from tests.kit.loop import (
    Recorder,
    assert_consistent,
    call,
    ctx,
    make_tool,
    prompt,
    reply,
    reply_cut_in_its_third_block,
    sleeper,
    tool_use,
)
from trio_agent import (
    AgentUsageError,
    AssistantMessage,
    CustomMessage,
    LoopConfig,
    MessageUpdate,
    Text,
    ToolCall,
    ToolContext,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolResultMessage,
    UserMessage,
    open_agent_loop,
    run_agent_loop,
)
from trio_agent._run._stream import StreamAccumulator
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from collections.abc import Mapping


def readme_script() -> ScriptedModel:
    return ScriptedModel(
        [
            tool_use(call("call-1", "read", path="README.md"), text="Let me read it."),
            reply("The project is tiny-pi."),
        ]
    )


async def _read(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:
    assert args == {"path": "README.md"}
    return "# tiny-pi\nA small agent runtime."


READ = make_tool("read", _read)


async def test_caller_context_is_not_mutated() -> None:
    history = [UserMessage.text("earlier"), reply("earlier answer")]
    context = ctx(READ, messages=history)
    before = context.messages
    result = await run_agent_loop(prompt(), context, readme_script())
    assert context.messages is before
    assert list(context.messages) == history
    assert result.transcript[:2] == tuple(history)
    assert result.messages == result.transcript[2:]


async def test_readme_round_trip_makes_two_requests() -> None:
    model = readme_script()
    rec = Recorder()
    result = await run_agent_loop(prompt("Read README.md"), ctx(READ), model, on_event=rec)
    assert [m.role for m in result.messages] == ["user", "assistant", "tool_result", "assistant"]
    assert (result.steps, result.reason) == (2, "stop")
    first, second = model.requests
    assert first.system_prompt == "sys"
    assert [t.name for t in first.tools] == ["read"]
    assert [m.role for m in first.messages] == ["user"]
    assert [m.role for m in second.messages] == ["user", "assistant", "tool_result"]
    tool_result = second.messages[2]
    assert isinstance(tool_result, ToolResultMessage)
    assert tool_result.tool_call_id == "call-1"
    assert tool_result.text.startswith("# tiny-pi")
    assert_consistent(result, rec.events, model.requests)


async def test_event_order_of_one_round_trip() -> None:
    rec = Recorder()
    await run_agent_loop(prompt(), ctx(READ), readme_script(), on_event=rec)
    types = [t for t in rec.types() if t != "message_update"]
    assert types == [
        "agent_start",
        "turn_start",
        "message_start",  # the prompt
        "message_end",
        "message_start",  # the assistant reply
        "message_end",
        "tool_execution_start",
        "tool_execution_end",
        "message_start",  # the tool result
        "message_end",
        "turn_end",
        "turn_start",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    end = rec.of(ToolExecutionEnd)[0]
    assert (end.outcome, end.is_error) == ("ok", False)


async def test_single_tool_round_trip_passes_call_and_progress() -> None:
    seen: list[Any] = []

    async def probe(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:
        seen.append((c.id, dict(args), tc.call_id, tc.tool_name))
        await tc.report_progress("half")
        return "probed"

    rec = Recorder()
    model = ScriptedModel([tool_use(call("c1", x=1)), reply()])
    result = await run_agent_loop(prompt(), ctx(make_tool("probe", probe)), model, on_event=rec)
    assert seen == [("c1", {"x": 1}, "c1", "probe")]
    assert [(e.call_id, e.partial) for e in rec.events if e.type == "tool_execution_update"] == [
        ("c1", "half")
    ]
    tr = result.messages[2]
    assert isinstance(tr, ToolResultMessage)
    assert (tr.tool_call_id, tr.text, tr.is_error) == ("c1", "probed", False)
    assert_consistent(result, rec.events, model.requests)


async def test_a_scripted_model_can_count_requests_without_keeping_them() -> None:
    script = [tool_use(call("c1")), tool_use(call("c2")), reply("done")]
    kept, counted = ScriptedModel(script), ScriptedModel(script, keep_requests=False)
    results = [await run_agent_loop(prompt(), ctx(make_tool()), m) for m in (kept, counted)]
    # The same run either way; only what the model holds afterwards differs.
    assert [m.role for m in results[0].messages] == [m.role for m in results[1].messages]
    assert (kept.request_count, len(kept.requests)) == (3, 3)
    assert (counted.request_count, counted.requests) == (3, [])


@pytest.mark.parametrize(
    ("stop_reason", "end_reason", "why"),
    [
        ("length", "length", "truncated"),
        ("error", "error", "model reported an error"),
        ("aborted", "aborted", "aborted"),
        ("stop", "error", "without asking for tools"),
    ],
)
async def test_non_executing_terminal_states(stop_reason: str, end_reason: str, why: str) -> None:
    executed: list[str] = []

    async def probe(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:
        executed.append(c.id)
        return "ran"

    rec = Recorder()
    model = ScriptedModel([reply("cut", stop_reason, call("a"), call("b"))])
    result = await run_agent_loop(prompt(), ctx(make_tool("probe", probe)), model, on_event=rec)
    assert executed == []
    assert result.reason == end_reason
    assert result.steps == 1
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [r.tool_call_id for r in results] == ["a", "b"]
    assert all(r.is_error and why in r.text for r in results)
    assert [e.outcome for e in rec.of(ToolExecutionEnd)] == ["skipped", "skipped"]
    assert len(rec.of(ToolExecutionStart)) == 2
    assert_consistent(result, rec.events, model.requests)


@pytest.mark.parametrize("stop_reason", ["length", "error", "aborted"])
async def test_terminal_states_without_calls(stop_reason: str) -> None:
    rec = Recorder()
    model = ScriptedModel([reply("x", stop_reason)])
    result = await run_agent_loop(prompt(), ctx(), model, on_event=rec)
    assert result.reason == stop_reason
    assert [m.role for m in result.messages] == ["user", "assistant"]
    assert_consistent(result, rec.events, model.requests)


async def test_tool_use_without_calls_is_an_error() -> None:
    result = await run_agent_loop(prompt(), ctx(), ScriptedModel([reply("?", "tool_use")]))
    assert (result.reason, result.steps) == ("error", 1)


async def test_plain_stop_ends_the_run() -> None:
    result = await run_agent_loop(prompt(), ctx(), ScriptedModel([reply("hello")]))
    assert (result.reason, result.steps) == ("stop", 1)


async def test_duplicate_call_ids_skip_each_distinct_id_once() -> None:
    rec = Recorder()
    model = ScriptedModel([tool_use(call("a"), call("b"), call("a"))])
    result = await run_agent_loop(prompt(), ctx(make_tool()), model, on_event=rec)
    assert result.reason == "error"
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [r.tool_call_id for r in results] == ["a", "b"]
    assert all("duplicate" in r.text for r in results)
    assert [e.call_id for e in rec.of(ToolExecutionEnd)] == ["a", "b"]


async def test_continue_after_length_asks_to_reissue_and_goes_on() -> None:
    model = ScriptedModel([reply("cut", "length", call("a")), reply("ok")])
    config = LoopConfig(continue_after_length=True)
    result = await run_agent_loop(prompt(), ctx(make_tool()), model, config)
    assert (result.reason, result.steps) == ("stop", 2)
    tr = result.messages[2]
    assert isinstance(tr, ToolResultMessage)
    assert "re-issue" in tr.text
    assert tr.is_error


async def test_parallel_completion_order_vs_transcript_order(autojump_clock: Any) -> None:
    log: list[str] = []
    rec = Recorder()
    model = ScriptedModel(
        [
            tool_use(
                call("slow", "sleep", s=3), call("fast", "sleep", s=1), call("mid", "sleep", s=2)
            ),
            reply(),
        ]
    )
    start = trio.current_time()
    result = await run_agent_loop(prompt(), ctx(sleeper("sleep", 0, log)), model, on_event=rec)
    assert trio.current_time() - start == pytest.approx(3)  # concurrent, not 6
    assert [e.call_id for e in rec.of(ToolExecutionStart)] == ["slow", "fast", "mid"]
    assert [e.call_id for e in rec.of(ToolExecutionEnd)] == ["fast", "mid", "slow"]
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [r.tool_call_id for r in results] == ["slow", "fast", "mid"]
    # trio does not promise the order in which started tasks first run; the events do.
    assert sorted(log[:3]) == ["start fast", "start mid", "start slow"]
    assert_consistent(result, rec.events, model.requests)


async def test_a_raising_tool_affects_only_its_own_result(autojump_clock: Any) -> None:
    async def boom(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:
        await trio.sleep(0.5)
        raise RuntimeError("disk on fire")

    rec = Recorder()
    model = ScriptedModel(
        [tool_use(call("ok1", "sleep"), call("bad", "boom"), call("ok2", "sleep")), reply()]
    )
    result = await run_agent_loop(
        prompt(), ctx(sleeper("sleep", 1), make_tool("boom", boom)), model, on_event=rec
    )
    by_id = {m.tool_call_id: m for m in result.messages if isinstance(m, ToolResultMessage)}
    assert by_id["bad"].is_error
    assert by_id["bad"].text == "disk on fire"
    assert not by_id["ok1"].is_error
    assert not by_id["ok2"].is_error
    assert {e.call_id: e.outcome for e in rec.of(ToolExecutionEnd)} == {
        "ok1": "ok",
        "bad": "error",
        "ok2": "ok",
    }
    assert result.reason == "stop"


async def test_unknown_tool_lists_available_names() -> None:
    rec = Recorder()
    model = ScriptedModel([tool_use(call("x", "nope")), reply()])
    result = await run_agent_loop(
        prompt(), ctx(make_tool("b"), make_tool("a")), model, on_event=rec
    )
    tr = result.messages[2]
    assert isinstance(tr, ToolResultMessage)
    assert tr.text == "Tool nope not found. Available tools: a, b"
    assert rec.of(ToolExecutionEnd)[0].outcome == "not_found"
    assert result.reason == "stop"


async def test_a_tool_returning_the_wrong_type_is_an_error_result() -> None:
    async def bad(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> Any:
        return 42

    result = await run_agent_loop(
        prompt(), ctx(make_tool("probe", bad)), ScriptedModel([tool_use(call("c")), reply()])
    )
    tr = result.messages[2]
    assert isinstance(tr, ToolResultMessage)
    assert tr.is_error
    assert "str or a ToolOutput" in tr.text


async def test_pre_abort_makes_no_request() -> None:
    model = readme_script()
    prompts = prompt()
    async with open_agent_loop(prompts, ctx(READ), model) as run:
        run.abort()
        types = [e.type async for e in run.events]
    assert types == ["agent_start", "agent_end"]
    assert run.result is not None
    assert (run.result.reason, run.result.steps) == ("aborted", 0)
    assert model.requests == []
    # the prompts never entered the transcript: they are reported, not lost
    assert (run.result.messages, run.result.undelivered) == ((), tuple(prompts))


async def test_abort_after_the_tool_batch_keeps_results_and_stops(autojump_clock: Any) -> None:
    model = readme_script()
    events = []
    async with open_agent_loop(prompt(), ctx(READ), model) as run:
        async for event in run.events:
            events.append(event)
            if event.type == "turn_end":
                run.abort()
    result = run.result
    assert result is not None
    assert (result.reason, result.steps) == ("aborted", 1)
    assert len(model.requests) == 1
    assert [m.role for m in result.messages] == ["user", "assistant", "tool_result"]
    tr = result.messages[2]
    assert isinstance(tr, ToolResultMessage)
    assert not tr.is_error
    assert_consistent(result, events, model.requests)


async def test_max_steps_ends_the_run_keeping_the_last_results() -> None:
    model = ScriptedModel(lambda req: tool_use(call(f"c{len(req.messages)}")) for _ in range(10))
    rec = Recorder()
    result = await run_agent_loop(
        prompt(), ctx(make_tool()), model, LoopConfig(max_steps=3), on_event=rec
    )
    assert (result.reason, result.steps) == ("max_steps", 3)
    assert len(model.requests) == 3
    assert isinstance(result.messages[-1], ToolResultMessage)
    assert_consistent(result, rec.events, model.requests)


async def test_default_max_steps_is_32() -> None:
    model = ScriptedModel(lambda req: tool_use(call(f"c{len(req.messages)}")) for _ in range(40))
    result = await run_agent_loop(prompt(), ctx(make_tool()), model)
    assert (result.reason, result.steps) == ("max_steps", 32)


async def test_events_are_immutable_snapshots() -> None:
    model = ScriptedModel([reply("abcdefghij")], chunk_size=2)
    rec = Recorder()
    await run_agent_loop(prompt(), ctx(), model, on_event=rec)
    texts = [u.message.text for u in rec.of(MessageUpdate)]
    assert texts == ["", "ab", "abcd", "abcdef", "abcdefgh", "abcdefghij", "abcdefghij"]
    # reading them again, later, gives the same thing
    assert [u.message.text for u in rec.of(MessageUpdate)] == texts


def test_snapshots_are_the_same_whenever_watching_starts() -> None:
    # Block events are queued until something needs the partial content: a snapshot
    # taken late (a subscriber that joins mid-reply) sees what one taken after every
    # event sees, and so does every later snapshot and the cut-short reply.
    events, partial = reply_cut_in_its_third_block()

    def watch(first: int) -> tuple[list[Any], Any]:
        acc = StreamAccumulator()
        shown = []
        for i, event in enumerate(events):
            if acc.feed(event) and i >= first:
                shown.append((i, acc.snapshot()))
        return [(i, s.materialize().content) for i, s in shown], acc.fail("cut").content

    always, cut = watch(0)
    assert always[-1] == (len(events) - 1, partial)
    assert cut == partial
    for first in range(2, len(events) + 1):
        late, late_cut = watch(first)
        assert late == [x for x in always if x[0] >= first]
        assert late_cut == partial


async def test_continue_from_context_without_prompts() -> None:
    history = [UserMessage.text("hi")]
    result = await run_agent_loop([], ctx(messages=history), ScriptedModel([reply()]))
    assert (result.reason, [m.role for m in result.messages]) == ("stop", ["assistant"])


@pytest.mark.parametrize(
    "history", [[], [UserMessage.text("hi"), AssistantMessage(content=(), stop_reason="stop")]]
)
async def test_nothing_to_continue_from_is_a_usage_error(history: list[Any]) -> None:
    with pytest.raises(AgentUsageError, match="nothing to continue from"):
        await run_agent_loop([], ctx(messages=history), ScriptedModel([reply()]))


async def test_custom_messages_are_kept_but_not_sent() -> None:
    model = ScriptedModel([reply()])
    note = CustomMessage(kind="note", content={"x": 1})
    result = await run_agent_loop([note, UserMessage.text("hi")], ctx(), model)
    assert result.messages[0] == note
    assert [m.role for m in model.requests[0].messages] == ["user"]


async def test_model_running_out_of_script_is_an_error_reply() -> None:
    result = await run_agent_loop(prompt(), ctx(make_tool()), ScriptedModel([tool_use(call("a"))]))
    assert result.reason == "error"
    assert result.error_message is not None
    assert "no response left" in result.error_message


async def test_text_and_tool_call_content_reaches_the_transcript() -> None:
    result = await run_agent_loop(prompt(), ctx(READ), readme_script())
    first = result.messages[1]
    assert isinstance(first, AssistantMessage)
    assert first.content[0] == Text(text="Let me read it.")
    assert first.tool_calls == (call("call-1", "read", path="README.md"),)
