"""``trio-agent demo``: an offline scripted session (the README round trip)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from . import _events as ev
from ._hooks import Context
from ._loop import open_agent_loop
from ._messages import AssistantMessage, Text, ToolCall, UserMessage
from ._serde import event_to_json
from ._tools import Tool, ToolContext
from .testing import ScriptedModel

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping

FILES = {"README.md": "# tiny-pi\nA small agent runtime.\n"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print events as JSON lines")


async def _read(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
    await trio.sleep(0.05)
    path = args["path"]
    if path not in FILES:
        raise FileNotFoundError(f"no such file: {path}")
    return FILES[path]


def _session() -> tuple[Context, ScriptedModel, UserMessage]:
    read = Tool(
        name="read",
        description="Read a text file.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
        execute=_read,
    )
    model = ScriptedModel(
        [
            AssistantMessage(
                content=(
                    Text(text="I'll read the project description first."),
                    ToolCall(id="call-1", name="read", arguments={"path": "README.md"}),
                ),
                stop_reason="tool_use",
            ),
            AssistantMessage(
                content=(Text(text="The project is called tiny-pi."),), stop_reason="stop"
            ),
        ],
        chunk_size=6,
    )
    context = Context(system_prompt="You are a helpful coding agent.", tools=(read,))
    return context, model, UserMessage.text("Read README.md and tell me the project name.")


def _show(event: ev.AgentEvent) -> None:
    if isinstance(event, ev.MessageUpdate) and isinstance(event.event, ev.TextDelta):
        print(event.event.delta, end="", flush=True)
    elif isinstance(event, ev.MessageEnd):
        m = event.message
        if m.role == "assistant":
            print()
        elif m.role == "user":
            print(f"user: {m.content[0].text if m.content else ''}")  # type: ignore[union-attr]
    elif isinstance(event, ev.ToolExecutionStart):
        print(f"  → {event.tool_name}({dict(event.args)})")
    elif isinstance(event, ev.ToolExecutionEnd):
        print(f"  ← {event.tool_name}: {event.outcome}, {event.result.text!r}")
    elif isinstance(event, ev.TurnStart):
        print(f"[turn {event.index}] ", end="")
    elif isinstance(event, ev.AgentEnd):
        print(f"end: {event.reason}")


async def _main(as_json: bool) -> int:
    context, model, prompt = _session()
    async with open_agent_loop([prompt], context, model) as run:
        async for event in run.events:
            if as_json:
                print(event_to_json(event))
            else:
                _show(event)
    result = run.result
    assert result is not None
    if not as_json:
        print(" → ".join(m.role for m in result.messages))
        print(f"steps {result.steps}, reason {result.reason}")
    return 0


def run(args: argparse.Namespace) -> int:
    return trio.run(_main, bool(args.json))
