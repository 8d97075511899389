"""pi's production layers around the core: hooks, terminate, sequential mode, concurrency
limits, progress, streaming updates, context shaping, queues, turn hooks (what none of
them may break: docs/guarantees.md, "Errors never lose the transcript" and
"Cancellation")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import trio

from tests.kit.loop import (
    ANY_OBJECT,
    Recorder,
    assert_consistent,
    call,
    ctx,
    make_tool,
    prompt,
    reply,
    results_of,
    sleeper,
    tool_use,
)
from trio_agent import (
    AfterToolCallContext,
    AfterToolCallResult,
    AgentEnd,
    AssistantMessage,
    BeforeToolCallContext,
    BeforeToolCallResult,
    Context,
    CustomMessage,
    LoopConfig,
    Message,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ModelOptions,
    NextTurn,
    Text,
    TextDelta,
    ToolCall,
    ToolContext,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolOutput,
    ToolResultMessage,
    TurnContext,
    UserMessage,
    check_transcript,
    open_agent,
    open_agent_loop,
    run_agent_loop,
)
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

NUMBER_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
}


def no_updates(types: list[str]) -> list[str]:
    return [t for t in types if t != "message_update"]


# --- before_tool_call ---------------------------------------------------------------------


async def test_a_blocked_call_never_executes() -> None:
    executed: list[str] = []

    async def probe(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:
        await trio.lowlevel.checkpoint()
        executed.append(c.id)
        return "ran"

    async def before(bc: BeforeToolCallContext) -> BeforeToolCallResult | None:
        await trio.lowlevel.checkpoint()
        if bc.tool_call.id == "no":
            return BeforeToolCallResult(block=True)
        if bc.tool_call.id == "why":
            return BeforeToolCallResult(block=True, reason="not on Sundays")
        return None

    rec = Recorder()
    model = ScriptedModel([tool_use(call("no"), call("why"), call("yes")), reply()])
    result = await run_agent_loop(
        prompt(),
        ctx(make_tool("probe", probe)),
        model,
        LoopConfig(before_tool_call=before),
        on_event=rec,
    )
    assert executed == ["yes"]
    by_id = results_of(result.messages)
    assert by_id["no"].text == "Tool execution was blocked"
    assert by_id["why"].text == "not on Sundays"
    assert by_id["no"].is_error
    assert by_id["why"].is_error
    assert not by_id["yes"].is_error
    outcomes = {e.call_id: e.outcome for e in rec.of(ToolExecutionEnd)}
    assert outcomes == {"no": "blocked", "why": "blocked", "yes": "ok"}
    assert_consistent(result, rec.events, model.requests)


async def test_replaced_arguments_are_validated_again() -> None:
    seen: list[Any] = []

    async def probe(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:
        await trio.lowlevel.checkpoint()
        seen.append(dict(args))
        return "ok"

    def before(bc: BeforeToolCallContext) -> BeforeToolCallResult:
        assert bc.args == {"n": 1}
        assert bc.context.messages[-1] is bc.assistant_message  # the conversation so far
        return BeforeToolCallResult(args={"n": 2} if bc.tool_call.id == "good" else {"n": "x"})

    rec = Recorder()
    model = ScriptedModel([tool_use(call("good", n=1), call("bad", n=1)), reply()])
    result = await run_agent_loop(
        prompt(),
        ctx(make_tool("probe", probe, parameters=NUMBER_SCHEMA)),
        model,
        LoopConfig(before_tool_call=before),
        on_event=rec,
    )
    assert seen == [{"n": 2}]
    bad = results_of(result.messages)["bad"]
    assert bad.is_error
    assert bad.text.startswith('Validation failed for tool "probe":')
    assert {e.call_id: e.outcome for e in rec.of(ToolExecutionEnd)}["bad"] == "invalid_arguments"


async def test_a_raising_before_hook_fails_only_that_call() -> None:
    def before(bc: BeforeToolCallContext) -> None:
        if bc.tool_call.id == "a":
            raise RuntimeError("policy server down")

    rec = Recorder()
    result = await run_agent_loop(
        prompt(),
        ctx(make_tool()),
        ScriptedModel([tool_use(call("a"), call("b")), reply()]),
        LoopConfig(before_tool_call=before),
        on_event=rec,
    )
    by_id = results_of(result.messages)
    assert by_id["a"].is_error
    assert "policy server down" in by_id["a"].text
    assert not by_id["b"].is_error
    assert {e.call_id: e.outcome for e in rec.of(ToolExecutionEnd)} == {"a": "error", "b": "ok"}
    assert result.reason == "stop"


async def test_invalid_arguments_give_pi_style_error_text() -> None:
    model = ScriptedModel([tool_use(call("a", n="many", extra=1)), reply()])
    result = await run_agent_loop(
        prompt(), ctx(make_tool("probe", parameters=NUMBER_SCHEMA)), model
    )
    text = results_of(result.messages)["a"].text
    lines = text.splitlines()
    assert lines[0] == 'Validation failed for tool "probe":'
    assert lines[1].startswith("  - n: ")
    assert "Received arguments" in text
    assert '"many"' in text


# --- after_tool_call ----------------------------------------------------------------------


async def test_after_hook_overrides_and_keeps_fields() -> None:
    seen: list[tuple[str, bool, Any]] = []

    async def probe(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> ToolOutput:
        await trio.lowlevel.checkpoint()
        if c.id == "raises":
            raise ValueError("nope")
        return ToolOutput(content="original", details={"d": 1})

    def after(ac: AfterToolCallContext) -> AfterToolCallResult | None:
        seen.append((ac.tool_call.id, ac.is_error, ac.result.content))
        if ac.tool_call.id == "content":
            return AfterToolCallResult(content="rewritten")
        if ac.tool_call.id == "error":
            return AfterToolCallResult(is_error=True, details={"why": "policy"})
        if ac.tool_call.id == "raises":
            return AfterToolCallResult(is_error=False, content="recovered")
        return None

    rec = Recorder()
    model = ScriptedModel(
        [tool_use(call("content"), call("error"), call("keep"), call("raises")), reply()]
    )
    result = await run_agent_loop(
        prompt(),
        ctx(make_tool("probe", probe)),
        model,
        LoopConfig(after_tool_call=after),
        on_event=rec,
    )
    by_id = results_of(result.messages)
    assert (by_id["content"].text, by_id["content"].details) == ("rewritten", {"d": 1})
    assert (by_id["error"].text, by_id["error"].is_error, by_id["error"].details) == (
        "original",
        True,
        {"why": "policy"},
    )
    assert (by_id["keep"].text, by_id["keep"].is_error) == ("original", False)
    assert (by_id["raises"].text, by_id["raises"].is_error) == ("recovered", False)
    assert ("raises", True, (Text(text="nope"),)) in seen
    outcomes = {e.call_id: e.outcome for e in rec.of(ToolExecutionEnd)}
    assert outcomes == {"content": "ok", "error": "error", "keep": "ok", "raises": "ok"}


async def test_after_hook_is_skipped_for_calls_that_never_executed(autojump_clock: Any) -> None:
    seen: list[str] = []

    def after(ac: AfterToolCallContext) -> None:
        seen.append(ac.tool_call.id)

    def before(bc: BeforeToolCallContext) -> BeforeToolCallResult | None:
        return BeforeToolCallResult(block=True) if bc.tool_call.id == "blocked" else None

    model = ScriptedModel(
        [
            tool_use(
                call("ran", "sleep", s=1),
                call("blocked", "sleep"),
                call("missing", "nope"),
                call("late", "sleep", s=100),
            ),
            reply(),
        ]
    )
    await run_agent_loop(
        prompt(),
        ctx(sleeper("sleep", 0)),
        model,
        LoopConfig(after_tool_call=after, before_tool_call=before, tool_timeout=5),
    )
    assert seen == ["ran"]


async def test_a_raising_after_hook_gives_an_error_result() -> None:
    def after(ac: AfterToolCallContext) -> None:
        raise RuntimeError("audit log full")

    rec = Recorder()
    result = await run_agent_loop(
        prompt(),
        ctx(make_tool()),
        ScriptedModel([tool_use(call("a")), reply()]),
        LoopConfig(after_tool_call=after),
        on_event=rec,
    )
    tr = results_of(result.messages)["a"]
    assert tr.is_error
    assert "audit log full" in tr.text
    assert rec.of(ToolExecutionEnd)[0].outcome == "error"


# --- terminate ----------------------------------------------------------------------------


def terminating(names: set[str]) -> Any:
    async def execute(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> ToolOutput:
        await trio.lowlevel.checkpoint()
        return ToolOutput(content="done", terminate=c.id in names)

    return make_tool("probe", execute)


async def test_every_result_terminating_ends_the_run() -> None:
    model = ScriptedModel([tool_use(call("a"), call("b")), reply()])
    result = await run_agent_loop(prompt(), ctx(terminating({"a", "b"})), model)
    assert (result.reason, result.steps) == ("terminated", 1)


async def test_a_partial_terminate_goes_on() -> None:
    model = ScriptedModel([tool_use(call("a"), call("b")), reply()])
    result = await run_agent_loop(prompt(), ctx(terminating({"a"})), model)
    assert (result.reason, result.steps) == ("stop", 2)


async def test_terminate_from_hooks() -> None:
    def before(bc: BeforeToolCallContext) -> BeforeToolCallResult:
        return BeforeToolCallResult(block=True, terminate=True)

    model = ScriptedModel([tool_use(call("a")), reply()])
    result = await run_agent_loop(
        prompt(), ctx(make_tool()), model, LoopConfig(before_tool_call=before)
    )
    assert (result.reason, result.steps) == ("terminated", 1)

    def after(ac: AfterToolCallContext) -> AfterToolCallResult:
        return AfterToolCallResult(terminate=True)

    model = ScriptedModel([tool_use(call("a")), reply()])
    result = await run_agent_loop(
        prompt(), ctx(make_tool()), model, LoopConfig(after_tool_call=after)
    )
    assert (result.reason, result.steps) == ("terminated", 1)


async def test_terminate_with_a_queued_message_goes_on() -> None:
    queue = [UserMessage.text("one more thing")]

    def follow_ups() -> list[Message]:
        out = list(queue)
        queue.clear()
        return out

    model = ScriptedModel([tool_use(call("a")), reply()])
    result = await run_agent_loop(
        prompt(), ctx(terminating({"a"})), model, LoopConfig(get_follow_up_messages=follow_ups)
    )
    assert (result.reason, result.steps) == ("stop", 2)
    assert isinstance(result.messages[3], UserMessage)


# --- sequential and limited batches -------------------------------------------------------


async def test_sequential_config_runs_one_call_at_a_time(autojump_clock: Any) -> None:
    log: list[str] = []
    rec = Recorder()
    model = ScriptedModel([tool_use(call("a", "sleep", s=2), call("b", "sleep", s=1)), reply()])
    start = trio.current_time()
    result = await run_agent_loop(
        prompt(),
        ctx(sleeper("sleep", 0, log)),
        model,
        LoopConfig(tool_execution="sequential"),
        on_event=rec,
    )
    assert trio.current_time() - start == pytest.approx(3)
    assert log == ["start a", "end a", "finally a", "start b", "end b", "finally b"]
    kinds = [
        (e.type, e.call_id)
        for e in rec.events
        if isinstance(e, ToolExecutionStart | ToolExecutionEnd)
    ]
    assert kinds == [
        ("tool_execution_start", "a"),
        ("tool_execution_end", "a"),
        ("tool_execution_start", "b"),
        ("tool_execution_end", "b"),
    ]
    assert result.turns[0].peak_concurrency == 1


def _batch_order(events: Sequence[Any]) -> list[str]:
    """The batch's tool and result-message events, as ``start a``, ``end a``, ``msg a``..."""
    out = []
    for e in events:
        if isinstance(e, ToolExecutionStart):
            out.append(f"start {e.call_id}")
        elif isinstance(e, ToolExecutionEnd):
            out.append(f"end {e.call_id}")
        elif isinstance(e, MessageStart) and isinstance(e.message, ToolResultMessage):
            out.append(f"msg {e.message.tool_call_id}")
        elif isinstance(e, MessageEnd) and isinstance(e.message, ToolResultMessage):
            out[-1] += " done"  # the MessageEnd follows its MessageStart at once
    return out


async def test_sequential_results_are_appended_as_each_call_settles(
    autojump_clock: Any,
) -> None:
    # pi's order: each call is finalized — its result message included — before the
    # next starts. A call stopped in preparation (unknown tool, invalid arguments) too.
    seen_by_b: list[list[str]] = []
    run_ref: list[Any] = []

    async def peek(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:
        # What the transcript holds while this call runs.
        seen_by_b.append(
            [m.tool_call_id for m in run_ref[0].messages if isinstance(m, ToolResultMessage)]
        )
        await trio.sleep(1)
        return "peeked"

    model = ScriptedModel(
        [
            tool_use(
                call("a", "sleep", s=1),
                call("x", "missing"),
                call("b", "peek"),
                call("c", "sleep", s="not a number"),
            ),
            reply(),
        ]
    )
    rec = Recorder()
    tools = ctx(sleeper("sleep", 0), make_tool("peek", peek, parameters=ANY_OBJECT))
    async with open_agent_loop(
        prompt(), tools, model, LoopConfig(tool_execution="sequential")
    ) as run:
        run_ref.append(run)
        async for event in run.events:
            rec(event)
    assert _batch_order(rec.events) == [
        "start a",
        "end a",
        "msg a done",
        "start x",
        "end x",
        "msg x done",
        "start b",
        "end b",
        "msg b done",
        "start c",
        "end c",
        "msg c done",
    ]
    assert seen_by_b == [["a", "x"]]
    result = run.result
    assert result is not None
    results = [m.tool_call_id for m in result.messages if isinstance(m, ToolResultMessage)]
    assert results == ["a", "x", "b", "c"]
    (turn_end,) = [e for e in rec.events if e.type == "turn_end"][:1]
    assert [r.tool_call_id for r in turn_end.tool_results] == ["a", "x", "b", "c"]
    assert_consistent(result, rec.events, model.requests, tool_execution="sequential")


async def test_parallel_results_still_wait_for_the_whole_batch(autojump_clock: Any) -> None:
    model = ScriptedModel([tool_use(call("a", "sleep", s=2), call("b", "sleep", s=1)), reply()])
    rec = Recorder()
    await run_agent_loop(prompt(), ctx(sleeper("sleep", 0)), model, on_event=rec)
    assert _batch_order(rec.events) == [
        "start a",
        "start b",
        "end b",
        "end a",
        "msg a done",
        "msg b done",
    ]


SEQUENTIAL_ORDER = [
    "start a",
    "end a",
    "msg a done",
    "start b",
    "end b",
    "msg b done",
    "start c",
    "end c",
    "msg c done",
]
"""pi's order for a sequential batch of calls a, b, c — whatever stops it part-way: each
call's result message right after its end, before the next call starts."""


def _three_sleeps() -> ScriptedModel:
    # b is the call running when the batch is stopped (at t = 1..11).
    return ScriptedModel(
        [
            tool_use(call("a", "sleep", s=1), call("b", "sleep", s=10), call("c", "sleep", s=1)),
            reply(),
        ]
    )


async def test_an_abort_mid_sequential_batch_keeps_the_appended_results(
    autojump_clock: Any,
) -> None:
    model = _three_sleeps()
    rec = Recorder()
    async with open_agent_loop(
        prompt(), ctx(sleeper("sleep", 0)), model, LoopConfig(tool_execution="sequential")
    ) as run:
        async for event in run.events:
            rec(event)
            if isinstance(event, ToolExecutionStart) and event.call_id == "b":
                run.abort("enough")
    result = run.result
    assert result is not None
    assert result.reason == "aborted"
    # The aborted call is finalized (its result message) before the skipped c starts.
    assert _batch_order(rec.events) == SEQUENTIAL_ORDER
    outcomes = [(e.call_id, e.outcome) for e in rec.of(ToolExecutionEnd)]
    assert outcomes == [("a", "ok"), ("b", "aborted"), ("c", "aborted")]
    texts = [m.text for m in result.messages if isinstance(m, ToolResultMessage)]
    assert texts == ["a slept", "Tool call aborted: enough.", "Tool call aborted: enough."]
    assert_consistent(result, rec.events, model.requests, tool_execution="sequential")


async def test_an_outer_cancel_mid_sequential_batch_keeps_pis_order(
    autojump_clock: Any,
) -> None:
    model = _three_sleeps()
    rec = Recorder()
    with trio.move_on_after(5) as deadline:  # b is running
        await run_agent_loop(
            prompt(),
            ctx(sleeper("sleep", 0)),
            model,
            LoopConfig(tool_execution="sequential"),
            on_event=rec,
        )
    assert deadline.cancelled_caught
    assert _batch_order(rec.events) == SEQUENTIAL_ORDER
    outcomes = [(e.call_id, e.outcome) for e in rec.of(ToolExecutionEnd)]
    assert outcomes == [("a", "ok"), ("b", "aborted"), ("c", "aborted")]
    (end,) = rec.of(AgentEnd)
    assert end.reason == "aborted"
    ended = [e.message for e in rec.events if isinstance(e, MessageEnd)]
    assert ended == list(end.messages)
    check_transcript([*prompt(), *end.messages])


async def test_an_interrupt_mid_sequential_batch_keeps_pis_order(autojump_clock: Any) -> None:
    model = _three_sleeps()
    rec = Recorder()
    async with open_agent(
        model, tools=[sleeper("sleep", 0)], config=LoopConfig(tool_execution="sequential")
    ) as agent:
        async with agent.subscribe() as events, trio.open_nursery() as nursery:

            async def watch() -> None:
                async for event in events:
                    rec(event)
                    if isinstance(event, ToolExecutionStart) and event.call_id == "b":
                        agent.steer("stop that", interrupt=True)
                    if isinstance(event, AgentEnd):
                        return

            nursery.start_soon(watch)
            with trio.fail_after(100):
                result = await agent.prompt("go")
    assert result.reason == "stop"
    assert _batch_order(rec.events) == SEQUENTIAL_ORDER
    outcomes = [(e.call_id, e.outcome) for e in rec.of(ToolExecutionEnd)]
    assert outcomes == [("a", "ok"), ("b", "skipped"), ("c", "skipped")]
    # The run went on with the steering message, after the batch's results.
    assert [m.role for m in model.requests[1].messages][-4:] == [
        "tool_result",
        "tool_result",
        "tool_result",
        "user",
    ]
    assert_consistent(result, rec.events, model.requests, tool_execution="sequential")


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_skipped_calls_follow_the_batch_order_of_their_mode(mode: Any) -> None:
    # A reply whose calls never run (here: cut by the length limit) gets a skipped result
    # per call, in the order a batch of that mode would give them.
    model = ScriptedModel([reply("cut", "length", call("a", "sleep"), call("b", "sleep"))])
    rec = Recorder()
    result = await run_agent_loop(
        prompt(), ctx(sleeper("sleep", 0)), model, LoopConfig(tool_execution=mode), on_event=rec
    )
    assert result.reason == "length"
    if mode == "sequential":
        assert _batch_order(rec.events) == SEQUENTIAL_ORDER[:6]
    else:
        assert _batch_order(rec.events) == [
            "start a",
            "end a",
            "start b",
            "end b",
            "msg a done",
            "msg b done",
        ]
    assert_consistent(result, rec.events, model.requests, tool_execution=mode)


async def test_one_sequential_tool_makes_a_mixed_batch_serial(autojump_clock: Any) -> None:
    log: list[str] = []
    par = sleeper("par", 1, log)
    seq_tool = sleeper("seq", 1, log)
    seq = make_tool("seq", seq_tool.execute, execution_mode="sequential")
    model = ScriptedModel(
        [tool_use(call("p1", "par"), call("s", "seq"), call("p2", "par")), reply()]
    )
    start = trio.current_time()
    await run_agent_loop(prompt(), ctx(par, seq), model)
    assert trio.current_time() - start == pytest.approx(3)
    assert [x for x in log if x.startswith("start")] == ["start p1", "start s", "start p2"]


async def test_max_concurrency_bounds_a_parallel_batch(autojump_clock: Any) -> None:
    model = ScriptedModel([tool_use(*(call(f"c{i}", "sleep", s=1) for i in range(5))), reply()])
    start = trio.current_time()
    result = await run_agent_loop(
        prompt(), ctx(sleeper("sleep", 0)), model, LoopConfig(max_concurrency=2)
    )
    assert trio.current_time() - start == pytest.approx(3)
    stats = result.turns[0]
    assert stats.peak_concurrency == 2
    assert stats.waited_on_limit == pytest.approx(0 + 0 + 1 + 1 + 2)
    assert stats.critical_path == pytest.approx(1)
    assert stats.total_call_time == pytest.approx(5)
    assert stats.wall_time == pytest.approx(3)


# --- progress -----------------------------------------------------------------------------


async def test_progress_is_ordered_per_call_and_never_after_its_end(autojump_clock: Any) -> None:
    kept: list[ToolContext] = []

    async def chatty(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:
        kept.append(tc)
        for i in range(3):
            await tc.report_progress(f"{c.id}:{i}")
            await trio.sleep(float(args["s"]))
        return "done"

    async def late(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:
        await trio.sleep(10)
        await kept[0].report_progress("too late")  # the first call finished long ago
        return "late done"

    rec = Recorder()
    model = ScriptedModel(
        [tool_use(call("a", "chatty", s=1), call("b", "chatty", s=0.5), call("z", "late")), reply()]
    )
    await run_agent_loop(
        prompt(), ctx(make_tool("chatty", chatty), make_tool("late", late)), model, on_event=rec
    )
    per_call: dict[str, list[str]] = {}
    ended: set[str] = set()
    for e in rec.events:
        if isinstance(e, ToolExecutionUpdate):
            assert e.call_id not in ended, "update after end"
            per_call.setdefault(e.call_id, []).append(e.partial)
        elif isinstance(e, ToolExecutionEnd):
            ended.add(e.call_id)
    assert per_call == {"a": ["a:0", "a:1", "a:2"], "b": ["b:0", "b:1", "b:2"]}


async def test_progress_is_backpressured(autojump_clock: Any) -> None:
    async def chatty(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:
        for i in range(4):
            await tc.report_progress(i)
        return "done"

    async def slow_sink(event: Any) -> None:
        if event.type == "tool_execution_update":
            await trio.sleep(1)

    start = trio.current_time()
    await run_agent_loop(
        prompt(),
        ctx(make_tool("chatty", chatty)),
        ScriptedModel([tool_use(call("a", "chatty")), reply()]),
        on_event=slow_sink,
    )
    assert trio.current_time() - start == pytest.approx(4)


# --- streaming ----------------------------------------------------------------------------


async def test_streaming_updates_one_per_block_event_with_snapshots() -> None:
    model = ScriptedModel([tool_use(call("a", x=1), text="hey you")], chunk_size=3)
    rec = Recorder()
    await run_agent_loop(prompt(), ctx(make_tool()), model, LoopConfig(max_steps=1), on_event=rec)
    updates = rec.of(MessageUpdate)
    assert [u.event.type for u in updates] == [
        "text_start",
        "text_delta",
        "text_delta",
        "text_delta",
        "text_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
    ]
    assert [u.message.text for u in updates[:5]] == ["", "hey", "hey yo", "hey you", "hey you"]
    assert updates[5].message.tool_calls == (ToolCall(id="a", name="probe", arguments={}),)
    assert updates[-1].message.tool_calls == (call("a", x=1),)
    deltas = [u.event.delta for u in updates if isinstance(u.event, TextDelta)]
    assert deltas == ["hey", " yo", "u"]


# --- context shaping ----------------------------------------------------------------------


async def test_transform_and_convert_apply_to_each_request_only() -> None:
    note = CustomMessage(kind="note", content="remember the milk")

    async def transform(messages: Sequence[Message]) -> list[Message]:
        await trio.lowlevel.checkpoint()
        return [
            m for m in messages if not (isinstance(m, UserMessage) and m.content[0].text == "old")
        ]  # type: ignore[union-attr]

    def convert(messages: Sequence[Message]) -> list[Message]:
        return [
            UserMessage.text(f"[note] {m.content}") if isinstance(m, CustomMessage) else m
            for m in messages
        ]

    model = ScriptedModel([tool_use(call("a")), reply()])
    context = ctx(make_tool(), messages=[UserMessage.text("old")])
    result = await run_agent_loop(
        [note, UserMessage.text("new")],
        context,
        model,
        LoopConfig(transform_context=transform, convert_to_llm=convert),
    )
    for request in model.requests:
        texts = [m.content[0].text for m in request.messages if isinstance(m, UserMessage)]  # type: ignore[union-attr]
        assert texts == ["[note] remember the milk", "new"]
    assert result.transcript[0] == UserMessage.text("old", timestamp=result.transcript[0].timestamp)
    assert note in result.transcript


async def test_default_conversion_drops_custom_messages() -> None:
    model = ScriptedModel([reply()])
    await run_agent_loop([CustomMessage(kind="ui"), UserMessage.text("hi")], ctx(), model)
    assert [m.role for m in model.requests[0].messages] == ["user"]


# --- steering and follow-up ---------------------------------------------------------------


async def test_steering_arriving_during_a_batch_is_injected_after_it(autojump_clock: Any) -> None:
    queue: list[Message] = []
    steer = UserMessage.text("skip tests/")

    async def slow(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:
        await trio.sleep(1)
        if c.id == "a":
            queue.append(steer)  # the user types while the batch runs
        await trio.sleep(1)
        return "done"

    def poll() -> list[Message]:
        out = list(queue)
        queue.clear()
        return out

    rec = Recorder()
    model = ScriptedModel([tool_use(call("a", "slow"), call("b", "slow")), reply()])
    result = await run_agent_loop(
        prompt(),
        ctx(make_tool("slow", slow)),
        model,
        LoopConfig(get_steering_messages=poll),
        on_event=rec,
    )
    roles = [
        (e.type, e.message.role if isinstance(e, MessageStart | MessageEnd) else None)
        for e in rec.events
        if e.type != "message_update"
    ]
    assert roles == [
        ("agent_start", None),
        ("turn_start", None),
        ("message_start", "user"),
        ("message_end", "user"),
        ("message_start", "assistant"),
        ("message_end", "assistant"),
        ("tool_execution_start", None),
        ("tool_execution_start", None),
        ("tool_execution_end", None),
        ("tool_execution_end", None),
        ("message_start", "tool_result"),
        ("message_end", "tool_result"),
        ("message_start", "tool_result"),
        ("message_end", "tool_result"),
        ("turn_end", None),
        ("turn_start", None),
        ("message_start", "user"),  # the steering message, after the whole batch
        ("message_end", "user"),
        ("message_start", "assistant"),
        ("message_end", "assistant"),
        ("turn_end", None),
        ("agent_end", None),
    ]
    assert steer in model.requests[1].messages
    assert model.requests[1].messages[-1] == steer
    assert_consistent(result, rec.events, model.requests)


async def test_follow_up_extends_a_finished_run() -> None:
    follow = [UserMessage.text("now fix it")]

    def poll() -> list[Message]:
        out = list(follow)
        follow.clear()
        return out

    rec = Recorder()
    model = ScriptedModel([reply("found 2 bugs"), reply("fixed")])
    result = await run_agent_loop(
        prompt(), ctx(), model, LoopConfig(get_follow_up_messages=poll), on_event=rec
    )
    assert (result.reason, result.steps) == ("stop", 2)
    assert no_updates(rec.types()) == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "turn_end",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]


async def test_steering_before_the_first_request_joins_the_prompt() -> None:
    queue: list[Message] = [UserMessage.text("also this")]

    def poll() -> list[Message]:
        out = list(queue)
        queue.clear()
        return out

    model = ScriptedModel([reply()])
    result = await run_agent_loop(
        prompt("first"), ctx(), model, LoopConfig(get_steering_messages=poll)
    )
    assert [m.content[0].text for m in model.requests[0].messages] == ["first", "also this"]  # type: ignore[union-attr]
    assert result.steps == 1


# --- turn hooks ---------------------------------------------------------------------------


async def test_prepare_next_turn_swaps_the_system_prompt_and_options() -> None:
    seen: list[TurnContext] = []

    def prepare(tc: TurnContext) -> NextTurn:
        seen.append(tc)
        return NextTurn(
            context=Context(
                system_prompt="second prompt",
                messages=tc.context.messages,
                tools=tc.context.tools,
            ),
            options=ModelOptions(model="bigger"),
        )

    model = ScriptedModel([tool_use(call("a")), reply()])
    result = await run_agent_loop(
        prompt(),
        ctx(make_tool(), system_prompt="first prompt"),
        model,
        LoopConfig(prepare_next_turn=prepare),
    )
    assert [r.system_prompt for r in model.requests] == ["first prompt", "second prompt"]
    assert [r.options.model for r in model.requests] == [None, "bigger"]
    assert len(seen) == 1  # only when another request really happens
    assert [m.role for m in seen[0].new_messages] == ["user", "assistant", "tool_result"]
    assert result.reason == "stop"


async def test_prepare_next_turn_can_swap_the_model() -> None:
    other = ScriptedModel([reply("from the other model")])
    model = ScriptedModel([tool_use(call("a"))])
    result = await run_agent_loop(
        prompt(),
        ctx(make_tool()),
        model,
        LoopConfig(prepare_next_turn=lambda tc: NextTurn(model=other)),
    )
    assert (len(model.requests), len(other.requests)) == (1, 1)
    assert result.messages[-1].text == "from the other model"  # type: ignore[union-attr]


async def test_should_stop_after_turn_gives_one_request_and_leaves_queues() -> None:
    polls: list[str] = []

    def steering() -> list[Message]:
        polls.append("steer")
        return []

    def follow() -> list[Message]:
        polls.append("follow")
        return []

    model = ScriptedModel([tool_use(call("a")), reply()])
    result = await run_agent_loop(
        prompt(),
        ctx(make_tool()),
        model,
        LoopConfig(
            should_stop_after_turn=lambda tc: True,
            get_steering_messages=steering,
            get_follow_up_messages=follow,
        ),
    )
    assert (result.reason, result.steps, len(model.requests)) == ("stopped", 1, 1)
    assert polls == ["steer"]  # only the initial poll: none after the stop decision


async def test_max_steps_runs_no_hook_or_poll() -> None:
    calls: list[str] = []
    model = ScriptedModel([tool_use(call("a")), reply()])
    result = await run_agent_loop(
        prompt(),
        ctx(make_tool()),
        model,
        LoopConfig(
            max_steps=1,
            prepare_next_turn=lambda tc: calls.append("prepare"),  # type: ignore[func-returns-value]
        ),
    )
    assert (result.reason, calls) == ("max_steps", [])


# --- interrupt (what steer(interrupt=True) builds on) ----------------------------------------


def one_shot_queue(*messages: Message) -> Any:
    queue = list(messages)

    def poll() -> list[Message]:
        out = list(queue)
        queue.clear()
        return out

    return queue, poll


async def test_interrupt_during_a_batch_skips_unfinished_calls_and_goes_on(
    autojump_clock: Any,
) -> None:
    queue, poll = one_shot_queue()
    model = ScriptedModel(
        [tool_use(call("fast", "sleep", s=1), call("slow", "sleep", s=100)), reply("ok")]
    )
    async with open_agent_loop(
        prompt(), ctx(sleeper("sleep", 0)), model, LoopConfig(get_steering_messages=poll)
    ) as run:
        async for event in run.events:
            if isinstance(event, ToolExecutionEnd) and event.call_id == "fast":
                queue.append(UserMessage.text("change of plan"))
                assert run.interrupt()
    result = run.result
    assert result is not None
    by_id = results_of(result.messages)
    assert not by_id["fast"].is_error
    assert by_id["slow"].text == "Tool call skipped: interrupted by user."
    assert model.requests[1].messages[-1].content[0].text == "change of plan"  # type: ignore[union-attr]
    assert (result.reason, result.steps) == ("stop", 2)


async def test_interrupt_between_reply_and_batch_cancels_the_batch() -> None:
    queue, poll = one_shot_queue()
    executed: list[str] = []

    async def probe(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:
        await trio.lowlevel.checkpoint()
        executed.append(c.id)
        return "ran"

    model = ScriptedModel([tool_use(call("a")), reply()])
    events = []
    async with open_agent_loop(
        prompt(), ctx(make_tool("probe", probe)), model, LoopConfig(get_steering_messages=poll)
    ) as run:
        async for event in run.events:
            events.append(event)
            if isinstance(event, MessageEnd) and event.message.role == "assistant":
                if run.steps == 1:
                    queue.append(UserMessage.text("stop that"))
                    assert run.interrupt()  # no stream, no batch yet: kept until the batch
    result = run.result
    assert result is not None
    assert executed == []
    assert results_of(result.messages)["a"].text == "Tool call skipped: interrupted by user."
    assert [e.outcome for e in events if isinstance(e, ToolExecutionEnd)] == ["skipped"]
    assert (result.reason, result.steps) == ("stop", 2)
    assert_consistent(result, events, model.requests)


async def test_interrupt_during_a_stream_keeps_the_partial_reply(autojump_clock: Any) -> None:
    queue, poll = one_shot_queue()
    model = ScriptedModel([tool_use(call("a"), text="long answer"), reply("new")], chunk_size=2)
    pause = model.pause_at(0, 3)
    wait = UserMessage.text("wait")
    async with open_agent_loop(
        prompt(), ctx(make_tool()), model, LoopConfig(get_steering_messages=poll), buffer=100
    ) as run:
        await pause.reached.wait()
        queue.append(wait)
        assert run.interrupt()
        pause.release()
        events = [e async for e in run.events]
    result = run.result
    assert result is not None
    first = result.messages[1]
    assert isinstance(first, AssistantMessage)
    assert (first.stop_reason, first.text, first.tool_calls) == ("aborted", "lo", ())
    assert result.messages[2] == wait
    assert (result.reason, result.steps) == ("stop", 2)
    assert_consistent(result, events, model.requests)


async def test_a_run_interrupted_again_and_again_goes_on_and_can_still_be_aborted(
    autojump_clock: Any,
) -> None:
    """An interrupt cuts a batch, a later one a streaming reply; each time the run goes
    on with what the steering poll brings, and an abort with grace still stops it."""
    queue, poll = one_shot_queue()
    model = ScriptedModel(
        [
            tool_use(call("a", "sleep", s=100)),
            tool_use(call("b", "sleep", s=1), text="long answer"),
            tool_use(call("c", "sleep", s=100)),
            reply("never"),
        ],
        chunk_size=2,
    )
    pause = model.pause_at(1, 3)
    events: list[Any] = []
    async with (
        open_agent_loop(
            prompt(), ctx(sleeper("sleep", 0)), model, LoopConfig(get_steering_messages=poll)
        ) as run,
        trio.open_nursery() as nursery,
    ):

        async def cut_the_stream() -> None:
            await pause.reached.wait()
            queue.append(UserMessage.text("second"))
            assert run.interrupt()
            pause.release()

        nursery.start_soon(cut_the_stream)
        async for event in run.events:
            events.append(event)
            if isinstance(event, ToolExecutionStart) and event.call_id == "a":
                queue.append(UserMessage.text("first"))
                assert run.interrupt()
            if isinstance(event, ToolExecutionStart) and event.call_id == "c":
                run.abort("enough", grace=1)
    result = run.result
    assert result is not None
    assert (result.reason, result.steps) == ("aborted", 3)
    by_id = results_of(result.messages)
    assert by_id["a"].text == "Tool call skipped: interrupted by user."
    replies = [m for m in result.messages if isinstance(m, AssistantMessage)]
    assert [r.stop_reason for r in replies] == ["tool_use", "aborted", "tool_use"]
    assert replies[1].tool_calls == ()  # cut before its call finished streaming
    assert by_id["c"].text == "Tool call aborted: enough."
    texts = [m.content[0].text for m in result.messages if isinstance(m, UserMessage)]  # type: ignore[union-attr]
    assert texts == ["go", "first", "second"]
    assert trio.current_time() < 50  # neither 100 s sleep ran to its end
    assert_consistent(result, events, model.requests)


async def test_an_interrupt_on_a_batchs_last_end_event_answers_each_call_once() -> None:
    """The consumer interrupts as it receives the ToolExecutionEnd of a batch's last
    call: the batch is over by the time the run next checks for a cancel. Each call
    keeps its one result (none skipped a second time) and the run goes on."""
    queue, poll = one_shot_queue()

    async def quick(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> str:  # noqa: ASYNC124
        return f"done {c.id}"

    model = ScriptedModel([tool_use(call("a"), call("b"), call("c")), reply("ok")])
    events: list[Any] = []
    async with open_agent_loop(
        prompt(), ctx(make_tool("probe", quick)), model, LoopConfig(get_steering_messages=poll)
    ) as run:
        async for event in run.events:
            events.append(event)
            ends = [e for e in events if isinstance(e, ToolExecutionEnd)]
            if isinstance(event, ToolExecutionEnd) and len(ends) == 3:
                queue.append(UserMessage.text("and now"))
                assert run.interrupt()
    result = run.result
    assert result is not None
    results = [m for m in result.messages if m.role == "tool_result"]
    assert sorted(r.tool_call_id for r in results) == ["a", "b", "c"]  # type: ignore[union-attr]
    assert all(r.text == f"done {r.tool_call_id}" for r in results)  # type: ignore[union-attr]
    assert (result.reason, result.steps) == ("stop", 2)
    assert model.requests[1].messages[-1].content[0].text == "and now"  # type: ignore[union-attr]
    assert_consistent(result, events, model.requests)


async def test_an_interrupt_on_a_replys_end_event_skips_its_calls_once() -> None:
    """The consumer interrupts as it receives the end of a reply that asks for calls:
    the reply is over, its batch not started — the calls are skipped, once each."""
    queue, poll = one_shot_queue()
    model = ScriptedModel([tool_use(call("a"), call("b")), reply("ok")])
    events: list[Any] = []
    async with open_agent_loop(
        prompt(), ctx(make_tool()), model, LoopConfig(get_steering_messages=poll)
    ) as run:
        async for event in run.events:
            events.append(event)
            if isinstance(event, MessageUpdate) and event.event.type == "toolcall_end":
                if event.message.tool_calls and len(event.message.tool_calls) == 2:
                    queue.append(UserMessage.text("not those"))
                    assert run.interrupt()
    result = run.result
    assert result is not None
    results = [m for m in result.messages if m.role == "tool_result"]
    assert [r.tool_call_id for r in results] == ["a", "b"]  # type: ignore[union-attr]
    assert {r.text for r in results} == {"Tool call skipped: interrupted by user."}  # type: ignore[union-attr]
    assert (result.reason, result.steps) == ("stop", 2)
    assert_consistent(result, events, model.requests)


async def test_interrupt_without_a_steering_hook_does_not_hang() -> None:
    model = ScriptedModel([tool_use(call("a")), reply()])
    with trio.fail_after(5):
        async with open_agent_loop(prompt(), ctx(make_tool()), model) as run:
            assert run.interrupt()  # before anything runs
            events = [e async for e in run.events]
    assert run.result is not None
    assert (run.result.reason, run.result.steps) == ("stop", 2)
    assert_consistent(run.result, events, model.requests)


async def test_a_tool_can_fail_with_details() -> None:
    async def fails(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> ToolOutput:
        await trio.lowlevel.checkpoint()
        return ToolOutput(content="exit code 2", details={"exit_code": 2}, is_error=True)

    rec = Recorder()
    result = await run_agent_loop(
        prompt(),
        ctx(make_tool("probe", fails)),
        ScriptedModel([tool_use(call("a")), reply()]),
        on_event=rec,
    )
    tr = results_of(result.messages)["a"]
    assert (tr.is_error, tr.details, tr.text) == (True, {"exit_code": 2}, "exit code 2")
    assert rec.of(ToolExecutionEnd)[0].outcome == "error"


async def test_a_swapped_context_becomes_the_transcript() -> None:
    summary = UserMessage.text("summary of the earlier conversation")

    def compact(tc: TurnContext) -> NextTurn:
        # keep a summary instead of the history, plus this turn's reply and results
        tail = tc.context.messages[-2:]
        return NextTurn(context=Context(messages=(summary, *tail), tools=tc.context.tools))

    model = ScriptedModel([tool_use(call("a")), reply()])
    history = [UserMessage.text("old question"), reply("old answer")]
    result = await run_agent_loop(
        prompt(),
        ctx(make_tool(), messages=history),
        model,
        LoopConfig(prepare_next_turn=compact),
    )
    assert model.requests[1].messages[0] == summary
    assert len(model.requests[1].messages) == 3
    assert result.transcript[0] == summary
    assert [m.role for m in result.transcript] == ["user", "assistant", "tool_result", "assistant"]
    # `messages` still lists everything this run appended, in order
    assert [m.role for m in result.messages] == ["user", "assistant", "tool_result", "assistant"]
    check_transcript(result.transcript)
