"""A custom tool that reports progress while it works, and a run that shows it.

    python examples/tool_progress.py

``@trio_agent.tool`` builds the tool from an annotated async function: the docstring is
the description, the annotations the JSON Schema. A parameter annotated ``ToolContext``
receives the call's context; ``await ctx.report_progress(...)`` emits a
``ToolExecutionUpdate`` event (backpressured: it waits until the event is handed on).
The model is scripted (``ScriptedModel``), so this runs offline.
"""

from __future__ import annotations

import trio

from trio_agent import (
    AssistantMessage,
    Context,
    Text,
    ToolCall,
    ToolContext,
    ToolExecutionEnd,
    ToolExecutionUpdate,
    UserMessage,
    run_agent_loop,
    tool,
)
from trio_agent.testing import ScriptedModel


@tool
async def count_to(n: int, ctx: ToolContext) -> str:
    """Count slowly up to n, reporting each step.

    Args:
        n: where to stop (1 to 10).
    """
    for i in range(1, n + 1):
        await trio.sleep(0.01)
        await ctx.report_progress(f"{i}/{n}")
    return f"counted to {n}"


def show(event: object) -> None:
    if isinstance(event, ToolExecutionUpdate):
        print(f"  progress of {event.tool_name}: {event.partial}")
    elif isinstance(event, ToolExecutionEnd):
        print(f"  {event.tool_name} -> {event.result.text} ({event.outcome})")


async def main() -> None:
    model = ScriptedModel(
        [
            AssistantMessage(
                content=(ToolCall(id="c1", name="count_to", arguments={"n": 3}),),
                stop_reason="tool_use",
            ),
            AssistantMessage(content=(Text(text="Done counting."),), stop_reason="stop"),
        ]
    )
    result = await run_agent_loop(
        [UserMessage.text("count to three")],
        Context(tools=(count_to,)),
        model,
        on_event=show,
    )
    print(result.reason, result.messages[-1].text)  # type: ignore[union-attr]


if __name__ == "__main__":
    trio.run(main)
