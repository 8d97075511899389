"""A JSONL transcript survives a crash, and the run is resumed from it.

    python examples/resume_after_crash.py [FOLDER]

First a child process runs an agent whose transcript goes to ``FOLDER/run.jsonl``
(``JsonlTranscript``: one JSON line per finished message, fsync'd), and dies in the
middle of a tool call (``os._exit``: no clean-up, as in a power cut or a kill -9). Then
this process loads what was written (``load_transcript`` accepts a torn last line),
``repair`` answers the call that never got a result, ``write_transcript`` replaces the
file atomically, and a new run goes on from there, appending to the same file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import trio

from trio_agent import (
    AssistantMessage,
    Context,
    JsonlTranscript,
    Text,
    ToolCall,
    UserMessage,
    check_transcript,
    load_transcript,
    repair,
    run_agent_loop,
    tool,
    write_transcript,
)
from trio_agent.testing import ScriptedModel


@tool
async def deploy(target: str) -> str:
    """Deploy to a target.

    Args:
        target: where to deploy.
    """
    if os.environ.get("EXAMPLE_CRASH"):
        os._exit(9)  # the process dies mid-call: nothing is cleaned up
    return f"deployed to {target}"


def call(call_id: str, target: str) -> AssistantMessage:
    return AssistantMessage(
        content=(ToolCall(id=call_id, name="deploy", arguments={"target": target}),),
        stop_reason="tool_use",
    )


async def first_run(path: Path) -> None:
    """The run that crashes (in the child process)."""
    model = ScriptedModel([call("c1", "staging")])
    async with JsonlTranscript(path) as sink:
        await run_agent_loop(
            [UserMessage.text("deploy to staging")], Context(tools=(deploy,)), model, on_event=sink
        )


async def resume(path: Path) -> None:
    loaded = load_transcript(path)
    print("after the crash:", [m.role for m in loaded.messages], "torn:", loaded.torn_line)
    messages = repair(loaded.messages)  # the unanswered call gets an error result
    check_transcript(messages)  # paired: raises nothing
    write_transcript(path, messages)
    done = AssistantMessage(content=(Text(text="Deployed."),), stop_reason="stop")
    model = ScriptedModel([call("c2", "staging"), done])
    async with JsonlTranscript(path) as sink:
        result = await run_agent_loop(
            [], Context(messages=messages, tools=(deploy,)), model, on_event=sink
        )
    print("resumed:", result.reason, result.messages[-1].content[0].text)  # type: ignore[union-attr]
    print("on disk:", [m.role for m in load_transcript(path).messages])


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    path = folder / "run.jsonl"
    if os.environ.get("EXAMPLE_CRASH"):
        trio.run(first_run, path)
        return
    child = subprocess.run(
        [sys.executable, __file__, str(folder)],
        env={**os.environ, "EXAMPLE_CRASH": "1"},
        check=False,
    )
    print("the first run's process died with exit code", child.returncode)
    trio.run(resume, path)


if __name__ == "__main__":
    main()
