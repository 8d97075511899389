"""A finished run is freed by reference counting, not left for the garbage collector.

A run that is a reference cycle (the run pointing at its event delivery, the delivery
pointing back at the run; a batch pointing at its calls, each call back at the batch)
stays in memory, with its whole transcript, until a collection finds it — with a
thousand runs at once that is the peak memory, and every object alive makes the next
full collection slower. These tests run the loop with the collector off and look at
what a collection then finds unreachable: nothing of ours.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

import pytest
import trio

import trio_agent
from tests.kit.loop import call, make_tool, reply, tool_use
from trio_agent import (
    Context,
    LoopConfig,
    UserMessage,
    open_agent,
    open_agent_loop,
    run_agent_loop,
)
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from collections.abc import Callable


def _unreachable() -> list[Any]:
    """What a collection finds unreachable now (kept, not freed, by DEBUG_SAVEALL)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return list(gc.garbage)
    finally:
        gc.garbage.clear()
        gc.set_debug(0)


def _unreachable_after(body: Callable[[], None]) -> list[Any]:
    """Run ``body`` with the collector off; what a collection then finds unreachable."""
    gc.collect()
    gc.disable()
    try:
        body()
        return _unreachable()
    finally:
        gc.enable()


def _ours(objects: list[Any]) -> list[str]:
    """The objects defined by trio_agent among ``objects`` (type names)."""
    return sorted(
        {
            type(o).__qualname__
            for o in objects
            if type(o).__module__.startswith(trio_agent.__name__ + ".")
        }
    )


def _script() -> list[Any]:
    return [
        tool_use(call("a", "echo", text="x"), call("b", "echo", text="y")),
        tool_use(call("c", "echo", text="z")),
        reply("done"),
    ]


@pytest.mark.parametrize("sink", ["none", "on_event", "channel"])
def test_a_finished_run_is_not_a_reference_cycle(sink: str) -> None:
    async def main() -> None:
        context = Context(tools=(make_tool("echo"),))
        prompts = [UserMessage.text("go")]
        seen: list[Any] = []
        for _ in range(3):
            model = ScriptedModel(_script())
            if sink == "channel":
                async with open_agent_loop(prompts, context, model, LoopConfig()) as run:
                    async for event in run.events:
                        seen.append(event)
                assert run.result is not None
                assert run.result.reason == "stop"
            else:
                result = await run_agent_loop(
                    prompts,
                    context,
                    model,
                    LoopConfig(),
                    on_event=seen.append if sink == "on_event" else None,
                )
                assert result.reason == "stop"
        assert (len(seen) > 0) == (sink != "none")

    assert _ours(_unreachable_after(lambda: trio.run(main))) == []


@pytest.mark.parametrize("subscribed", [False, True])
def test_an_agent_run_is_not_a_reference_cycle(subscribed: bool) -> None:
    found: list[Any] = []

    async def main() -> None:
        async with open_agent(ScriptedModel(_script() * 2), tools=(make_tool("echo"),)) as agent:
            if subscribed:
                async with agent.subscribe(buffer=1000) as events:
                    await agent.prompt("go")
                    await agent.prompt("again")
                assert len([e async for e in events]) > 0
            else:
                await agent.prompt("go")
                await agent.prompt("again")
            assert agent.state.messages[-1].role == "assistant"
            # While the agent lives (it keeps its transcript): nothing of its runs is
            # left for the collector.
            found.extend(_unreachable())

    gc.collect()
    gc.disable()
    try:
        trio.run(main)
    finally:
        gc.enable()
    assert _ours(found) == []


def test_the_check_sees_a_cycle() -> None:
    """The check above is not vacuous: a cycle of our objects is found."""

    def make_a_cycle() -> None:
        model = ScriptedModel([])
        model.loop = model  # type: ignore[attr-defined]

    assert _ours(_unreachable_after(make_a_cycle)) == ["ScriptedModel"]
