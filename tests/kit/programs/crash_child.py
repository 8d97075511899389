"""A run that test_crash.py kills with SIGKILL: ``python crash_child.py TRANSCRIPT SCENARIO``.

The run writes its transcript with a default ``JsonlTranscript`` (fsync per line) and
prints, on stdout, ``END <message JSON>`` once the sink has returned for each
``MessageEnd``, so the parent knows what must be on disk. Scenarios:

- ``mid_stream``: the second reply stops half-way through its stream, forever;
- ``mid_batch``: the first batch has one fast call and two that never finish;
- ``mid_sequential_batch``: the same batch run sequentially: ``c1`` finishes, ``c2``
  never does, ``c3`` never starts;
- ``between_turns``: ``prepare_next_turn`` blocks forever before the third request;
- ``free``: nothing blocks (tools sleep a little); the parent kills at some ``END`` line.

Where the run blocks, the child prints ``READY`` first.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import trio

from trio_agent import (
    AgentEvent,
    AssistantMessage,
    Context,
    JsonlTranscript,
    LoopConfig,
    MessageEnd,
    NextTurn,
    Text,
    Tool,
    ToolCall,
    ToolContext,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnContext,
    UserMessage,
    run_agent_loop,
)
from trio_agent._core._serde import message_to_json
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from collections.abc import Mapping

PROMPT = "Survey the project, then summarize it."


def script() -> list[AssistantMessage]:
    """The three replies of the run (shared with the parent, which resumes it)."""

    def calls(*ids: str) -> tuple[ToolCall, ...]:
        return tuple(ToolCall(id=i, name="slow", arguments={"label": i}) for i in ids)

    return [
        AssistantMessage(
            content=(Text(text="Let me look at three things at once."), *calls("c1", "c2", "c3")),
            stop_reason="tool_use",
            timestamp=1.0,
        ),
        AssistantMessage(
            content=(
                Text(text="The first survey is done; two more checks to make before I sum up."),
                *calls("c4", "c5"),
            ),
            stop_reason="tool_use",
            timestamp=2.0,
        ),
        AssistantMessage(
            content=(Text(text="The project is a trio agent loop."),),
            stop_reason="stop",
            timestamp=3.0,
        ),
    ]


def survey_tool(forever: frozenset[str] = frozenset()) -> Tool:
    """The run's one tool, ``slow``: a survey that takes 10 ms, or forever for the ids of
    ``forever`` (the tests kill the run while such calls are running)."""

    async def execute(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
        if call.id in forever:
            await trio.sleep_forever()
        await trio.sleep(0.01)
        return f"{args['label']} surveyed"

    return Tool(
        name="slow",
        description="A survey that takes a while.",
        parameters={
            "type": "object",
            "properties": {"label": {"type": "string"}},
            "required": ["label"],
        },
        execute=execute,
    )


def ready() -> None:
    print("READY", flush=True)


async def main(path: str, scenario: str) -> None:
    model = ScriptedModel(script(), chunk_size=5)
    forever = frozenset({"c2", "c3"}) if "batch" in scenario else frozenset()
    config = LoopConfig()
    if scenario == "mid_sequential_batch":
        config = LoopConfig(tool_execution="sequential")
    if scenario == "mid_stream":
        pause = model.pause_at(1, 6)  # request 2, after a few text deltas

        async def watch() -> None:
            await pause.reached.wait()
            ready()

    else:

        async def watch() -> None:
            await trio.lowlevel.checkpoint()

    if scenario == "between_turns":
        calls = 0

        async def prepare_next_turn(ctx: TurnContext) -> NextTurn | None:
            nonlocal calls
            calls += 1
            if calls == 2:
                ready()
                await trio.sleep_forever()
            await trio.lowlevel.checkpoint()
            return None

        config = LoopConfig(prepare_next_turn=prepare_next_turn)

    async with JsonlTranscript(path) as transcript:

        async def sink(event: AgentEvent) -> None:
            await transcript(event)
            if isinstance(event, MessageEnd):
                print("END", message_to_json(event.message), flush=True)
            elif (
                scenario == "mid_batch"
                and isinstance(event, ToolExecutionEnd)
                and event.call_id == "c1"
            ) or (
                scenario == "mid_sequential_batch"
                and isinstance(event, ToolExecutionStart)
                and event.call_id == "c2"
            ):
                ready()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            result = await run_agent_loop(
                [UserMessage.text(PROMPT, timestamp=0.5)],
                Context(system_prompt="You survey projects.", tools=(survey_tool(forever),)),
                model,
                config,
                on_event=sink,
            )
    print("DONE", result.reason, flush=True)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2])
