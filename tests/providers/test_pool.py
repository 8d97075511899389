"""Cancelling requests at random points never leaks a connection-pool slot."""

from __future__ import annotations

import gc
import math
import random
from typing import TYPE_CHECKING

import attrs
import httpx2
import pytest
import trio

from tests.kit.http_server import STREAMS, Received, Responder, error
from tests.kit.providers import FAST, collect, make_model, request
from trio_agent import Done

if TYPE_CHECKING:
    from tests.kit.http_server import Server

SLOTS = 4


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_random_cancellations_leave_the_pool_whole(server: Server, kind: str) -> None:
    body = (
        STREAMS / ("openai_text.sse" if kind == "openai" else "anthropic_text.sse")
    ).read_bytes()
    overloaded = error(503, {"error": {"message": "busy"}})

    async def varied(req: Received, r: Responder) -> None:
        mode = req.json()["messages"][-1]["content"]
        if isinstance(mode, list):
            mode = mode[0]["text"]
        if mode == "slow":
            await r.head()
            await r.body(body, split=40, delay=0.002)
            await r.end()
        elif mode == "late":
            await trio.sleep(0.01)
            await r.head()
            await r.body(body)
            await r.end()
        elif mode == "stall":
            await r.head()
            await r.body(body[:100])
            await r.wait_disconnect()
        elif mode == "busy":
            await overloaded(req, r)
        else:
            await r.head()
            await r.body(body)
            await r.end()

    server.default = varied
    rng = random.Random(20260801)
    http = attrs.evolve(FAST, max_connections=SLOTS, max_keepalive_connections=SLOTS)
    modes = ["slow", "late", "stall", "busy", "fast"]
    cancelled = completed = 0
    async with make_model(kind, server.url, http=http) as model:

        async def one(mode: str, after: float) -> None:
            nonlocal cancelled, completed
            with trio.move_on_after(after) as scope:
                events = await collect(model, request(mode))
                completed += isinstance(events[-1], Done)
            cancelled += scope.cancelled_caught

        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                for _ in range(300):
                    mode = rng.choice(modes)
                    # One in five is left to finish (a stalled one would hold its slot
                    # until the idle timeout).
                    if mode != "stall" and rng.random() < 0.2:
                        nursery.start_soon(one, mode, math.inf)
                    else:
                        nursery.start_soon(one, mode, rng.uniform(0.0, 0.05))
                    await trio.sleep(rng.uniform(0.0, 0.002) if rng.random() < 0.3 else 0)

        assert cancelled > 100
        assert completed > 10
        gc.collect()

        # Every slot is free: SLOTS requests can hold a connection at the same time.
        arrived = 0
        everyone = trio.Event()

        async def barrier(req: Received, r: Responder) -> None:
            nonlocal arrived
            arrived += 1
            if arrived == SLOTS:
                everyone.set()
            await everyone.wait()
            await r.head()
            await r.body(body)
            await r.end()

        server.default = barrier
        results: list[bool] = []

        async def held() -> None:
            events = await collect(model)
            results.append(isinstance(events[-1], Done))

        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                for _ in range(SLOTS):
                    nursery.start_soon(held)
        assert results == [True] * SLOTS
        gc.collect()
        await trio.sleep(0.01)


async def test_requests_waiting_for_a_connection_hold_no_http_request(server: Server) -> None:
    """With thousands of runs at once most requests wait for a connection: they wait
    before their HTTP request object is built, so waiting costs a place in a queue."""
    body = (STREAMS / "openai_text.sse").read_bytes()
    release = trio.Event()
    both = trio.Event()
    arrived = 0

    async def held(req: Received, r: Responder) -> None:
        nonlocal arrived
        arrived += 1
        if arrived == 2:
            both.set()
        await release.wait()
        await r.head()
        await r.body(body)
        await r.end()

    server.default = held
    http = attrs.evolve(FAST, max_connections=2, max_keepalive_connections=2)
    waiting = 20
    results: list[bool] = []
    async with make_model("openai", server.url, http=http) as model:

        async def one() -> None:
            events = await collect(model)
            results.append(isinstance(events[-1], Done))

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for _ in range(waiting):
                    nursery.start_soon(one)
                await both.wait()
                await trio.sleep(0.05)  # the other requests queue meanwhile
                gc.collect()
                built = sum(1 for o in gc.get_objects() if type(o) is httpx2.Request)
                assert arrived == 2
                assert built <= 2
                release.set()
    assert results == [True] * waiting


def _tasks() -> int:
    count, todo = 0, [trio.lowlevel.current_root_task()]
    while todo:
        task = todo.pop()
        count += 1
        for nursery in task.child_nurseries:
            todo.extend(nursery.child_tasks)
    return count


async def test_a_reply_streams_in_the_consumers_task(server: Server) -> None:
    """No task, nursery or channel per request: the events are produced in the task
    that iterates them, and leaving the block early closes the request."""
    body = (STREAMS / "openai_text.sse").read_bytes()

    async def reply(req: Received, r: Responder) -> None:
        await r.head()
        await r.body(body)
        await r.end()

    server.default = reply
    seen: list[int] = []
    async with make_model("openai", server.url, http=FAST) as model:
        with trio.fail_after(5):
            # A first request opens the connection (the test server's task for it).
            assert isinstance((await collect(model))[-1], Done)
            before = _tasks()
            async with model.stream(request()) as events:
                async for event in events:
                    seen.append(_tasks())
                    if isinstance(event, Done):
                        break
            assert seen
            assert set(seen) == {before}
            # Left after the first event: the request is closed, the pool slot free.
            async with model.stream(request()) as events:
                async for _ in events:
                    break
            assert isinstance((await collect(model))[-1], Done)
