"""W1–W3 on pydantic-ai: an ``Agent`` driven by a scripted ``FunctionModel`` (no network).

The function model answers by a step counter (it does not walk the history it is given);
the tools are ``tool_plain`` async functions, like ours.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

from trio_agent._bench._harness import Stopwatch, Timing

SLEEP = 0.010
NO_LIMIT = UsageLimits(request_limit=None)

agent: Agent[None, str] = Agent()


@agent.tool_plain
async def noop() -> str:
    return "ok"


@agent.tool_plain
async def sleep() -> str:
    await asyncio.sleep(SLEEP)
    return "ok"


def scripted(turns: int, calls: int, tool: str) -> FunctionModel:
    step = 0

    def reply(messages: list[Any], info: AgentInfo) -> ModelResponse:
        nonlocal step
        i = step
        step += 1
        if i < turns:
            return ModelResponse(
                parts=[
                    ToolCallPart(tool_name=tool, args={}, tool_call_id=f"call-{i}-{k}")
                    for k in range(calls)
                ]
            )
        return ModelResponse(parts=[TextPart(content="done")])

    return FunctionModel(reply)


async def _run(models: list[FunctionModel]) -> Timing:
    with Stopwatch() as watch:
        results = await asyncio.gather(
            *(agent.run("go", model=m, usage_limits=NO_LIMIT) for m in models)
        )
    assert all(r.output == "done" for r in results)
    return watch.timing


def w1(turns: int, inputs: Any) -> Timing:
    return asyncio.run(_run([scripted(turns, 1, "noop")]))


def w2(calls: int, inputs: Any) -> Timing:
    return asyncio.run(_run([scripted(1, calls, "sleep")]))


def w3(runs: int, inputs: Any) -> Timing:
    return asyncio.run(_run([scripted(1, 1, "sleep") for _ in range(runs)]))
