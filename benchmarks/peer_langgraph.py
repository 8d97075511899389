"""W1–W3 on LangGraph: a ``StateGraph`` of a scripted model node and a prebuilt
``ToolNode`` (``MessagesState``, ``tools_condition``; no network, no checkpointer).

The model node answers by a step counter with ``AIMessage`` tool calls, then a text.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from benchmarks._harness import Stopwatch, Timing

SLEEP = 0.010


@tool
async def noop() -> str:
    """Does nothing."""
    return "ok"


@tool
async def sleep() -> str:
    """Sleeps 10 ms."""
    await asyncio.sleep(SLEEP)
    return "ok"


TOOLS = ToolNode([noop, sleep])


def graph(turns: int, calls: int, name: str) -> Any:
    step = 0

    async def model(state: MessagesState) -> dict[str, Any]:
        nonlocal step
        i = step
        step += 1
        if i < turns:
            tool_calls = [
                {"name": name, "args": {}, "id": f"call-{i}-{k}", "type": "tool_call"}
                for k in range(calls)
            ]
            return {"messages": [AIMessage(content="", tool_calls=tool_calls)]}
        return {"messages": [AIMessage(content="done")]}

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("tools", TOOLS)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition)
    g.add_edge("tools", "model")
    return g.compile()


async def _run(apps: list[Any], turns: int) -> Timing:
    config = {"recursion_limit": 2 * turns + 10}
    with Stopwatch() as watch:
        results = await asyncio.gather(
            *(app.ainvoke({"messages": [HumanMessage(content="go")]}, config) for app in apps)
        )
    assert all(r["messages"][-1].content == "done" for r in results)
    return watch.timing


def w1(turns: int, inputs: Any) -> Timing:
    return asyncio.run(_run([graph(turns, 1, "noop")], turns))


def w2(calls: int, inputs: Any) -> Timing:
    return asyncio.run(_run([graph(1, calls, "sleep")], 1))


def w3(runs: int, inputs: Any) -> Timing:
    return asyncio.run(_run([graph(1, 1, "sleep") for _ in range(runs)], 1))
