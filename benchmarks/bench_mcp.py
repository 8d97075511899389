"""Per-call cost of an MCP tool over stdio, next to an in-process tool and the bare floor.

Not part of ``trio-agent bench`` (it needs the ``[mcp]`` extra and a server process).
Run from the root of a checkout::

    .venv/bin/python -m benchmarks.bench_mcp            # 200 calls × 7 repeats
    .venv/bin/python -m benchmarks.bench_mcp --calls 50 --repeats 3

One stdio server (``tests/mcp_server.py``, the SDK's own server class) is started once for
ours and once for the raw SDK client; then, interleaved per repeat, each contender makes
``calls`` calls one after another and the median time per call is reported:

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
"""

from __future__ import annotations

import argparse
import statistics
import sys
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
    from collections.abc import Awaitable, Callable, Sequence

    from trio_agent import AssistantEvent, Tool

SERVER = str(Path(__file__).resolve().parent.parent / "tests" / "mcp_server.py")


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


async def main(calls: int, repeats: int) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from trio_agent.mcp import StdioServer, open_mcp_tools

    local = script(calls)
    remote = mcp_script(calls)
    params = StdioServerParameters(command=sys.executable, args=[SERVER, "stdio"])
    with open("/dev/null", "w") as devnull:  # noqa: ASYNC230 - set-up, not measured
        async with (
            open_mcp_tools(StdioServer(sys.executable, SERVER, "stdio")) as mcp,
            Client(stdio_client(params, errlog=devnull)) as raw,
        ):
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
    ours, raw = "McpConnection.call (stdio)", "raw SDK call_tool (stdio)"
    print(
        f"hosting the client in a task of its own: {(wall_of[ours] - wall_of[raw]) * 1e3:+.3f} ms"
        f" wall, {(cpu_of[ours] - cpu_of[raw]) * 1e3:+.3f} ms CPU per call"
    )


def cli(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    args: Any = parser.parse_args(argv)
    trio.run(main, args.calls, args.repeats)


if __name__ == "__main__":
    cli()
