"""The rollout workload of ``bench_rollouts.py`` on asyncio agent frameworks.

Each contender runs N rollouts at once, each 3 streamed model requests and 2 tool calls
(``read``, then ``add``), against the same fake vLLM-compatible server, as a user of that
framework would write it:

- **pydantic-ai**: an ``Agent`` with ``OpenAIChatModel`` (its chat-completions model) on
  an ``OpenAIProvider`` at the server, run with ``agent.run(...,
  event_stream_handler=...)``: every model request streamed, the events consumed, the
  run ending with its result (``run_stream`` stops at the first text part, which here
  comes with the first tool call). ``openai_logprobs`` on: it keeps each reply's
  logprobs (with each token's text) in ``provider_details``.
- **openai-agents**: ``Runner.run_streamed`` with ``OpenAIChatCompletionsModel`` on an
  ``AsyncOpenAI`` client at the server, its events consumed; tracing off.
- **langgraph**: ``create_react_agent`` with langchain-openai's ``ChatOpenAI``
  (``streaming=True``) at the server, run with ``ainvoke``.

All three ask for token ids and logprobs the way vLLM takes them (``return_token_ids``
and ``logprobs`` in the request body, through each framework's ``extra_body`` model
setting), so the server sends the same bytes it sends trio-agent. None of them keeps
the token ids: the ids are parsed by the openai client and dropped with the chunk. That
is less work than trio-agent does (it keeps ids and logprobs on every assistant
message and builds the trajectory), and the comparison is stated so.

The HTTP client is the same for all: one ``httpx2.AsyncClient`` (the client the openai
package is built on here) with 256 connections, given to one ``AsyncOpenAI`` client with
retries off. The measurement is that of ``bench_rollouts.py``: the ``read`` tool waits
at a barrier until every rollout is there (RSS then, for memory per in-flight rollout),
CPU time of this process over N, wall time until the last rollout finished.

Run in the peers' virtual environment, from the checkout's root (``bench_rollouts.py
--peers PYTHON`` does it)::

    ../peers-venv/bin/python -m benchmarks.peer_rollouts pydantic-ai URL 1000
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from benchmarks.bench_rollouts import CONNECTIONS, SYSTEM, TASK, memory_only, rss_kib

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import httpx2
    from openai import AsyncOpenAI

# The request fields vLLM reads for token ids and logprobs, sent by every contender.
EXTRA_BODY = {"return_token_ids": True, "logprobs": True}


class Barrier:
    """Holds every rollout's ``read`` call until all ``n`` are there; the last one in
    records the RSS in ``measured`` and releases them all."""

    def __init__(self, n: int, measured: dict[str, Any]) -> None:
        self.n, self.measured = n, measured
        self.arrived = 0
        self.release = asyncio.Event()

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived == self.n:
            self.measured["in_flight_kib"] = rss_kib()
            memory_only(self.measured)
            self.release.set()
        await self.release.wait()


def http_client() -> httpx2.AsyncClient:
    """The HTTP client of every contender: httpx2 with 256 connections."""
    import httpx2

    return httpx2.AsyncClient(
        timeout=httpx2.Timeout(600.0, connect=60.0, pool=None),
        limits=httpx2.Limits(max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS),
    )


def openai_client(url: str) -> AsyncOpenAI:
    """One ``AsyncOpenAI`` at the server, over ``http_client()``, retries off."""
    from openai import AsyncOpenAI

    return AsyncOpenAI(base_url=url, api_key="none", http_client=http_client(), max_retries=0)


async def measure(
    n: int, measured: dict[str, Any], one: Callable[[], Awaitable[bool]]
) -> dict[str, Any]:
    """Runs ``one()`` ``n`` times at once; counts the rollouts it says went right."""
    measured["before_kib"] = rss_kib()
    start, cpu = time.perf_counter(), time.process_time()
    results = await asyncio.gather(*(one() for _ in range(n)))
    measured["seconds"] = time.perf_counter() - start
    measured["cpu"] = time.process_time() - cpu
    measured["ok"] = sum(results)
    return measured


# --- pydantic-ai --------------------------------------------------------------------


async def pydantic_ai(url: str, n: int) -> dict[str, Any]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIChatModelSettings
    from pydantic_ai.providers.openai import OpenAIProvider

    measured: dict[str, Any] = {}
    barrier = Barrier(n, measured)
    client = openai_client(url)
    settings = OpenAIChatModelSettings(openai_logprobs=True, extra_body=EXTRA_BODY)
    model = OpenAIChatModel(
        "policy", provider=OpenAIProvider(openai_client=client), settings=settings
    )
    agent: Agent[None, str] = Agent(model, instructions=SYSTEM)

    @agent.tool_plain
    async def read(path: str) -> str:
        """Read a file."""
        await barrier.wait()
        return "hello"

    @agent.tool_plain
    async def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    async def consume(ctx: Any, events: Any) -> None:
        async for _ in events:
            pass

    async def one() -> bool:
        result = await agent.run(TASK, event_stream_handler=consume)
        replies = [m for m in result.all_messages() if isinstance(m, ModelResponse)]
        return len(replies) == 3 and "5" in result.output

    async with client:
        return await measure(n, measured, one)


# --- the OpenAI Agents SDK ----------------------------------------------------------


async def openai_agents(url: str, n: int) -> dict[str, Any]:
    from agents import (
        Agent,
        ModelSettings,
        OpenAIChatCompletionsModel,
        RunConfig,
        Runner,
        function_tool,
        set_tracing_disabled,
    )

    set_tracing_disabled(True)
    measured: dict[str, Any] = {}
    barrier = Barrier(n, measured)
    client = openai_client(url)

    @function_tool
    async def read(path: str) -> str:
        """Read a file."""
        await barrier.wait()
        return "hello"

    @function_tool
    async def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    agent = Agent(
        name="rollout",
        instructions=SYSTEM,
        model=OpenAIChatCompletionsModel("policy", openai_client=client),
        model_settings=ModelSettings(extra_body=EXTRA_BODY),
        tools=[read, add],
    )
    config = RunConfig(tracing_disabled=True)

    async def one() -> bool:
        result = Runner.run_streamed(agent, TASK, run_config=config)
        async for _ in result.stream_events():
            pass
        return len(result.raw_responses) == 3 and "5" in str(result.final_output)

    async with client:
        return await measure(n, measured, one)


# --- LangGraph ----------------------------------------------------------------------


async def langgraph(url: str, n: int) -> dict[str, Any]:
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    measured: dict[str, Any] = {}
    barrier = Barrier(n, measured)
    http = http_client()

    @tool
    async def read(path: str) -> str:
        """Read a file."""
        await barrier.wait()
        return "hello"

    @tool
    async def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    llm = ChatOpenAI(
        model="policy",
        base_url=url,
        api_key="none",
        http_async_client=http,
        streaming=True,
        extra_body=EXTRA_BODY,
        max_retries=0,
    )
    graph = create_react_agent(llm, [read, add], prompt=SYSTEM)

    async def one() -> bool:
        state = await graph.ainvoke({"messages": [("user", TASK)]})
        replies = [m for m in state["messages"] if isinstance(m, AIMessage)]
        return len(replies) == 3 and "5" in str(replies[-1].content)

    async with http:
        return await measure(n, measured, one)


PEERS: dict[str, Callable[[str, int], Awaitable[dict[str, Any]]]] = {
    "pydantic-ai": pydantic_ai,
    "openai-agents": openai_agents,
    "langgraph": langgraph,
}


def child(python: str, kind: str, url: str, n: int) -> dict[str, Any]:
    """Runs contender ``kind`` on ``n`` rollouts in a fresh process of ``python`` (the
    peers' virtual environment); returns what it measured."""
    out = subprocess.run(
        [python, "-m", "benchmarks.peer_rollouts", kind, url, str(n)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def ratios(rows: list[tuple[int, str, dict[str, Any]]]) -> None:
    """Prints, per size, trio-agent's rollouts per second over each peer's, and each
    peer's client CPU per rollout over trio-agent's."""
    print("\n| rollouts | peer | trio-agent's rollouts/s ÷ peer's | peer's CPU ÷ trio-agent's |")
    print("|---:|---|---:|---:|")
    ours = {n: r for n, kind, r in rows if kind == "trio-agent"}
    for n, kind, r in rows:
        if kind in PEERS and n in ours:
            rate = (n / ours[n]["seconds"]) / (n / r["seconds"])
            print(f"| {n:,} | {kind} | {rate:.2f}× | {r['cpu'] / ours[n]['cpu']:.2f}× |")


def main(argv: list[str]) -> None:
    kind, url, n = argv[0], argv[1], int(argv[2])
    print(json.dumps(asyncio.run(PEERS[kind](url, n))))


if __name__ == "__main__":
    main(sys.argv[1:])
