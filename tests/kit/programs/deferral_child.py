"""A deferred run, and its resume, that test_deferral_crash.py kills with SIGKILL:
``python deferral_child.py TRANSCRIPT LEDGER PHASE``.

- ``defer``: a run whose reply calls ``lookup`` (runs), ``send`` (``approval="always"``:
  deferred) and ``lookup`` again (runs; its result is held back). The child prints
  ``DEFERRED`` once the run ended ``deferred`` (its transcript written), then blocks.
- ``resume``: resumes that transcript approving ``send``; ``send`` appends a line to
  LEDGER (the side effect that must happen at most once), prints ``RUNNING`` and
  blocks, so the parent kills it while the approved call runs.

Every execution of a tool appends ``<tool> <call id>`` to LEDGER (fsynced) first.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import trio

from trio_agent import (
    Approve,
    AssistantMessage,
    Context,
    JsonlTranscript,
    Text,
    Tool,
    ToolCall,
    ToolContext,
    UserMessage,
    load_transcript,
    resume,
    run_agent_loop,
)
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from collections.abc import Mapping

REPLY = AssistantMessage(
    content=(
        Text(text="Looking up, then sending."),
        ToolCall(id="l1", name="lookup", arguments={"q": "a"}),
        ToolCall(id="s1", name="send", arguments={"to": "ops@example.com"}),
        ToolCall(id="l2", name="lookup", arguments={"q": "b"}),
    ),
    stop_reason="tool_use",
    timestamp=1.0,
)
FINAL = AssistantMessage(content=(Text(text="Sent."),), stop_reason="stop", timestamp=2.0)


def note(ledger: str, line: str) -> None:
    with open(ledger, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def tools(ledger: str, *, block_send: bool = False) -> tuple[Tool, Tool]:
    async def lookup(call: ToolCall, args: Mapping[str, Any], _: ToolContext) -> str:
        await trio.to_thread.run_sync(note, ledger, f"lookup {call.id}")
        return f"found {args['q']}"

    async def send(call: ToolCall, args: Mapping[str, Any], _: ToolContext) -> str:
        await trio.to_thread.run_sync(note, ledger, f"send {call.id}")
        if block_send:
            print("RUNNING", flush=True)
            await trio.sleep_forever()
        return f"sent to {args['to']}"

    obj = {"type": "object"}
    return (
        Tool(name="lookup", description="look up", parameters=obj, execute=lookup),
        Tool(name="send", description="send mail", parameters=obj, execute=send, approval="always"),
    )


async def main(path: str, ledger: str, phase: str) -> None:
    if phase == "defer":
        async with JsonlTranscript(path) as transcript:
            result = await run_agent_loop(
                [UserMessage.text("Mail ops.", timestamp=0.5)],
                Context(tools=tools(ledger)),
                ScriptedModel([REPLY]),
                on_event=transcript,
            )
        assert result.reason == "deferred", result.reason
        print("DEFERRED", flush=True)
    else:
        loaded = await trio.to_thread.run_sync(load_transcript, path)
        async with JsonlTranscript(path) as transcript:
            await resume(
                loaded,
                {"s1": Approve()},
                model=ScriptedModel([FINAL]),
                tools=tools(ledger, block_send=True),
                on_event=transcript,
            )
    await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:4])
