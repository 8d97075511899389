"""Deferred calls: a call that waits for a decision ends the run ``deferred`` once the
batch's other calls finished; ``resume`` answers it before the next request."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import trio

from trio_agent import (
    AgentRunResult,
    AgentUsageError,
    Approve,
    BeforeToolCallContext,
    Defer,
    Deny,
    JsonlTranscript,
    LoopConfig,
    RecordMarker,
    Result,
    Tool,
    ToolCall,
    ToolContext,
    ToolResultMessage,
    TranscriptError,
    check_transcript,
    load_transcript,
    repair,
    resume,
    run_agent_loop,
)
from trio_agent.testing import ScriptedModel, assert_run_invariants

from ..kit.loop import Recorder, call, ctx, make_tool, prompt, reply, results_of, text_of, tool_use

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

OBJ: Mapping[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}}


class Counted:
    """Tools that count each execution by call id."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def tool(self, name: str, **kwargs: Any) -> Tool:
        async def execute(c: ToolCall, args: Mapping[str, Any], _: ToolContext) -> str:
            await trio.lowlevel.checkpoint()
            self.ran.append(c.id)
            return f"{name} {c.id} n={args.get('n')}"

        return make_tool(name, execute, parameters=OBJ, **kwargs)


def check(
    result: AgentRunResult,
    rec: Recorder,
    model: ScriptedModel,
    before: Any,
    *,
    resumed_from: Any = None,
    tool_execution: Any = "parallel",
) -> None:
    assert_run_invariants(
        result,
        rec.events,
        model.requests,
        before,
        resumed_from=resumed_from,
        tool_execution=tool_execution,
    )


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_an_always_tool_defers_and_the_batch_siblings_run(mode: Any) -> None:
    counted = Counted()
    gated = counted.tool("gated", approval="always")
    free = counted.tool("free")
    model = ScriptedModel(
        [tool_use(call("a", "free", n=1), call("b", "gated", n="2"), call("c", "free", n=3))]
    )
    config = LoopConfig(tool_execution=mode)
    context = ctx(gated, free)
    rec = Recorder()
    result = await run_agent_loop(prompt(), context, model, config, on_event=rec)

    assert result.reason == "deferred"
    assert model.request_count == 1
    assert sorted(counted.ran) == ["a", "c"]
    (waiting,) = result.deferred
    assert (waiting.id, waiting.name, waiting.arguments) == ("b", "gated", {"n": 2})
    assert waiting.reason is None
    # Only the results declared before the deferred call are in the transcript; c's is
    # held back, so that b's comes before it once b is answered.
    assert list(results_of(result.transcript)) == ["a"]
    assert result.deferral is not None
    assert [r.tool_call_id for r in result.deferral.held] == ["c"]
    assert result.deferral.waiting_ids == {"b", "c"}
    with pytest.raises(TranscriptError):
        check_transcript(result.transcript)
    check_transcript(result.transcript, waiting=result.deferral.waiting_ids)
    check(result, rec, model, ctx(messages=()), tool_execution=mode)
    markers = rec.of(RecordMarker)
    assert [m.kind for m in markers] == ["deferral"]
    assert rec.events[-2] == markers[0]

    model.add(reply("all done"))
    rec2 = Recorder()
    resumed = await resume(
        result, {"b": Approve()}, model=model, tools=(gated, free), config=config, on_event=rec2
    )
    assert resumed.reason == "stop"
    assert sorted(counted.ran[:2]) == ["a", "c"]
    assert counted.ran[2:] == ["b"]
    check_transcript(resumed.transcript)
    assert [r.tool_call_id for r in results_of(resumed.transcript).values()] == ["a", "b", "c"]
    assert text_of(results_of(resumed.transcript)["b"]) == "gated b n=2"
    # The model saw every result before its second request.
    check_transcript(model.requests[1].messages)
    model.requests[:] = model.requests[1:]
    check(
        resumed,
        rec2,
        model,
        ctx(messages=result.transcript),
        resumed_from=result.deferral,
        tool_execution=mode,
    )
    assert [m.kind for m in rec2.of(RecordMarker)] == ["decisions"]


async def test_defer_from_before_tool_call_with_a_reason_and_deny() -> None:
    counted = Counted()
    probe = counted.tool("probe")

    def before(c: BeforeToolCallContext) -> Defer | None:
        return Defer(reason="costs money") if c.tool_call.id == "x" else None

    config = LoopConfig(before_tool_call=before)
    model = ScriptedModel([tool_use(call("x"), call("y")), reply("ok")])
    result = await run_agent_loop(prompt(), ctx(probe), model, config)
    assert result.reason == "deferred"
    assert [(d.id, d.reason) for d in result.deferred] == [("x", "costs money")]
    resumed = await resume(
        result, {"x": Deny("too expensive")}, model=model, tools=(probe,), config=config
    )
    assert counted.ran == ["y"]
    r = results_of(resumed.transcript)["x"]
    assert r.is_error
    assert text_of(r) == "too expensive"
    check_transcript(resumed.transcript)


async def test_a_given_result_is_used_as_it_is_and_edited_arguments_are_validated() -> None:
    counted = Counted()
    gated = counted.tool("gated", approval=lambda args: "big" if args.get("n", 0) > 5 else None)
    model = ScriptedModel(
        [tool_use(call("s", "gated", n=1), call("p", "gated", n=9), call("q", "gated", n=7))]
    )
    result = await run_agent_loop(prompt(), ctx(gated), model)
    assert [(d.id, d.reason) for d in result.deferred] == [("p", "big"), ("q", "big")]
    assert counted.ran == ["s"]
    model.add(reply("fine"))
    resumed = await resume(
        result,
        {"p": Result("given by hand", details={"by": "ops"}), "q": Approve(arguments={"n": "8"})},
        model=model,
        tools=(gated,),
    )
    results = results_of(resumed.transcript)
    assert text_of(results["p"]) == "given by hand"
    assert results["p"].details == {"by": "ops"}
    assert text_of(results["q"]) == "gated q n=8"
    assert counted.ran == ["s", "q"]

    # Edited arguments that do not validate: the call's result says so, nothing runs.
    model2 = ScriptedModel([tool_use(call("t", "gated", n=9)), reply("x")])
    again = await run_agent_loop(prompt(), ctx(gated), model2)
    done = await resume(
        again, {"t": Approve(arguments={"n": "lots"})}, model=model2, tools=(gated,)
    )
    assert results_of(done.transcript)["t"].is_error
    assert "Validation failed" in text_of(results_of(done.transcript)["t"])
    assert "t" not in counted.ran


async def test_bad_decisions_are_refused_before_anything_runs() -> None:
    counted = Counted()
    gated = counted.tool("gated", approval="always")
    free = counted.tool("free")
    model = ScriptedModel([tool_use(call("a", "gated"), call("b", "free"), call("c", "gated"))])
    result = await run_agent_loop(prompt(), ctx(gated, free), model)
    assert [d.id for d in result.deferred] == ["a", "c"]
    rec = Recorder()
    with pytest.raises(AgentUsageError) as err:
        await resume(
            result,
            {"a": Approve(), "b": Approve(), "zz": Deny()},
            model=model,
            tools=(gated, free),
            on_event=rec,
        )
    text = str(err.value)
    assert "'b' ran already" in text
    assert "no deferred call has the id 'zz'" in text
    assert "no decision for the deferred call(s) 'c'" in text
    with pytest.raises(TypeError, match="expected Approve"):
        await resume(result, {"a": "yes", "c": Approve()}, model=model, tools=(gated,))  # type: ignore[dict-item]
    assert rec.events == []
    assert counted.ran == ["b"]
    assert model.request_count == 1
    # The result of a run that did not defer is nothing to resume.
    with pytest.raises(AgentUsageError, match="not 'deferred'"):
        done = await run_agent_loop(prompt(), ctx(), ScriptedModel([reply()]))
        await resume(done, {}, model=model)


async def test_a_deferred_transcript_resumes_from_the_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    counted = Counted()
    gated = counted.tool("gated", approval="always")
    free = counted.tool("free")
    model = ScriptedModel([tool_use(call("a", "gated", n=4), call("b", "free"))])
    async with JsonlTranscript(path) as transcript:
        result = await run_agent_loop(prompt(), ctx(gated, free), model, on_event=transcript)
    assert result.reason == "deferred"

    loaded = await trio.to_thread.run_sync(load_transcript, path)
    assert loaded.waiting == {"a", "b"}
    check_transcript(loaded.messages, waiting=loaded.waiting)
    # repair leaves the waiting calls alone.
    assert repair(loaded.messages, waiting=loaded.waiting) == loaded.messages
    (marker,) = loaded.markers_of("deferral")
    assert marker.at == len(loaded.messages)

    model2 = ScriptedModel([reply("finished")])
    async with JsonlTranscript(path) as transcript:
        resumed = await resume(
            loaded, {"a": Approve()}, model=model2, tools=(gated, free), on_event=transcript
        )
    assert resumed.reason == "stop"
    assert counted.ran == ["b", "a"]
    final = await trio.to_thread.run_sync(load_transcript, path)
    check_transcript(final.messages)
    assert final.waiting == frozenset()
    assert [m.kind for m in final.markers] == ["deferral", "decisions"]
    assert final.messages == resumed.transcript
    with pytest.raises(AgentUsageError, match="nothing to resume"):
        await resume(final, {}, model=model2, tools=(gated,))


async def test_a_crash_after_the_decisions_marker_never_runs_the_call_twice(
    tmp_path: Path,
) -> None:
    """The decisions marker is on disk before an approved call runs: a resume that finds
    it without the call's result gives an interrupted result instead of running it."""
    path = tmp_path / "run.jsonl"
    counted = Counted()
    gated = counted.tool("gated", approval="always")
    model = ScriptedModel([tool_use(call("a", "gated"), call("d", "gated"))])
    async with JsonlTranscript(path) as transcript:
        await run_agent_loop(prompt(), ctx(gated), model, on_event=transcript)
    loaded = await trio.to_thread.run_sync(load_transcript, path)

    # A resume that stops (an outer cancel, standing in for a crash) while the approved
    # call runs: the marker was written first.
    started = trio.Event()

    async def hang(c: ToolCall, args: Mapping[str, Any], _: ToolContext) -> str:
        started.set()
        await trio.sleep_forever()
        return "never"

    hanging = make_tool("gated", hang, parameters=OBJ)
    async with JsonlTranscript(path) as transcript:
        with trio.move_on_after(5) as scope:
            async with trio.open_nursery() as nursery:

                async def run() -> None:
                    await resume(
                        loaded,
                        {"a": Approve(), "d": Deny("no")},
                        model=ScriptedModel(),
                        tools=(hanging,),
                        on_event=transcript,
                    )

                nursery.start_soon(run)
                await started.wait()
                nursery.cancel_scope.cancel()
        assert not scope.cancelled_caught
    # Drop what the cancelled run's clean-up appended, as a SIGKILL would have.
    crashed = await trio.to_thread.run_sync(load_transcript, path)
    decisions = crashed.markers_of("decisions")
    assert len(decisions) == 1
    from trio_agent import write_transcript

    cut = decisions[0].at
    await trio.to_thread.run_sync(
        lambda: write_transcript(path, crashed.messages[:cut], markers=crashed.markers)
    )
    after = await trio.to_thread.run_sync(load_transcript, path)
    assert after.waiting == {"a", "d"}
    # Deciding again is refused; nothing is left to decide, so resume with none.
    with pytest.raises(AgentUsageError, match="decided already"):
        await resume(after, {"a": Approve()}, model=ScriptedModel(), tools=(gated,))
    async with JsonlTranscript(path) as transcript:
        done = await resume(
            after, {}, model=ScriptedModel([reply("ok")]), tools=(gated,), on_event=transcript
        )
    results = results_of(done.transcript)
    assert results["a"].is_error
    assert "not run again" in text_of(results["a"])
    assert text_of(results["d"]) == "no"
    assert counted.ran == []  # never ran in this process either
    check_transcript(done.transcript)


async def test_an_abort_after_a_deferral_pairs_everything() -> None:
    """A deferred call's batch ended, then the run was stopped otherwise: the held
    results enter and the waiting call is skipped, in declaration order."""
    counted = Counted()
    gated = counted.tool("gated", approval="always")
    free = counted.tool("free")
    model = ScriptedModel([tool_use(call("a", "gated"), call("b", "free"))])

    def stop_at_turn_end(event: Any) -> None:
        if event.type == "turn_end":
            raise RuntimeError("sink fails")

    from trio_agent import AgentRunError

    with pytest.raises(AgentRunError) as err:
        await run_agent_loop(prompt(), ctx(gated, free), model, on_event=stop_at_turn_end)
    result = err.value.result
    assert result.reason == "error"
    assert result.deferred == ()
    check_transcript(result.transcript)
    assert [r.tool_call_id for r in results_of(result.transcript).values()] == ["a", "b"]
    assert text_of(results_of(result.transcript)["b"]) == "free b n=None"
    assert isinstance(results_of(result.transcript)["a"], ToolResultMessage)
