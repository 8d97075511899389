from __future__ import annotations

import trio

from trio_agent import (
    AssistantMessage,
    Context,
    Text,
    Tool,
    ToolCall,
    UserMessage,
    check_transcript,
    run_agent_loop,
)
from trio_agent.testing import ScriptedModel


async def test_readme_round_trip() -> None:
    async def read(call: object, args: object, ctx: object) -> str:
        await trio.sleep(0.01)
        return "# tiny-pi"

    tool = Tool(
        name="read",
        description="read",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
        execute=read,
    )
    model = ScriptedModel(
        [
            AssistantMessage(
                content=(ToolCall(id="c1", name="read", arguments={"path": "README.md"}),),
                stop_reason="tool_use",
            ),
            AssistantMessage(content=(Text(text="tiny-pi"),), stop_reason="stop"),
        ]
    )
    result = await run_agent_loop([UserMessage.text("read it")], Context(tools=(tool,)), model)
    assert [m.role for m in result.messages] == ["user", "assistant", "tool_result", "assistant"]
    assert result.steps == 2
    assert result.reason == "stop"
    check_transcript(result.transcript)
