"""A run's state: its lifecycle (moved only by ``abort`` and the closing), and the rule that
no change to the state awaits (so a cancel never stops one half-way)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from tests.kit.loop import Recorder, assert_consistent, call, ctx, prompt, reply, sleeper, tool_use
from trio_agent import LoopConfig, ToolResultMessage, open_agent_loop
from trio_agent._run._run_state import RunState
from trio_agent.testing import ScriptedModel

SRC = Path(__file__).resolve().parent.parent.parent / "src" / "trio_agent"


def _state() -> RunState:
    return RunState(prompt(), ctx(), ScriptedModel([reply()]), LoopConfig())


async def test_a_run_starts_running() -> None:
    state = _state()
    assert (state.lifecycle, state.ended, state.abort_reason) == ("running", False, None)


async def test_abort_then_close() -> None:
    state = _state()
    state.abort("first")
    assert (state.lifecycle, state.ended, state.abort_reason) == ("aborting", False, "first")
    assert state.scope.cancel_called
    state.abort("second")  # the first abort's reason stands
    assert (state.lifecycle, state.abort_reason) == ("aborting", "first")
    state._close("aborted")
    assert (state.lifecycle, state.ended) == ("aborted", True)
    assert state.result is not None
    assert state.result.reason == "aborted"
    assert state.interrupt() is False


async def test_close_then_abort() -> None:
    state = _state()
    state._close("stop")
    assert (state.lifecycle, state.ended, state.scope.cancel_called) == ("ended", True, False)
    result = state.result
    # An abort after the end changes nothing in the result, but is known: the closing
    # delivery is bounded by it (here no delivery runs yet: the run's scope is cancelled).
    state.abort("late")
    assert (state.lifecycle, state.ended, state.abort_reason) == ("aborted", True, None)
    assert state.scope.cancel_called
    assert state.result is result
    state._close("error")  # closing twice changes nothing
    assert state.lifecycle == "aborted"
    assert state.result is result
    assert state.interrupt() is False


@pytest.mark.parametrize("first", ["close", "abort"])
async def test_every_path_ends_in_one_state(first: str) -> None:
    state = _state()
    if first == "close":
        state._close("stop")
    else:
        state.abort()
    assert state.ended is (first == "close")
    state.abort()
    state._close("aborted")
    state.abort()
    assert (state.lifecycle, state.ended) == ("aborted", True)


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
    """The pairing invariant rests on it: ``_close`` must find the state whole whatever
    checkpoint a cancel hit, so every change to the state runs without a checkpoint."""
    tree = ast.parse((SRC / "_run" / "_run_state.py").read_text())
    awaits = [
        f"line {node.lineno}: {type(node).__name__}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Await | ast.AsyncFunctionDef | ast.AsyncFor | ast.AsyncWith)
    ]
    assert awaits == []
    assert any(
        isinstance(node, ast.ClassDef) and node.name == "RunState" for node in ast.walk(tree)
    )


async def test_the_runner_adds_no_state() -> None:
    from trio_agent._run._runner import Runner

    assert Runner.__slots__ == ()
    assert issubclass(Runner, RunState)
    assert not hasattr(Runner(prompt(), ctx(), ScriptedModel([]), LoopConfig()), "__dict__")
