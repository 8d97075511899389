"""Per-call cost of an MCP tool over stdio, next to an in-process tool and the bare floor;
and (``--big``) what a huge result costs the connection and the loop.

Not part of ``trio-agent bench`` (it needs the ``[mcp]`` extra and a server process).
Run from the root of a checkout::

    .venv/bin/python -m benchmarks.bench_mcp            # 200 calls × 7 repeats
    .venv/bin/python -m benchmarks.bench_mcp --calls 50 --repeats 3
    .venv/bin/python -m benchmarks.bench_mcp --big 1 10 20 50 --repeats 3

One stdio server (``tests/kit/programs/mcp_server.py``, the SDK's own server class) is
started once for ours and once for the raw SDK client; then, interleaved per repeat, each
contender makes ``calls`` calls one after another and the median time per call is reported:

- **floor**: the bare trio loop of ``bench_turns`` (stream a reply, run its call in a
  nursery) with an in-process no-op tool — turns of one call.
- **local tool**: ``run_agent_loop`` with the same in-process no-op tool — turns of one call.
- **MCP tool in a run**: ``run_agent_loop`` with the server's ``echo`` tool — turns of one
  call, through ``open_mcp_tools`` (argument check, hand-off to the host task, SDK, pipe,
  server, and back).
- **McpConnection.call**: our call alone, without the loop.
- **raw SDK call_tool**: the SDK's ``Client.call_tool`` on a client of its own, awaited
  directly (no host task): what the protocol and the server cost by themselves.

``McpConnection.call − raw SDK`` is what hosting the client in a task of its own costs.

``--big MB...``: the server's ``big`` tool answers a text of that many million characters
(one JSON-RPC line of that many bytes, no structured copy). Two connections to two servers:
the SDK's own ``stdio_client`` under its ``Client`` (what ``trio_agent.mcp`` used before
it had a transport of its own) and ``McpConnection.call`` (our transport, the result cut
to ``max_result_chars``). Per size, interleaved per repeat, medians: the call's wall time
and this process's CPU time; what the call did to the trio loop, as a task sleeping 1 ms
in a loop sees it (its longest wake-up delay; the most CPU trio's thread spent between
two of its wake-ups, which the machine's load does not inflate; the sum of those holds
over 5 ms); and the wall time of a one-word call made right after, on the same
connection.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from trio_agent import (
    AssistantMessage,
    Context,
    LoopConfig,
    Text,
    ToolCall,
    UserMessage,
    run_agent_loop,
)
from trio_agent._bench._harness import Stopwatch, Timing
from trio_agent._bench.bench_turns import NOOP, floor_loop, script
from trio_agent.testing import ScriptedModel, events_for

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

    from mcp import Client

    from trio_agent import AssistantEvent, Tool
    from trio_agent.mcp import McpTools

SERVER = str(
    Path(__file__).resolve().parent.parent / "tests" / "kit" / "programs" / "mcp_server.py"
)


def mcp_script(calls: int) -> tuple[list[AssistantEvent], ...]:
    replies = [
        AssistantMessage(
            content=(ToolCall(id=f"c{i}", name="echo", arguments={"text": "hi"}),),
            stop_reason="tool_use",
        )
        for i in range(calls)
    ]
    replies.append(AssistantMessage(content=(Text(text="done"),), stop_reason="stop"))
    return tuple(events_for(m) for m in replies)


async def in_a_run(tools: Sequence[Tool], replies: Sequence[list[AssistantEvent]]) -> Timing:
    model = ScriptedModel(replies)
    with Stopwatch() as watch:
        result = await run_agent_loop(
            [UserMessage.text("go")],
            Context(tools=tools),
            model,
            LoopConfig(max_steps=len(replies)),
        )
    assert result.reason == "stop", result.reason
    assert not any(getattr(m, "is_error", False) for m in result.messages)
    return watch.timing


@contextlib.asynccontextmanager
async def two_servers() -> AsyncIterator[tuple[McpTools, Client]]:
    """The test server twice over stdio: through ``open_mcp_tools``, and on the SDK's
    own ``Client`` and ``stdio_client``."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from trio_agent.mcp import StdioServer, open_mcp_tools

    params = StdioServerParameters(command=sys.executable, args=[SERVER, "stdio"])
    with open("/dev/null", "w") as devnull:  # noqa: ASYNC230 - set-up, not measured
        async with (
            open_mcp_tools(StdioServer(sys.executable, SERVER, "stdio")) as mcp,
            Client(stdio_client(params, errlog=devnull)) as raw,
        ):
            yield mcp, raw


async def main(calls: int, repeats: int) -> None:
    local = script(calls)
    remote = mcp_script(calls)
    async with two_servers() as (mcp, raw):
        connection = mcp.servers[0]

        async def floor() -> Timing:
            with Stopwatch() as watch:
                await floor_loop(local, {"noop": NOOP.execute})
            return watch.timing

        async def ours_call() -> Timing:
            with Stopwatch() as watch:
                for _ in range(calls):
                    out = await connection.call("echo", {"text": "hi"})
                    assert not out.is_error
            return watch.timing

        async def raw_call() -> Timing:
            with Stopwatch() as watch:
                for _ in range(calls):
                    result = await raw.call_tool("echo", {"text": "hi"})
                    assert not result.is_error
            return watch.timing

        contenders: dict[str, Callable[[], Awaitable[Timing]]] = {
            "floor (bare trio loop, in-process tool)": floor,
            "local tool in a run": lambda: in_a_run((NOOP,), local),
            "MCP tool in a run (stdio)": lambda: in_a_run(mcp.tools, remote),
            "McpConnection.call (stdio)": ours_call,
            "raw SDK call_tool (stdio)": raw_call,
        }
        samples: dict[str, list[Timing]] = {name: [] for name in contenders}
        for repeat in range(repeats + 1):  # the first round warms up and is dropped
            order = list(contenders.items())
            if repeat % 2:
                order.reverse()
            for name, measure in order:
                wall, cpu = await measure()
                if repeat:
                    samples[name].append((wall / calls, cpu / calls))
    wall_of = {n: statistics.median(w for w, _ in v) for n, v in samples.items()}
    cpu_of = {n: statistics.median(c for _, c in v) for n, v in samples.items()}
    floor_name = "floor (bare trio loop, in-process tool)"
    print(f"{calls} calls one after another, median of {repeats} repeats, per call")
    print("(CPU: this process only, not the server's)")
    print(f"{'':42} {'wall':>10} {'× floor':>8} {'CPU':>10} {'× floor':>8}")
    for name in samples:
        wall, cpu = wall_of[name], cpu_of[name]
        print(
            f"{name:42} {wall * 1e3:7.3f} ms {wall / wall_of[floor_name]:8.1f} "
            f"{cpu * 1e3:7.3f} ms {cpu / cpu_of[floor_name]:8.1f}"
        )
    ours, sdk = "McpConnection.call (stdio)", "raw SDK call_tool (stdio)"
    print(
        f"hosting the client in a task of its own: {(wall_of[ours] - wall_of[sdk]) * 1e3:+.3f} ms"
        f" wall, {(cpu_of[ours] - cpu_of[sdk]) * 1e3:+.3f} ms CPU per call"
    )


async def _late_wakeups(worst: list[float]) -> None:
    """Sleep 1 ms again and again; keep in ``worst`` the longest wake-up delay (wall),
    the most CPU time trio's thread spent between two wake-ups (what held the loop,
    without the time the machine ran other processes), and the sum of those over 5 ms."""
    while True:
        before, cpu_before = trio.current_time(), time.thread_time()
        await trio.sleep(0.001)
        held = time.thread_time() - cpu_before
        worst[0] = max(worst[0], trio.current_time() - before - 0.001)
        worst[1] = max(worst[1], held)
        if held > 0.005:
            worst[2] += held


async def _timed_big(call: Callable[[str, dict[str, Any]], Awaitable[int]], chars: int) -> Row:
    worst = [0.0, 0.0, 0.0]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_late_wakeups, worst)
        await trio.sleep(0.01)
        with Stopwatch() as watch:
            shown = await call("big", {"chars": chars})
        nursery.cancel_scope.cancel()
    assert shown > 0
    with Stopwatch() as after:
        assert await call("echo", {"text": "after"}) == len("after")
    return watch.timing[0], watch.timing[1], worst[0], worst[1], worst[2], after.timing[0]


# wall, CPU, longest wake-up delay, most CPU between two wake-ups, the sum of those over
# 5 ms, the next call's wall
Row = tuple[float, float, float, float, float, float]


async def big_results(sizes: Sequence[float], repeats: int) -> None:
    from mcp.types import TextContent

    async with two_servers() as (mcp, raw):
        connection = mcp.servers[0]

        async def sdk(name: str, args: dict[str, Any]) -> int:
            result = await raw.call_tool(name, args)
            return sum(len(b.text) for b in result.content if isinstance(b, TextContent))

        async def ours(name: str, args: dict[str, Any]) -> int:
            output = await connection.call(name, args)
            assert not output.is_error, output
            assert not isinstance(output.content, str)
            return len(getattr(output.content[0], "text", ""))

        contenders = {"SDK stdio_client (before)": sdk, "trio_agent.mcp (after)": ours}
        rows: dict[tuple[str, float], list[Row]] = {}
        for repeat in range(repeats):
            for size in sizes:
                order = list(contenders.items())
                if repeat % 2:
                    order.reverse()
                for name, call in order:
                    row = await _timed_big(call, int(size * 1_000_000))
                    rows.setdefault((name, size), []).append(row)
    print(f"a result of N million characters over stdio, median of {repeats} repeats")
    print("(CPU: this process only; a task sleeping 1 ms in a loop measures the loop:")
    print(" 'late': its longest wake-up delay; 'held': the most CPU trio's thread spent")
    print(" between two of its wake-ups, what one synchronous step costs the loop;")
    print(" 'held>5ms': the sum of the holds over 5 ms)")
    print(
        f"{'':27} {'MB':>4} {'wall':>8} {'CPU':>8} {'late':>8} {'held':>8} {'held>5ms':>9} "
        f"{'next call':>10}"
    )
    for (name, size), samples in rows.items():
        wall, cpu, late, held, total, after = (
            statistics.median(r[i] for r in samples) for i in range(6)
        )
        print(
            f"{name:27} {size:4g} {wall:7.2f}s {cpu:7.2f}s {late * 1e3:5.0f} ms "
            f"{held * 1e3:5.0f} ms {total:8.2f}s {after * 1e3:7.1f} ms"
        )


def cli(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--big",
        type=float,
        nargs="+",
        metavar="MB",
        help="measure results of these many million characters instead",
    )
    args: Any = parser.parse_args(argv)
    if args.big:
        trio.run(big_results, args.big, args.repeats)
    else:
        trio.run(main, args.calls, args.repeats)


if __name__ == "__main__":
    cli()
