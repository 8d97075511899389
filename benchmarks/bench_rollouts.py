"""Rollout throughput and memory: trio-agent against a bare asyncio + httpx2 floor.

The workload, for both contenders: N rollouts at once against a fake vLLM-compatible
server (``trio_agent.testing.serve_fake_vllm``, its own process on 127.0.0.1) that
streams token ids and logprobs. Each rollout is 3 model requests (streamed, with
``return_token_ids`` and ``logprobs``) and 2 tool calls (``read``, then ``add``).

- **trio-agent**: ``rollout(task, OpenAIChat(tokens=True), tools, reward=fn)`` — the
  loop, the transcript in memory, the trajectory (merged sample, mask) and the reward.
- **floor**: the least an asyncio program can do for the same wire work: one
  ``httpx2.AsyncClient`` (the HTTP client trio-agent uses, so the comparison is about
  the runtime around it), SSE lines parsed with ``json.loads``, content, tool calls,
  token ids and logprobs accumulated into plain dicts and lists, the tools called, the
  messages list grown. No transcript checks, no trajectory, no events.

Memory per in-flight rollout: every rollout's first tool call waits at a barrier until
all N rollouts are there; the process's RSS is read then (after ``gc.collect()``), minus
the RSS just before the rollouts started (likewise), divided by N. How the heap grew is
printed under each row (``rollout_memory.heap``: pymalloc's live and free blocks,
malloc's). ``--where`` (tracemalloc; slow, memory only) adds the live bytes traced per
rollout, the bytes of the in-flight token arrays, and the top allocation sites, at the
barrier and at the traced peak before it (``--where=ours``: charged to trio-agent's own
call sites). Each (contender, N) runs in a fresh process. Throughput:
N divided by the time from start until every rollout finished (the barrier included:
it releases the moment the last rollout arrives).

Run from the checkout's root::

    .venv/bin/python -m benchmarks.bench_rollouts 1000 10000 [100000]
    .venv/bin/python -m benchmarks.bench_rollouts --memory-only 10000   # memory only
    .venv/bin/python -m benchmarks.bench_rollouts --where 1000   # where the bytes go
    .venv/bin/python -m benchmarks.bench_rollouts --peers ../peers-venv/bin/python 1000

``--peers PYTHON`` adds the asyncio agent frameworks (``peer_rollouts.py``: pydantic-ai,
the OpenAI Agents SDK, LangGraph), each run by ``PYTHON`` (a virtual environment with the
``bench-peers`` extra), and a table of trio-agent's rate and CPU against each.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from .rollout_memory import heap, print_heap, print_where, watch_peak, where, where_start

if TYPE_CHECKING:
    from collections.abc import Mapping

CONNECTIONS = 256
TASK = "read a.txt, then add 2 and 3"
SYSTEM = "You are a test agent."
TOOL_SPECS = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            },
        },
    },
]


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def in_flight(measured: dict[str, Any]) -> None:
    """At the barrier (every rollout in flight): collect garbage, then read the RSS.

    ``gc.collect()`` first, so cyclic garbage not yet collected is not counted as
    in-flight memory (the freed blocks stay in pymalloc's arenas, so the RSS shrinks
    little; what it does is make the figure repeatable). With ``--where`` also the
    tracemalloc breakdown (see ``rollout_memory.where``).
    """
    gc.collect()
    measured["in_flight_kib"] = rss_kib()
    measured["heap"] = heap()
    if os.environ.get("BENCH_WHERE"):
        measured["where"] = where()
    memory_only(measured)


def memory_only(measured: dict[str, Any]) -> None:
    """With ``--memory-only``: report the in-flight memory and end the process there."""
    if os.environ.get("BENCH_MEMORY_ONLY"):
        print(json.dumps({**measured, "seconds": float("nan"), "cpu": float("nan"), "ok": 0}))
        sys.stdout.flush()
        os._exit(0)


# --- the server ---------------------------------------------------------------------


def serve() -> None:
    import trio

    from trio_agent.testing import VLLMReply, scripted_policy, serve_fake_vllm

    replies = (
        VLLMReply(text="Reading the file.", calls=(("call_1", "read", {"path": "a.txt"}),)),
        VLLMReply(text="Adding.", calls=(("call_2", "add", {"a": 2, "b": 3}),)),
        VLLMReply(text="The file says hello; 2 + 3 = 5."),
    )

    async def main() -> None:
        async with serve_fake_vllm(scripted_policy(replies)) as url:
            print(url, flush=True)
            await trio.sleep_forever()

    trio.run(main)


# --- trio-agent ---------------------------------------------------------------------


def run_trio(url: str, n: int) -> dict[str, Any]:

    import trio

    from trio_agent import AssistantMessage, Message, Tool, ToolCall, ToolContext
    from trio_agent.providers import HTTPOptions, OpenAIChat
    from trio_agent.rollout import rollout

    arrived = 0
    release = trio.Event()
    measured: dict[str, Any] = {}

    async def read(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
        nonlocal arrived
        arrived += 1
        if arrived == n:
            in_flight(measured)
            release.set()
        await release.wait()
        return "hello"

    async def add(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
        return str(args["a"] + args["b"])

    tools = (
        Tool(
            name="read",
            description="Read a file.",
            parameters=TOOL_SPECS[0]["function"]["parameters"],
            execute=read,
        ),  # type: ignore[index]
        Tool(
            name="add",
            description="Add two integers.",
            parameters=TOOL_SPECS[1]["function"]["parameters"],
            execute=add,
        ),  # type: ignore[index]
    )

    def reward(transcript: tuple[Message, ...]) -> float:
        last = transcript[-1]
        return 1.0 if isinstance(last, AssistantMessage) and "5" in last.text else 0.0

    async def main() -> None:
        http = HTTPOptions(
            connect_timeout=60.0,
            idle_timeout=600.0,
            progress_timeout=None,
            max_connections=CONNECTIONS,
            max_keepalive_connections=CONNECTIONS,
        )
        ok = 0
        async with OpenAIChat("policy", base_url=url, tokens=True, http=http) as model:

            async def one() -> None:
                nonlocal ok
                r = await rollout(TASK, model, tools, reward=reward, system_prompt=SYSTEM)
                if r.reward == 1.0 and len(r.trajectory.calls) == 3 and not r.trajectory.breaks:
                    ok += 1

            gc.collect()
            measured["before_kib"] = rss_kib()
            measured["heap_before"] = heap()
            where_start()
            start, cpu = time.perf_counter(), time.process_time()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch_peak, release)
                for _ in range(n):
                    nursery.start_soon(one)
            measured["seconds"] = time.perf_counter() - start
            measured["cpu"] = time.process_time() - cpu
        measured["ok"] = ok

    trio.run(main)
    return measured


# --- the asyncio floor --------------------------------------------------------------


def run_floor(url: str, n: int) -> dict[str, Any]:
    import httpx2

    measured: dict[str, Any] = {}

    async def main() -> None:
        arrived = 0
        release = asyncio.Event()

        async def read(args: dict[str, Any]) -> str:
            nonlocal arrived
            arrived += 1
            if arrived == n:
                in_flight(measured)
                release.set()
            await release.wait()
            return "hello"

        async def add(args: dict[str, Any]) -> str:
            return str(args["a"] + args["b"])

        tools = {"read": read, "add": add}
        limits = httpx2.Limits(max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS)
        ok = 0
        async with httpx2.AsyncClient(
            timeout=httpx2.Timeout(600.0, connect=60.0, pool=None), limits=limits
        ) as client:

            async def request(messages: list[dict[str, Any]]) -> dict[str, Any]:
                body = {
                    "model": "policy",
                    "messages": messages,
                    "tools": TOOL_SPECS,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                    "return_token_ids": True,
                    "logprobs": True,
                }
                reply: dict[str, Any] = {
                    "content": "",
                    "calls": {},
                    "prompt_ids": [],
                    "ids": [],
                    "logprobs": [],
                }
                async with client.stream("POST", url + "/chat/completions", json=body) as response:
                    async for line in response.aiter_lines():
                        if not line.startswith("data: "):
                            continue
                        data = line[6:]
                        if data == "[DONE]":
                            break
                        chunk = json.loads(data)
                        if "prompt_token_ids" in chunk:
                            reply["prompt_ids"] = chunk["prompt_token_ids"]
                        for choice in chunk.get("choices", ()):
                            delta = choice.get("delta", {})
                            reply["content"] += delta.get("content") or ""
                            for call in delta.get("tool_calls") or ():
                                slot = reply["calls"].setdefault(
                                    call["index"], {"id": "", "name": "", "arguments": ""}
                                )
                                slot["id"] = call.get("id") or slot["id"]
                                fn = call.get("function", {})
                                slot["name"] = fn.get("name") or slot["name"]
                                slot["arguments"] += fn.get("arguments") or ""
                            reply["ids"].extend(choice.get("token_ids") or ())
                            for entry in (choice.get("logprobs") or {}).get("content") or ():
                                reply["logprobs"].append(entry["logprob"])
                return reply

            async def one() -> None:
                nonlocal ok
                messages: list[dict[str, Any]] = [
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": TASK},
                ]
                replies = []
                while True:
                    reply = await request(messages)
                    replies.append(reply)
                    calls = [reply["calls"][i] for i in sorted(reply["calls"])]
                    entry: dict[str, Any] = {
                        "role": "assistant",
                        "content": reply["content"] or None,
                    }
                    if calls:
                        entry["tool_calls"] = [
                            {
                                "id": c["id"],
                                "type": "function",
                                "function": {"name": c["name"], "arguments": c["arguments"]},
                            }
                            for c in calls
                        ]
                    messages.append(entry)
                    if not calls:
                        break
                    for c in calls:
                        out = await tools[c["name"]](json.loads(c["arguments"]))
                        messages.append({"role": "tool", "tool_call_id": c["id"], "content": out})
                if len(replies) == 3 and "5" in replies[-1]["content"]:
                    ok += 1

            gc.collect()
            measured["before_kib"] = rss_kib()
            measured["heap_before"] = heap()
            where_start()
            start, cpu = time.perf_counter(), time.process_time()
            await asyncio.gather(*(one() for _ in range(n)))
            measured["seconds"] = time.perf_counter() - start
            measured["cpu"] = time.process_time() - cpu
        measured["ok"] = ok

    asyncio.run(main())
    return measured


# --- the driver ---------------------------------------------------------------------


def child(kind: str, url: str, n: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_rollouts", "--child", kind, url, str(n)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> None:
    if argv[:1] == ["--serve"]:
        serve()
        return
    if argv[:1] == ["--child"]:
        kind, url, n = argv[1], argv[2], int(argv[3])
        result = run_trio(url, n) if kind == "trio-agent" else run_floor(url, n)
        print(json.dumps(result))
        return
    if "--where" in argv or "--where=ours" in argv:
        # Where the in-flight bytes are (tracemalloc, slow): memory only, no rates.
        os.environ["BENCH_WHERE"] = "ours" if "--where=ours" in argv else "1"
        argv = [a for a in argv if not a.startswith("--where")]
        os.environ["BENCH_MEMORY_ONLY"] = "1"
    if "--memory-only" in argv:
        # Stop each rollout process once every rollout is in flight: memory, no rates.
        argv = [a for a in argv if a != "--memory-only"]
        os.environ["BENCH_MEMORY_ONLY"] = "1"
    peers = argv[argv.index("--peers") + 1] if "--peers" in argv else None
    if peers:
        argv.remove("--peers")
        argv.remove(peers)
    from benchmarks import peer_rollouts

    rows: list[tuple[int, str, dict[str, Any]]] = []
    sizes = [int(a) for a in argv] or [1000, 10000]
    server = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.bench_rollouts", "--serve"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        print(f"load average at start: {os.getloadavg()}", file=sys.stderr)
        print(
            "| rollouts | contender | rollouts/s | client CPU ms per rollout "
            "| KiB per in-flight rollout | ok |"
        )
        print("|---:|---|---:|---:|---:|---:|")
        for n in sizes:
            for kind in ("trio-agent", "asyncio+httpx2", *(peer_rollouts.PEERS if peers else ())):
                if kind in peer_rollouts.PEERS and peers:
                    r = peer_rollouts.child(peers, kind, url, n)
                else:
                    r = child(kind, url, n)
                rows.append((n, kind, r))
                per = (r["in_flight_kib"] - r["before_kib"]) / n
                cpu = 1000 * r["cpu"] / n
                print(
                    f"| {n:,} | {kind} | {n / r['seconds']:,.0f} | {cpu:.2f} | {per:,.1f} "
                    f"| {r['ok']:,} |",
                    flush=True,
                )
                if "heap" in r:  # (the peers' processes do not read their heap)
                    print_heap(r, n)
                if "where" in r:
                    print_where(r["where"], n)
        peer_rollouts.ratios(rows)
        print(f"load average at end: {os.getloadavg()}", file=sys.stderr)
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main(sys.argv[1:])
