"""trio_agent.aio: rollouts from asyncio (and uvloop) through trio's guest mode."""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.lowlevel

import trio_agent.aio
from tests.kit.providers import FAST
from trio_agent import (
    AgentEvent,
    Message,
    MessageEnd,
    Tool,
    ToolCall,
    ToolContext,
    ToolExecutionStart,
    check_transcript,
)
from trio_agent.providers import HTTPOptions, OpenAIChat
from trio_agent.testing import VLLMReply, scripted_policy, serve_fake_vllm

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Iterator, Mapping

    from trio_agent.rollout import Rollout

LOOPS = ["asyncio", "uvloop"]
REPLIES = (
    VLLMReply(text="Working.", calls=(("call_1", "work", {"slow": False}),)),
    VLLMReply(text="done"),
)


@pytest.fixture(scope="module")
def vllm_url() -> Iterator[str]:
    """The fake vLLM server, in its own thread and trio loop."""
    found: list[tuple[str, trio.lowlevel.TrioToken, trio.CancelScope]] = []
    ready = threading.Event()

    async def serve() -> None:
        with trio.CancelScope() as scope:
            async with serve_fake_vllm(scripted_policy(REPLIES)) as url:
                found.append((url, trio.lowlevel.current_trio_token(), scope))
                ready.set()
                await trio.sleep_forever()

    thread = threading.Thread(target=trio.run, args=(serve,))
    thread.start()
    assert ready.wait(10)
    url, token, scope = found[0]
    yield url
    token.run_sync_soon(scope.cancel)
    thread.join(10)


def run_on(loop: str, main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        uvloop.run(main())
    else:
        asyncio.run(main())


async def _work(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
    if args.get("slow"):
        await trio.sleep_forever()
    await trio.lowlevel.checkpoint()
    return "ok"


def tools(slow: bool) -> tuple[Tool, ...]:
    async def execute(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
        return await _work(call, {"slow": slow}, ctx)

    return (Tool(name="work", description="Work.", parameters={"type": "object"}, execute=execute),)


@pytest.mark.parametrize("loop", LOOPS)
def test_thousand_rollouts_half_cancelled_all_paired_nothing_left(loop: str, vllm_url: str) -> None:
    count = 1000
    transcripts: list[list[Message]] = [[] for _ in range(count)]
    stuck = 0
    all_stuck = asyncio.Event()
    outcome: dict[str, Any] = {}

    def recorder(i: int) -> Callable[[AgentEvent], None]:
        def on_event(event: AgentEvent) -> None:
            nonlocal stuck
            if isinstance(event, MessageEnd):
                transcripts[i].append(event.message)
            elif isinstance(event, ToolExecutionStart) and i % 2:
                stuck += 1
                if stuck == count // 2:
                    all_stuck.set()

        return on_event

    async def main() -> None:
        http = HTTPOptions(
            connect_timeout=FAST.connect_timeout, idle_timeout=10.0, max_connections=64
        )
        model = OpenAIChat("policy", base_url=vllm_url, tokens=True, http=http)
        tasks = [
            asyncio.create_task(
                trio_agent.aio.rollout(
                    f"task {i}",
                    model,
                    tools(slow=bool(i % 2)),
                    reward=lambda t: float(len(t)),
                    on_event=recorder(i),
                )
            )
            for i in range(count)
        ]
        await asyncio.wait_for(all_stuck.wait(), 60)
        for i in range(1, count, 2):
            tasks[i].cancel()
        results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 60)
        await trio_agent.aio.run(model.aclose)
        await trio_agent.aio.aclose()
        outcome["results"] = results
        outcome["left"] = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    run_on(loop, main)
    results = outcome["results"]
    assert outcome["left"] == []
    for i, result in enumerate(results):
        if i % 2:
            assert isinstance(result, asyncio.CancelledError), result
        else:
            rollout: Rollout = result
            assert rollout.result.reason == "stop"
            assert rollout.reward == 4.0
            assert len(rollout.trajectory.calls) == 2
            assert list(rollout.transcript) == transcripts[i]
        check_transcript(transcripts[i])
        # The cancelled ones stopped in the tool: the call has its aborted result.
        assert len(transcripts[i]) == (4 if i % 2 == 0 else 3)


@pytest.mark.parametrize("loop", LOOPS)
def test_run_returns_values_raises_errors_and_restarts_after_aclose(loop: str) -> None:
    seen: dict[str, Any] = {}

    async def trio_sum(a: int, b: int) -> int:
        await trio.sleep(0.001)
        return a + b

    async def boom() -> None:
        await trio.lowlevel.checkpoint()
        raise ValueError("from trio")

    async def main() -> None:
        seen["sum"] = await trio_agent.aio.run(trio_sum, 2, 3)
        with pytest.raises(ValueError, match="from trio"):
            await trio_agent.aio.run(boom)
        await trio_agent.aio.aclose()
        seen["again"] = await trio_agent.aio.run(trio_sum, 1, 1)
        await trio_agent.aio.aclose()
        await trio_agent.aio.aclose()  # twice: nothing to close

    run_on(loop, main)
    assert seen == {"sum": 5, "again": 2}


def test_cancelling_waits_for_the_trio_clean_up() -> None:
    order: list[str] = []

    async def slow_clean_up() -> None:
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(0.05)
            order.append("trio cleaned up")

    async def main() -> None:
        task = asyncio.create_task(trio_agent.aio.run(slow_clean_up))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        order.append("asyncio saw the cancel")
        await trio_agent.aio.aclose()

    asyncio.run(main())
    assert order == ["trio cleaned up", "asyncio saw the cancel"]
