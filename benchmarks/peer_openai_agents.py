"""W1–W3 on the OpenAI Agents SDK: ``Runner.run`` with a scripted ``Model`` (no network).

The model answers by a step counter with Responses-API output items (function calls,
then a message); tracing is off; the tools are ``function_tool`` async functions.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from trio_agent._bench._harness import Stopwatch, Timing

SLEEP = 0.010
set_tracing_disabled(True)
RUN_CONFIG = RunConfig(tracing_disabled=True)


@function_tool
async def noop() -> str:
    return "ok"


@function_tool
async def sleep() -> str:
    await asyncio.sleep(SLEEP)
    return "ok"


class Scripted(Model):
    """``turns`` replies of ``calls`` calls to ``tool``, then a text reply."""

    def __init__(self, turns: int, calls: int, tool: str) -> None:
        self.turns, self.calls, self.tool, self.step = turns, calls, tool, 0

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        i = self.step
        self.step += 1
        out: list[Any]
        if i < self.turns:
            out = [
                ResponseFunctionToolCall(
                    arguments="{}",
                    call_id=f"call-{i}-{k}",
                    name=self.tool,
                    type="function_call",
                    id=f"fc-{i}-{k}",
                    status="completed",
                )
                for k in range(self.calls)
            ]
        else:
            text = ResponseOutputText(annotations=[], text="done", type="output_text")
            out = [
                ResponseOutputMessage(
                    id=f"msg-{i}",
                    content=[text],
                    role="assistant",
                    status="completed",
                    type="message",
                )
            ]
        return ModelResponse(output=out, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the benchmark does not stream")


async def _run(agents: list[Agent[Any]], max_turns: int) -> Timing:
    with Stopwatch() as watch:
        results = await asyncio.gather(
            *(Runner.run(a, "go", max_turns=max_turns, run_config=RUN_CONFIG) for a in agents)
        )
    assert all(r.final_output == "done" for r in results)
    return watch.timing


def _agent(turns: int, calls: int, tool: str) -> Agent[Any]:
    return Agent(name="bench", model=Scripted(turns, calls, tool), tools=[noop, sleep])


def w1(turns: int, inputs: Any) -> Timing:
    return asyncio.run(_run([_agent(turns, 1, "noop")], turns + 2))


def w2(calls: int, inputs: Any) -> Timing:
    return asyncio.run(_run([_agent(1, calls, "sleep")], 3))


def w3(runs: int, inputs: Any) -> Timing:
    return asyncio.run(_run([_agent(1, 1, "sleep") for _ in range(runs)], 3))
