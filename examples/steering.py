"""An Agent that is steered while its tools run, then given a follow-up.

    python examples/steering.py

``agent.steer(...)`` queues a message the model reads as soon as possible: after the
current tool batch, before the next request. ``agent.follow_up(...)`` queues one for
when the model would otherwise stop. Both are delivered exactly once, in order. The
model is scripted, so this runs offline; ``model.requests`` shows what it was sent.
"""

from __future__ import annotations

import trio

from trio_agent import AssistantMessage, Text, ToolCall, open_agent, tool
from trio_agent.testing import ScriptedModel


@tool
async def slow_search(query: str) -> str:
    """Search the notes (slowly).

    Args:
        query: what to look for.
    """
    await trio.sleep(0.2)
    return f"3 notes mention {query!r}"


def reply(text: str) -> AssistantMessage:
    return AssistantMessage(content=(Text(text=text),), stop_reason="stop")


async def main() -> None:
    model = ScriptedModel(
        [
            AssistantMessage(
                content=(ToolCall(id="c1", name="slow_search", arguments={"query": "trio"}),),
                stop_reason="tool_use",
            ),
            reply("Three notes; only the newest matters, as you said."),
            reply("Summary: use nurseries."),
        ]
    )
    async with open_agent(model, tools=[slow_search], system_prompt="Be brief.") as agent:
        async with trio.open_nursery() as nursery:

            async def steer_soon() -> None:
                await trio.sleep(0.05)  # while slow_search runs
                agent.steer("only the newest note matters")
                agent.follow_up("now summarise it")

            nursery.start_soon(steer_soon)
            result = await agent.prompt("what do my notes say about trio?")
        print(result.reason, "after", len(model.requests), "requests")
        for message in agent.state.messages:
            text = "".join(getattr(block, "text", "") for block in message.content)
            print(f"  {message.role}: {text}")


if __name__ == "__main__":
    trio.run(main)
