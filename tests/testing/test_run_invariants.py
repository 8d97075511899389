"""The test kit itself: scripts drive real runs, and the invariant checker catches each
kind of broken run (it is only worth something if it can fail)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import attrs
import pytest
import trio
import trio.testing

from trio_agent import (
    AgentEnd,
    AssistantMessage,
    MessageEnd,
    MessageStart,
    ModelRequest,
    Text,
    ToolCall,
    ToolExecutionEnd,
    ToolExecutionUpdate,
    ToolResultMessage,
    UserMessage,
)
from trio_agent.testing import (
    AbortScript,
    Arrival,
    CallScript,
    HookFailure,
    InterruptScript,
    ReplyScript,
    Script,
    ScriptRun,
    assert_run_invariants,
    run_invariant_violations,
)
from trio_agent.testing._invariants import distinct_calls_view

if TYPE_CHECKING:
    from trio.testing import MockClock

    from trio_agent.testing._script_values import RunHook

BATCH = Script(
    replies=(
        ReplyScript(
            stop_reason="tool_use",
            text="Let me see.",
            calls=(
                CallScript(id="a", latency=0.5, progress=2),
                CallScript(id="b", tool="missing"),
                CallScript(id="c", behaviour="fail", latency=0.1),
            ),
        ),
        ReplyScript(stop_reason="stop", text="Done!"),
    ),
    arrivals=(Arrival(at=0.2, queue="steer", text="steer 0"),),
    chunk_size=4,
)


async def run_of(script: Script) -> ScriptRun:
    with trio.fail_after(100):
        return await script.run()


def tags(run: ScriptRun, **changes: object) -> set[str]:
    """The invariant tags reported for ``run`` with some of its parts replaced."""
    parts: dict[str, object] = {
        "result": run.result,
        "events": run.events,
        "requests": run.requests,
        "context_before": run.context_before,
        "prompts": run.prompts,
        "polled": run.polled,
        "max_steps": run.script.max_steps,
        "requests_at_abort": run.requests_at_abort,
    }
    parts.update(changes)
    found = run_invariant_violations(
        parts.pop("result"),  # type: ignore[arg-type]
        parts.pop("events"),  # type: ignore[arg-type]
        parts.pop("requests"),  # type: ignore[arg-type]
        parts.pop("context_before"),  # type: ignore[arg-type]
        **parts,  # type: ignore[arg-type]
    )
    return {line.split("]")[0] + "]" for line in found}


# --- scripts drive real runs ---------------------------------------------------------


async def test_a_healthy_script_keeps_every_invariant(autojump_clock: MockClock) -> None:
    run = await run_of(BATCH)
    run.check()
    assert run.result.reason == "stop"
    assert run.result.steps == 2
    outcomes = {e.call_id: e.outcome for e in run.events if isinstance(e, ToolExecutionEnd)}
    assert outcomes == {"a": "ok", "b": "not_found", "c": "error"}
    updates = [e for e in run.events if isinstance(e, ToolExecutionUpdate)]
    assert [u.partial for u in updates] == [{"done": 1, "of": 2}, {"done": 2, "of": 2}]
    # The steering message arrived mid-batch and went into the second request.
    assert [m.role for m in run.requests[1].messages][-4:] == [
        "tool_result",
        "tool_result",
        "tool_result",
        "user",
    ]
    assert run.polled == run.arrived["steer"]
    assert run.request_times == (0.0, 0.5)
    assert not run.leaked_tasks
    assert not run.unfinished_tools
    assert_run_invariants(run.result, run.events, run.requests, run.context_before)


async def test_abort_at_an_event_makes_no_further_request(autojump_clock: MockClock) -> None:
    # Event 5 is the first MessageUpdate of the first reply: the stream is cut.
    run = await run_of(attrs.evolve(BATCH, abort=AbortScript(after_event=5)))
    run.check()
    assert run.result.reason == "aborted"
    assert run.requests_at_abort == 1
    assert len(run.requests) == 1
    reply = run.result.messages[1]
    assert isinstance(reply, AssistantMessage)
    assert reply.stop_reason == "aborted"


async def test_a_hanging_tool_ends_by_timeout_abort_or_deadline(autojump_clock: MockClock) -> None:
    hang = Script(
        replies=(
            ReplyScript(stop_reason="tool_use", calls=(CallScript(id="h", behaviour="hang"),)),
        ),
        tool_timeout=1.0,
    )
    timed_out = await run_of(hang)
    timed_out.check()
    assert [e.outcome for e in timed_out.events if isinstance(e, ToolExecutionEnd)] == ["timed_out"]
    for changed in (
        attrs.evolve(hang, tool_timeout=None, abort=AbortScript(at_time=0.5)),
        attrs.evolve(hang, tool_timeout=None, deadline=0.5),
    ):
        run = await run_of(changed)
        run.check()
        assert run.result.reason == "aborted"
        assert [e.outcome for e in run.events if isinstance(e, ToolExecutionEnd)] == ["aborted"]
    assert run.outer_cancelled


async def test_call_hooks_block_fail_and_change_calls(autojump_clock: MockClock) -> None:
    calls = (
        CallScript(id="a", hook="block"),
        CallScript(id="b", hook="before_raises"),
        CallScript(id="c", hook="after_raises"),
        CallScript(id="d", hook="after_marks_error"),
        CallScript(id="e"),
    )
    script = Script(
        replies=(
            ReplyScript(stop_reason="tool_use", calls=calls),
            ReplyScript(stop_reason="stop"),
        )
    )
    run = await run_of(script)
    run.check()
    outcomes = {e.call_id: e.outcome for e in run.events if isinstance(e, ToolExecutionEnd)}
    assert outcomes == {"a": "blocked", "b": "error", "c": "error", "d": "error", "e": "ok"}
    blocked = CallScript(id="t", hook="block_terminate")
    terminating = attrs.evolve(
        script, replies=(ReplyScript(stop_reason="tool_use", calls=(blocked,)),)
    )
    run = await run_of(terminating)
    run.check()
    assert run.result.reason == "terminated"


@pytest.mark.parametrize(
    ("hook", "at"),
    [
        ("transform_context", 1),
        ("steering_poll", 1),
        ("follow_up_poll", 0),  # called once: when the model stops
        ("prepare_next_turn", 1),
        ("should_stop_after_turn", 1),
    ],
)
async def test_a_failing_run_hook_ends_the_run_with_agent_run_error(
    autojump_clock: MockClock, hook: RunHook, at: int
) -> None:
    # Two tool turns, so that every hook gets called at least twice.
    work = ReplyScript(stop_reason="tool_use", calls=(CallScript(id="x", latency=0.1),))
    again = ReplyScript(stop_reason="tool_use", calls=(CallScript(id="y", latency=0.1),))
    script = Script(
        replies=(work, again, ReplyScript(stop_reason="stop")),
        hook_failure=HookFailure(hook=hook, at=at),
    )
    run = await run_of(script)
    run.check()
    assert run.hook_failed
    assert run.error is not None
    assert run.result.reason == "error"
    assert "failed on purpose" in str(run.error.__cause__)


async def test_should_stop_after_turn_ends_the_run_stopped(autojump_clock: MockClock) -> None:
    work = ReplyScript(stop_reason="tool_use", calls=(CallScript(id="x"),))
    run = await run_of(Script(replies=(work, work), stop_after_turn=0))
    run.check()
    assert run.result.reason == "stopped"
    assert run.result.steps == 1


async def test_an_interrupt_cuts_the_batch_and_the_run_goes_on(autojump_clock: MockClock) -> None:
    slow = CallScript(id="slow", latency=1.0)
    quick = CallScript(id="quick", latency=0.1)
    script = attrs.evolve(
        BATCH,
        replies=(
            ReplyScript(stop_reason="tool_use", calls=(slow, quick)),
            ReplyScript(stop_reason="stop", text="Done!"),
        ),
        interrupts=(InterruptScript(at_time=0.5),),
    )
    run = await run_of(script)
    run.check()
    assert run.interrupted == 1
    outcomes = {e.call_id: e.outcome for e in run.events if isinstance(e, ToolExecutionEnd)}
    assert outcomes == {"slow": "skipped", "quick": "ok"}
    assert run.result.reason == "stop"
    assert run.result.steps == 2


async def test_callback_driver(autojump_clock: MockClock) -> None:
    run = await run_of(attrs.evolve(BATCH, driver="callback"))
    run.check()
    assert run.result.reason == "stop"


def test_script_values_refuse_impossible_combinations() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        AbortScript()
    with pytest.raises(ValueError, match="exactly one"):
        AbortScript(after_event=1, at_time=1.0)
    with pytest.raises(ValueError, match="exactly one"):
        InterruptScript()
    with pytest.raises(ValueError, match="callback driver"):
        Script(driver="callback", deadline=1.0)
    with pytest.raises(ValueError, match="callback driver"):
        Script(driver="callback", interrupts=(InterruptScript(at_time=0.1),))


def test_a_script_reads_as_a_scenario() -> None:
    script = attrs.evolve(
        BATCH,
        max_steps=3,
        tool_timeout=2.0,
        abort=AbortScript(after_event=7, grace=0.1),
        deadline=1.5,
        replies=(
            *BATCH.replies[:1],
            ReplyScript(
                stop_reason="tool_use",
                latency=0.25,
                fault="truncated",
                calls=(
                    CallScript(id="d", valid_arguments=False),
                    CallScript(id="d", tool="serial"),
                ),
            ),
        ),
    )
    assert repr(script) == script.describe()
    assert script.describe() == textwrap.dedent(
        """\
        Script:
          prompt 'go'
          config: max_steps=3, tool_timeout=2, chunk_size=4
          reply 0: tool_use, text 'Let me see.'
            call a work: latency 0.5s, 2 progress updates, then answers
            call b missing (unknown tool)
            call c work: latency 0.1s, then raises
          reply 1: tool_use, streams for 0.25s, stream ends without Done
            call d work with invalid arguments
            call d again  <- duplicate id
          (then the model has no reply left: request 2 errors)
          at t=0.2s: steering message 'steer 0' queued
          abort when the consumer receives event 7, grace 0.1s
          outer deadline at t=1.5s"""
    )


# --- the checker catches broken runs ----------------------------------------------------


@pytest.fixture(scope="module")
def good() -> ScriptRun:
    """One healthy run, shared: each test below breaks a copy of one of its parts."""
    run = trio.run(run_of, BATCH, clock=trio.testing.MockClock(autojump_threshold=0))
    assert run.violations() == []
    return run


def test_pairing_is_checked_at_the_end_and_in_every_request(good: ScriptRun) -> None:
    transcript = [m for m in good.result.transcript if not isinstance(m, ToolResultMessage)]
    result = attrs.evolve(good.result, transcript=tuple(transcript))
    assert "[1 pairing]" in tags(good, result=result)

    unpaired = ModelRequest(system_prompt="", messages=tuple(transcript))
    assert "[1 pairing]" in tags(good, requests=(good.requests[0], unpaired))


def test_the_event_stream_shape_is_checked(good: ScriptRun) -> None:
    events = list(good.events)
    assert "[2 events]" in tags(good, events=events[:-1])  # no AgentEnd
    assert "[2 events]" in tags(good, events=[*events, events[-1]])  # two
    assert "[2 events]" in tags(good, events=[*events[:-1], events[5], events[-1]])
    # A MessageEnd dropped: the MessageEnd events are no longer result.messages.
    first_end = next(i for i, e in enumerate(events) if isinstance(e, MessageEnd))
    assert "[2 events]" in tags(good, events=events[:first_end] + events[first_end + 1 :])
    wrong_end = AgentEnd(reason="error", messages=good.result.messages)
    assert "[2 events]" in tags(good, events=[*events[:-1], wrong_end])


def test_a_changed_context_is_caught(good: ScriptRun) -> None:
    touched = attrs.evolve(good.context, messages=(UserMessage.text("sneaked in", timestamp=0.0),))
    assert run_invariant_violations(
        good.result, good.events, good.requests, good.context_before, context=touched
    ) == ["[3 context] the caller's context messages changed during the run"]
    assert "[3 context]" in tags(good, context_before=touched)


def test_steps_and_requests_after_an_abort_are_checked(good: ScriptRun) -> None:
    assert "[4 steps]" in tags(good, requests_at_abort=1)
    assert "[4 steps]" in tags(good, max_steps=1)
    assert "[4 steps]" in tags(good, requests=good.requests[:1])


def test_per_call_event_order_is_checked(good: ScriptRun) -> None:
    events = list(good.events)
    end = next(i for i, e in enumerate(events) if isinstance(e, ToolExecutionEnd))
    late = ToolExecutionUpdate(call_id=events[end].call_id, tool_name="work", partial=None)  # type: ignore[union-attr]
    assert "[5 call events]" in tags(good, events=[*events[: end + 1], late, *events[end + 1 :]])
    assert "[5 call events]" in tags(good, events=events[:end] + events[end + 1 :])
    stray = ToolExecutionUpdate(call_id="nobody", tool_name="work", partial=None)
    assert "[5 call events]" in tags(good, events=[*events[: end + 1], stray, *events[end + 1 :]])


def test_a_duration_that_does_not_fit_the_outcome_is_caught(good: ScriptRun) -> None:
    assert tags(good) == set()
    events = list(good.events)
    ends = {e.call_id: i for i, e in enumerate(events) if isinstance(e, ToolExecutionEnd)}
    ran, missing = ends["a"], ends["b"]  # an ok call, and a call to an unknown tool
    assert events[ran].duration == 0.5  # type: ignore[union-attr]
    assert events[missing].duration is None  # type: ignore[union-attr]
    # (An ok call without a duration is not caught: a decision may give a call its result
    # without the tool running.)
    for i, duration in ((missing, 1.0), (ran, -1.0)):
        changed = list(events)
        changed[i] = attrs.evolve(events[i], duration=duration)  # type: ignore[misc]
        assert "[5 call events]" in tags(good, events=changed), duration


def test_an_end_after_a_parallel_batchs_result_messages_is_caught(good: ScriptRun) -> None:
    # In a parallel batch every call started before the result messages: an end that
    # comes after them is out of place. (A sequential batch starts its next call after
    # the previous result message; its ends may follow result messages.)
    events = list(good.events)
    first_result = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, MessageStart) and isinstance(e.message, ToolResultMessage)
    )
    end = max(i for i, e in enumerate(events[:first_result]) if isinstance(e, ToolExecutionEnd))
    moved = events[:end] + events[end + 1 : first_result + 1] + [events[end]]
    moved += events[first_result + 1 :]
    assert any(
        "ToolExecutionEnd after the batch's result messages began" in v
        for v in run_invariant_violations(good.result, moved, good.requests, good.context_before)
    )


async def test_a_sequential_batch_keeps_the_call_event_invariants(
    autojump_clock: MockClock,
) -> None:
    script = attrs.evolve(BATCH, tool_execution="sequential")
    run = await run_of(script)
    assert run.violations() == []
    kinds = [
        type(e).__name__
        for e in run.events
        if isinstance(e, ToolExecutionEnd)
        or (isinstance(e, MessageStart) and isinstance(e.message, ToolResultMessage))
    ]
    assert kinds[:4] == ["ToolExecutionEnd", "MessageStart"] * 2  # interleaved
    # The parallel order (every result message after the batch) is caught here.
    events = list(run.events)
    first_end = next(i for i, e in enumerate(events) if isinstance(e, ToolExecutionEnd))
    message_start, message_end = events[first_end + 1 : first_end + 3]
    turn_end = next(i for i, e in enumerate(events) if e.type == "turn_end")
    late = [
        *events[: first_end + 1],
        *events[first_end + 3 : turn_end],
        message_start,
        message_end,
        *events[turn_end:],
    ]
    assert any(
        "its result message does not follow its ToolExecutionEnd" in v
        for v in attrs.evolve(run, events=tuple(late)).violations()
    )


@pytest.mark.parametrize("stop", ["abort", "interrupt", "deadline"])
async def test_a_stopped_sequential_batch_finalizes_each_call_in_turn(
    autojump_clock: MockClock, stop: str
) -> None:
    # Stopped while b runs (t = 1): b and c get stop results, each followed at once by
    # its result message, as a call that settled is (pi's sequential order).
    calls = (
        CallScript(id="a", tool="serial", latency=0.5),
        CallScript(id="b", tool="serial", latency=5.0),
        CallScript(id="c", tool="serial", latency=0.5),
    )
    script = attrs.evolve(
        BATCH,
        replies=(
            ReplyScript(stop_reason="tool_use", calls=calls),
            ReplyScript(stop_reason="stop", text="Done!"),
        ),
        arrivals=(),
        abort=AbortScript(at_time=1.0) if stop == "abort" else None,
        interrupts=(InterruptScript(at_time=1.0),) if stop == "interrupt" else (),
        deadline=1.0 if stop == "deadline" else None,
    )
    run = await run_of(script)
    assert run.violations() == []
    outcomes = [(e.call_id, e.outcome) for e in run.events if isinstance(e, ToolExecutionEnd)]
    stopped = "skipped" if stop == "interrupt" else "aborted"
    assert outcomes == [("a", "ok"), ("b", stopped), ("c", stopped)]
    # b's result message moved after c's events (the order a parallel batch's stop
    # results take) is caught.
    events = list(run.events)
    end_b, end_c = (
        i
        for i, e in enumerate(events)
        if isinstance(e, ToolExecutionEnd) and e.call_id in ("b", "c")
    )
    message_b = events[end_b + 1 : end_b + 3]
    assert [type(e) for e in message_b] == [MessageStart, MessageEnd]
    late = [*events[: end_b + 1], *events[end_b + 3 : end_c + 1], *message_b]
    late += events[end_c + 1 :]
    found = attrs.evolve(run, events=tuple(late)).violations()
    assert any(
        "call 'b' (" + stopped + ") in sequential mode: its result message does not follow" in v
        for v in found
    ), found


def test_lost_or_reordered_queued_messages_are_caught(good: ScriptRun) -> None:
    ghost = UserMessage.text("never delivered", timestamp=0.0)
    assert "[6 queues]" in tags(good, polled=(*good.polled, ghost))
    other = UserMessage.text("polled first", timestamp=0.0)
    result = attrs.evolve(good.result, undelivered=(other,))
    assert "[6 queues]" in tags(good, result=result)


def test_a_transcript_that_does_not_survive_json_is_caught(good: ScriptRun) -> None:
    odd = ToolResultMessage(
        tool_call_id="x", tool_name="t", content=(Text(text="?"),), details={"nan": float("nan")}
    )
    call = AssistantMessage(
        content=(ToolCall(id="x", name="t", arguments={}),), stop_reason="tool_use"
    )
    result = attrs.evolve(good.result, transcript=(*good.result.transcript, call, odd))
    assert "[8 round trip]" in tags(good, result=result)


def test_assert_run_invariants_lists_every_breach(good: ScriptRun) -> None:
    with pytest.raises(AssertionError) as info:
        assert_run_invariants(
            good.result, good.events[:-1], good.requests, good.context_before, max_steps=1
        )
    text = str(info.value)
    assert text.startswith("2 run invariants broken:")
    assert "[2 events]" in text
    assert "[4 steps]" in text


def test_script_run_reports_leaks_and_open_streams(good: ScriptRun) -> None:
    leaky = attrs.evolve(good, leaked_tasks=("tool task",), unfinished_tools=("a",), open_streams=1)
    problems = leaky.violations()
    assert sum(p.startswith("[7 tasks]") for p in problems) == 3
    with pytest.raises(AssertionError, match=r"\[7 tasks\]"):
        leaky.check()


def test_duplicate_ids_are_excused_only_inside_one_message() -> None:
    twice = AssistantMessage(
        content=(
            ToolCall(id="a", name="t", arguments={}),
            Text(text="between"),
            ToolCall(id="a", name="t", arguments={"again": True}),
        ),
        stop_reason="tool_use",
        timestamp=0.0,
    )
    view = distinct_calls_view([twice])
    assert isinstance(view[0], AssistantMessage)
    assert [c.id for c in view[0].tool_calls] == ["a"]
    assert view[0].text == "between"
    plain = AssistantMessage(content=(Text(text="hi"),), stop_reason="stop", timestamp=0.0)
    assert distinct_calls_view([plain])[0] is plain


def test_the_kit_imports_without_hypothesis() -> None:
    # trio-agent demo and the benchmarks import trio_agent.testing; Hypothesis is only a
    # test dependency, loaded when a strategy is first called.
    code = textwrap.dedent(
        """
        import sys
        sys.modules["hypothesis"] = None  # as if it were not installed
        import trio_agent.testing as t
        assert t.ScriptedModel and t.Script and t.assert_run_invariants
        try:
            t.scripts()
        except ImportError as exc:
            print(exc)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert "needs Hypothesis" in out.stdout
