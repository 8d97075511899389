"""W1–W3 on LangGraph: a ``StateGraph`` of a model node and a prebuilt ``ToolNode``
(``MessagesState``, ``tools_condition``; no network, no checkpointer) — the shape of a
LangGraph tool-calling agent.

The model node calls a scripted LangChain chat model (a ``BaseChatModel`` answering by a
step counter with ``AIMessage`` tool calls, then a text), as an agent calls its chat
model: that is where a LangGraph user's model plugs in, like pydantic-ai's
``FunctionModel`` and the Agents SDK's ``Model``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from trio_agent._bench._harness import Stopwatch, Timing

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


class Scripted(BaseChatModel):
    """``turns`` replies of ``calls`` calls to ``tool``, then a text reply."""

    turns: int
    calls: int
    tool: str
    step: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        raise NotImplementedError("the benchmark runs the model asynchronously")

    async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
        i = self.step
        self.step += 1
        if i < self.turns:
            tool_calls = [
                {"name": self.tool, "args": {}, "id": f"call-{i}-{k}", "type": "tool_call"}
                for k in range(self.calls)
            ]
            message = AIMessage(content="", tool_calls=tool_calls)
        else:
            message = AIMessage(content="done")
        return ChatResult(generations=[ChatGeneration(message=message)])


def graph(turns: int, calls: int, name: str) -> Any:
    llm = Scripted(turns=turns, calls=calls, tool=name)

    async def model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await llm.ainvoke(state["messages"])]}

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
