"""The in-process approver: it answers a call that would be deferred while the run
waits; within ``approval_timeout``, or the call is deferred; an abort or a cancel while
it waits leaves a paired transcript."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import trio

from trio_agent import (
    Approve,
    DeferredCall,
    Deny,
    LoopConfig,
    Result,
    check_transcript,
    open_agent,
    open_agent_loop,
    run_agent_loop,
)
from trio_agent.testing import ScriptedModel

from ..kit.loop import Recorder, call, ctx, prompt, reply, results_of, text_of, tool_use
from .test_deferral import Counted, check

if TYPE_CHECKING:
    from trio_agent import CallDecision


def gated_pair() -> tuple[Counted, Any, Any]:
    counted = Counted()
    return counted, counted.tool("gated", approval="always"), counted.tool("free")


@pytest.mark.parametrize(
    ("answer", "ran", "text"),
    [
        (Approve(), ["g"], "gated g n=None"),
        (Approve({"n": "5"}), ["g"], "gated g n=5"),
        (Deny("not today"), [], "not today"),
        (Result("done by hand"), [], "done by hand"),
    ],
)
async def test_the_approver_answers_while_the_run_waits(
    answer: CallDecision, ran: list[str], text: str
) -> None:
    counted, gated, _ = gated_pair()
    asked: list[DeferredCall] = []

    async def approver(waiting: DeferredCall) -> CallDecision:
        asked.append(waiting)
        await trio.lowlevel.checkpoint()
        return answer

    model = ScriptedModel([tool_use(call("g", "gated")), reply("ok")])
    rec = Recorder()
    config = LoopConfig(approver=approver)
    result = await run_agent_loop(prompt(), ctx(gated), model, config, on_event=rec)
    assert result.reason == "stop"
    assert [a.id for a in asked] == ["g"]
    assert counted.ran == ran
    assert text_of(results_of(result.transcript)["g"]) == text
    check(result, rec, model, ctx(messages=()))


async def test_no_answer_within_the_timeout_defers_the_call(autojump_clock: Any) -> None:
    counted, gated, free = gated_pair()

    async def slow(waiting: DeferredCall) -> CallDecision:
        await trio.sleep(3600)
        return Approve()

    async def undecided(waiting: DeferredCall) -> None:
        await trio.lowlevel.checkpoint()

    for approver in (slow, undecided):
        model = ScriptedModel([tool_use(call("g", "gated"), call("f", "free"))])
        config = LoopConfig(approver=approver, approval_timeout=30)
        start = trio.current_time()
        result = await run_agent_loop(prompt(), ctx(gated, free), model, config)
        assert result.reason == "deferred"
        assert [d.id for d in result.deferred] == ["g"]
        assert trio.current_time() - start <= 30
    assert counted.ran == ["f", "f"]


async def test_an_approver_that_raises_fails_only_that_call() -> None:
    counted, gated, free = gated_pair()

    async def broken(waiting: DeferredCall) -> CallDecision:
        raise RuntimeError("approval service down")

    model = ScriptedModel([tool_use(call("g", "gated"), call("f", "free")), reply()])
    result = await run_agent_loop(prompt(), ctx(gated, free), model, LoopConfig(approver=broken))
    assert result.reason == "stop"
    r = results_of(result.transcript)["g"]
    assert r.is_error
    assert text_of(r) == "approver failed: approval service down"
    assert counted.ran == ["f"]


@pytest.mark.parametrize("how", ["abort", "outer_cancel"])
async def test_abort_or_cancel_while_the_approver_waits_pairs_the_transcript(
    how: str, autojump_clock: Any
) -> None:
    counted, gated, free = gated_pair()
    waiting = trio.Event()

    async def approver(call_: DeferredCall) -> CallDecision:
        waiting.set()
        await trio.sleep_forever()
        return Approve()

    model = ScriptedModel([tool_use(call("f", "free"), call("g", "gated"), call("h", "free"))])
    config = LoopConfig(approver=approver, tool_execution="sequential")
    rec = Recorder()
    if how == "abort":
        async with open_agent_loop(prompt(), ctx(gated, free), model, config) as run:
            async with trio.open_nursery() as nursery:

                async def drain() -> None:
                    async for event in run.events:
                        rec(event)

                nursery.start_soon(drain)
                await waiting.wait()
                run.abort("stop waiting")
        result = run.result
        assert result is not None
        assert result.reason == "aborted"
        check(result, rec, model, ctx(messages=()), tool_execution="sequential")
    else:
        with trio.move_on_after(60) as scope:
            async with open_agent_loop(
                prompt(), ctx(gated, free), model, config, on_event=rec
            ) as run:
                async for _ in run.events:
                    pass
        assert scope.cancelled_caught
        result = run.result
        assert result is not None
        assert result.reason == "aborted"
    check_transcript(result.transcript)
    assert result.deferred == ()
    results = results_of(result.transcript)
    assert list(results) == ["f", "g", "h"]
    assert "aborted" in text_of(results["g"])
    assert counted.ran == ["f"]
    assert model.request_count == 1


async def test_agent_resume_answers_its_own_deferral() -> None:
    counted, gated, free = gated_pair()
    model = ScriptedModel([tool_use(call("g", "gated"), call("f", "free")), reply("mailed")])
    async with open_agent(model=model, tools=(gated, free)) as agent:
        first = await agent.prompt("mail ops")
        assert first.reason == "deferred"
        assert [d.id for d in agent.deferred] == ["g"]
        check_transcript(agent.state.messages, waiting={"g", "f"})
        with pytest.raises(Exception, match="no decision"):
            await agent.resume({})
        assert not agent.state.is_running
        second = await agent.resume({"g": Approve()})
        assert second.reason == "stop"
        assert agent.deferred == ()
        check_transcript(agent.state.messages)
        assert counted.ran == ["f", "g"]
        with pytest.raises(Exception, match="nothing to resume"):
            await agent.resume({"g": Approve()})


async def test_agent_resume_from_a_loaded_transcript(tmp_path: Any) -> None:
    from trio_agent import JsonlTranscript, load_transcript

    counted, gated, free = gated_pair()
    path = tmp_path / "run.jsonl"
    model = ScriptedModel([tool_use(call("g", "gated"), call("f", "free"))])
    async with JsonlTranscript(path) as transcript:
        first = await run_agent_loop(prompt(), ctx(gated, free), model, on_event=transcript)
    assert first.reason == "deferred"
    loaded = await trio.to_thread.run_sync(load_transcript, path)
    async with open_agent(model=ScriptedModel([reply("ok")]), tools=(gated, free)) as agent:
        with pytest.raises(Exception, match="no deferred call has the id 'x'"):
            await agent.resume({"g": Approve(), "x": Approve()}, transcript=loaded)
        assert agent.state.messages == ()
        done = await agent.resume({"g": Deny("no")}, transcript=loaded)
        assert done.reason == "stop"
        check_transcript(agent.state.messages)
        assert text_of(results_of(agent.state.messages)["g"]) == "no"
    assert counted.ran == ["f"]
