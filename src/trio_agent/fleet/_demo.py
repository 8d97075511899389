"""The scripted fleet of ``trio-agent fleet --demo``, also used by the tests and the
benchmark: no key, no network.

Each demo task asks a question; its scripted model calls the ``lookup`` tool once (which
sleeps ``metadata["sleep"]`` seconds, like a slow API) and then answers, reporting token
usage as a provider would.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from trio_agent import AssistantMessage, Text, Tool, ToolCall, ToolResultMessage, Usage
from trio_agent.testing import ScriptedModel

from ._task import FleetTask, TaskSetup

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from trio_agent import ModelRequest, ToolContext

__all__ = ["DEMO_SYSTEM_PROMPT", "demo_factory", "demo_tasks"]

_MAX_REPLIES = 8
DEMO_SYSTEM_PROMPT = "You answer questions about numbers; look the number up first."


async def _lookup(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext | None) -> str:
    await trio.sleep(float(args.get("sleep", 0.0)))
    n = int(args["n"])
    return f"{n} squared is {n * n}"


LOOKUP = Tool(
    name="lookup",
    description="Look a number up (slowly).",
    parameters={
        "type": "object",
        "properties": {"n": {"type": "integer"}, "sleep": {"type": "number", "minimum": 0}},
        "required": ["n"],
    },
    execute=_lookup,
)


def demo_tasks(count: int, *, sleep: float = 0.01) -> Iterator[FleetTask]:
    """``count`` demo tasks, ids ``demo-00000``...; each one's tool sleeps ``sleep`` s."""
    width = max(5, len(str(count - 1)))
    for i in range(count):
        yield FleetTask(
            id=f"demo-{i:0{width}d}",
            prompt=f"What is {i} squared?",
            metadata={"n": i, "sleep": sleep},
        )


def _reply(n: int, sleep: float, request: ModelRequest) -> AssistantMessage:
    """Answer from the conversation, so a resumed task goes on where it stopped: look
    the number up (again, under a new call id, when the last lookup was aborted), then
    answer once a lookup succeeded."""
    results = [m for m in request.messages if type(m) is ToolResultMessage]
    if results and not results[-1].is_error:
        return AssistantMessage(
            content=(Text(text=f"{n} squared is {n * n}."),),
            stop_reason="stop",
            usage=Usage(input_tokens=70, output_tokens=9, cache_read_tokens=40),
            model="scripted",
        )
    suffix = f"-{len(results)}" if results else ""
    return AssistantMessage(
        content=(
            Text(text="Let me look that up."),
            ToolCall(id=f"call-{n}{suffix}", name="lookup", arguments={"n": n, "sleep": sleep}),
        ),
        stop_reason="tool_use",
        usage=Usage(input_tokens=40, output_tokens=12),
        model="scripted",
    )


def demo_factory(task: FleetTask) -> TaskSetup:
    """A scripted model for a demo task: a ``lookup`` call, then the answer."""
    n = int(task.metadata.get("n", 0))
    sleep = float(task.metadata.get("sleep", 0.0))
    respond = partial(_reply, n, sleep)
    model = ScriptedModel([respond] * _MAX_REPLIES)
    return TaskSetup(model=model, tools=(LOOKUP,), system_prompt=DEMO_SYSTEM_PROMPT)
