"""A run's state, kept by its turn machine (``_core._turn``): its lifecycle (moved only
by ``abort`` and the closing), the interrupt (one state, by phase), and the rule that no
change to the state awaits (so a cancel never stops one half-way)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.kit.loop import Recorder, assert_consistent, call, ctx, prompt, reply, sleeper, tool_use
from trio_agent import LoopConfig, ToolResultMessage, open_agent_loop
from trio_agent._run._runner import Runner
from trio_agent._run._stream import StreamAccumulator
from trio_agent.testing import ScriptedModel

SRC = Path(__file__).resolve().parent.parent.parent / "src" / "trio_agent"


def _runner() -> Runner:
    return Runner(prompt(), ctx(), ScriptedModel([reply()]), LoopConfig())


async def test_a_run_starts_running() -> None:
    m = _runner().m
    assert (m.lifecycle, m.ended, m.abort_reason) == ("running", False, None)
    assert (m.phase, m.interrupt) == ("between", "none")


async def test_abort_then_close() -> None:
    run = _runner()
    m = run.m
    run.abort("first")
    assert (m.lifecycle, m.ended, m.abort_reason) == ("aborting", False, "first")
    assert run.scope is not None
    assert run.scope.cancel_called
    run.abort("second")  # the first abort's reason stands
    assert (m.lifecycle, m.abort_reason) == ("aborting", "first")
    run._close("aborted")
    assert (m.lifecycle, m.ended) == ("aborted", True)
    assert run.result is not None
    assert run.result.reason == "aborted"
    assert run.interrupt() is False


async def test_close_then_abort() -> None:
    run = _runner()
    m = run.m
    run._close("stop")
    assert run.scope is not None
    assert (m.lifecycle, m.ended, run.scope.cancel_called) == ("ended", True, False)
    result = run.result
    # An abort after the end changes nothing in the result, but is known: the closing
    # delivery is bounded by it (here no delivery runs yet: the run's scope is cancelled).
    run.abort("late")
    assert (m.lifecycle, m.ended, m.abort_reason) == ("aborted", True, None)
    assert run.scope.cancel_called
    assert run.result is result
    run._close("error")  # closing twice changes nothing
    assert m.lifecycle == "aborted"
    assert run.result is result
    assert run.interrupt() is False


@pytest.mark.parametrize("first", ["close", "abort"])
async def test_every_path_ends_in_one_state(first: str) -> None:
    run = _runner()
    if first == "close":
        run._close("stop")
    else:
        run.abort()
    assert run.ended is (first == "close")
    run.abort()
    run._close("aborted")
    run.abort()
    assert (run.m.lifecycle, run.ended) == ("aborted", True)


async def test_the_interrupt_is_one_state_by_phase() -> None:
    # What an interrupt does depends only on the turn's phase: kept for later when
    # nothing can be cut; the reply or batch in flight cut (the scope cancelled) — once.
    run = _runner()
    m = run.m
    assert run.scope is not None
    assert run.interrupt() is True  # before anything runs
    assert (m.interrupt, run.scope.cancel_called) == ("pending", False)
    assert m.next() == "start"
    assert m.next() == "check_abort"
    assert m.next() == "turn"
    assert m.interrupt == "none"  # the first steering poll's place (no hook) ended it
    assert run.interrupt() is True
    assert (m.interrupt, run.scope.cancel_called) == ("pending", False)
    m.open_turn()
    assert m.takes_steering_first()  # the request takes the steering queue first
    assert m.steering_polled() is False  # no steering hook: the interrupt is over
    assert (m.interrupt, m.takes_steering_first()) == ("none", False)
    m.start_reply(m.llm_view, StreamAccumulator())
    assert run.interrupt() is True
    assert (m.interrupt, run.scope.cancel_called) == ("cutting", True)
    run.scope = trio.CancelScope()  # as the runner resumes after the cut
    assert run.interrupt() is True  # the cut is under way: nothing more to do
    assert (m.interrupt, run.scope.cancel_called) == ("cutting", False)
    assert m.next() == "end_cut_turn"
    m.end_reply()
    assert (m.phase, m.interrupt) == ("replied", "none")
    assert m.turn_message is not None
    assert m.turn_message.stop_reason == "aborted"  # kept, cut
    run.abort("told to")
    assert run.interrupt() is False  # aborting: nothing to interrupt
    assert m.interrupt == "none"


async def test_an_interrupt_after_an_abort_changes_nothing(autojump_clock: Any) -> None:
    # The abort's grace lets the running call finish: an interrupt then neither cuts it
    # short nor makes the run's unfinished calls "interrupted" — the run is ending, by
    # the abort.
    model = ScriptedModel([tool_use(call("a", "sleep", s=1), call("b", "sleep", s=100)), reply()])
    async with open_agent_loop(prompt(), ctx(sleeper("sleep", 0)), model, buffer=100) as run:
        await trio.sleep(0.5)
        run.abort("told to", grace=2)
        assert run.interrupt() is False
        events = [e async for e in run.events]
    result = run.result
    assert result is not None
    assert trio.current_time() == pytest.approx(2.5)  # the grace ran out
    by_id = {m.tool_call_id: m for m in result.messages if isinstance(m, ToolResultMessage)}
    assert not by_id["a"].is_error
    assert by_id["b"].text == "Tool call aborted: told to."
    assert result.reason == "aborted"
    assert_consistent(result, events, model.requests)


async def test_the_first_abort_reason_names_the_aborted_calls(autojump_clock: Any) -> None:
    log: list[str] = []
    model = ScriptedModel([tool_use(call("slow", "sleep", s=100)), reply()])
    rec = Recorder()
    async with open_agent_loop(prompt(), ctx(sleeper("sleep", 0, log)), model) as run:
        async for event in run.events:
            rec(event)
            if event.type == "tool_execution_start":
                run.abort("first reason")
                run.abort("second reason")
    result = run.result
    assert result is not None
    assert result.reason == "aborted"
    [slow] = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert slow.is_error
    assert slow.text == "Tool call aborted: first reason."
    assert_consistent(result, rec.events, model.requests)


def test_no_change_to_the_run_state_awaits() -> None:
    """The pairing invariant rests on it: ``close`` must find the state whole whatever
    checkpoint a cancel hit, so every change to the state runs without a checkpoint —
    the turn machine never awaits and never imports trio."""
    tree = ast.parse((SRC / "_core" / "_turn.py").read_text())
    awaits = [
        f"line {node.lineno}: {type(node).__name__}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Await | ast.AsyncFunctionDef | ast.AsyncFor | ast.AsyncWith)
    ]
    assert awaits == []
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "trio" not in imported
    assert any(
        isinstance(node, ast.ClassDef) and node.name == "TurnMachine" for node in ast.walk(tree)
    )


async def test_the_runner_holds_no_state_of_the_run() -> None:
    # The run's state is its machine's; the runner holds the trio side only.
    assert set(Runner.__slots__) == {"m", "probe", "scope", "sink", "token"}
    assert not hasattr(_runner(), "__dict__")
