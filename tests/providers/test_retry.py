"""Retries: when, how long, how many — and never after the reply began."""

from __future__ import annotations

import itertools
import socket
from functools import partial
from typing import TYPE_CHECKING

import attrs
import pytest
import trio

from tests.kit.http_server import Server, error, recorded
from tests.kit.providers import FAST, collect, final, make_model
from trio_agent import Done
from trio_agent.providers import RetryPolicy
from trio_agent.providers._session import _retry_after

if TYPE_CHECKING:
    import httpx2

OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}


def gaps(server: Server) -> list[float]:
    times = [r.at for r in server.requests]
    return [b - a for a, b in itertools.pairwise(times)]


async def test_429_honours_retry_after_ms(server: Server) -> None:
    server.add(error(429, OVERLOADED, [("retry-after-ms", "300")]), recorded("anthropic_text.sse"))
    async with make_model("anthropic", server.url) as model:
        events = await collect(model)
    assert isinstance(events[-1], Done)
    [gap] = gaps(server)
    assert 0.3 <= gap < 1.0


async def test_429_honours_retry_after_seconds(server: Server) -> None:
    server.add(error(429, OVERLOADED, [("retry-after", "1")]), recorded("openai_text.sse"))
    async with make_model("openai", server.url) as model:
        events = await collect(model)
    assert isinstance(events[-1], Done)
    [gap] = gaps(server)
    assert 1.0 <= gap < 1.7


async def test_exponential_backoff_with_jitter(server: Server) -> None:
    server.default = error(500, OVERLOADED)
    policy = RetryPolicy(max_retries=3, initial_delay=0.1, max_delay=0.25)
    async with make_model("anthropic", server.url, http=attrs.evolve(FAST, retry=policy)) as model:
        message = final(await collect(model))
    assert "gave up after 3 retries" in (message.error_message or "")
    # Delays 0.1, 0.2, 0.25 (capped), each scaled by a factor in [0.5, 1].
    for gap, delay in zip(gaps(server), [0.1, 0.2, 0.25], strict=True):
        assert 0.5 * delay <= gap < delay + 0.15


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 529])
async def test_retryable_statuses_then_success(server: Server, status: int) -> None:
    server.add(error(status, OVERLOADED), recorded("anthropic_text.sse"))
    async with make_model("anthropic", server.url) as model:
        events = await collect(model)
    assert isinstance(events[-1], Done)
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_client_errors_are_not_retried(server: Server, status: int) -> None:
    server.default = error(status, OVERLOADED)
    async with make_model("openai", server.url) as model:
        message = final(await collect(model))
    assert f"HTTP {status}" in (message.error_message or "")
    assert len(server.requests) == 1


async def test_retries_disabled(server: Server) -> None:
    server.default = error(503, OVERLOADED)
    policy = RetryPolicy(max_retries=0)
    async with make_model("openai", server.url, http=attrs.evolve(FAST, retry=policy)) as model:
        message = final(await collect(model))
    assert "gave up" not in (message.error_message or "")
    assert len(server.requests) == 1


async def test_connect_error_then_the_server_comes_up(nursery: trio.Nursery) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = Server(port=port)
    server.add(recorded("openai_text.sse"))
    policy = RetryPolicy(max_retries=3, initial_delay=0.3, max_delay=0.3)

    async def start_later() -> None:
        await trio.sleep(0.05)
        await nursery.start(partial(trio.serve_tcp, server._serve, port, host="127.0.0.1"))

    nursery.start_soon(start_later)
    async with make_model("openai", server.url, http=attrs.evolve(FAST, retry=policy)) as model:
        events = await collect(model)
    assert isinstance(events[-1], Done)
    assert len(server.requests) == 1
    nursery.cancel_scope.cancel()


def test_delay_policy() -> None:
    policy = RetryPolicy(initial_delay=1.0, max_delay=5.0, max_retry_after=10.0)
    for attempt, base in [(0, 1.0), (1, 2.0), (2, 4.0), (3, 5.0), (10, 5.0)]:
        for _ in range(50):
            assert 0.5 * base <= policy.delay(attempt) <= base
    assert policy.delay(0, retry_after=7.5) == 7.5
    assert policy.delay(0, retry_after=0.0) == 0.0
    # A Retry-After beyond the bound is not obeyed: the backoff applies.
    assert policy.delay(0, retry_after=3600.0) <= 1.0


def _headers(**values: str) -> httpx2.Headers:
    import httpx2

    return httpx2.Headers({k.replace("_", "-"): v for k, v in values.items()})


def test_retry_after_parsing() -> None:
    assert _retry_after(_headers(retry_after="3")) == 3.0
    assert _retry_after(_headers(retry_after_ms="1500", retry_after="9")) == 1.5
    assert _retry_after(_headers(retry_after="soon")) is None
    assert _retry_after(_headers()) is None
    past = _retry_after(_headers(retry_after="Wed, 21 Oct 2015 07:28:00 GMT"))
    assert past == 0.0
    future = _retry_after(_headers(retry_after="Fri, 31 Dec 2100 23:59:59 GMT"))
    assert future is not None
    assert future > 1e9
