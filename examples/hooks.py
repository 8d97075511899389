"""Hooks that block a tool call, rewrite its arguments, and edit its result.

    python examples/hooks.py

``LoopConfig.before_tool_call`` sees each call after its arguments were validated and
before it runs: return ``BeforeToolCallResult(block=True, reason=...)`` to refuse it
(the model reads the reason as an error result, the transcript stays paired), or
``BeforeToolCallResult(args=...)`` to run it with other arguments (validated again).
``after_tool_call`` may replace what the model reads. Hooks may be plain or async.
"""

from __future__ import annotations

import trio

from trio_agent import (
    AfterToolCallContext,
    AfterToolCallResult,
    AssistantMessage,
    BeforeToolCallContext,
    BeforeToolCallResult,
    Context,
    LoopConfig,
    Text,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    run_agent_loop,
    tool,
)
from trio_agent.testing import ScriptedModel


@tool
async def shell(command: str, seconds: int = 10) -> str:
    """Run a shell command (a stand-in: it only echoes).

    Args:
        command: the command line.
        seconds: how long it may run.
    """
    return f"ran {command!r} for at most {seconds} s"


def before(ctx: BeforeToolCallContext) -> BeforeToolCallResult | None:
    command = str(ctx.args.get("command", ""))
    if "rm -rf" in command:
        return BeforeToolCallResult(block=True, reason="destructive commands are not allowed")
    if ctx.args.get("seconds", 10) > 60:
        # Rewrite: no call may run longer than a minute.
        return BeforeToolCallResult(args={**ctx.args, "seconds": 60})
    return None


async def after(ctx: AfterToolCallContext) -> AfterToolCallResult | None:
    # Keep secrets out of what the model reads (and out of the transcript).
    text = "".join(getattr(block, "text", "") for block in ctx.result.content)
    if "SECRET" in text:
        return AfterToolCallResult(content=text.replace("SECRET", "[redacted]"))
    return None


async def main() -> None:
    calls = (
        ToolCall(id="c1", name="shell", arguments={"command": "rm -rf /"}),
        ToolCall(id="c2", name="shell", arguments={"command": "make", "seconds": 3600}),
        ToolCall(id="c3", name="shell", arguments={"command": "echo SECRET"}),
    )
    model = ScriptedModel(
        [
            AssistantMessage(content=calls, stop_reason="tool_use"),
            AssistantMessage(content=(Text(text="Two ran, one was refused."),), stop_reason="stop"),
        ]
    )
    result = await run_agent_loop(
        [UserMessage.text("clean up and build")],
        Context(tools=(shell,)),
        model,
        LoopConfig(before_tool_call=before, after_tool_call=after),
    )
    for message in result.messages:
        if isinstance(message, ToolResultMessage):
            state = "error" if message.is_error else "ok"
            print(f"{message.tool_call_id} {state}: {message.text}")


if __name__ == "__main__":
    trio.run(main)
