"""Checks shared by the fleet tests: results.jsonl and transcripts, complete and paired."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from trio_agent import AssistantMessage, check_transcript, load_transcript

if TYPE_CHECKING:
    from collections.abc import Callable, Collection
    from pathlib import Path


def fleet_cli(*args: str) -> list[str]:
    """The command line of ``trio-agent fleet ARGS`` run by this Python."""
    return [sys.executable, "-m", "trio_agent.cli", "fleet", *args]


def results_reach(out: Path, count: int) -> Callable[[], bool]:
    """A check that ``out/results.jsonl`` holds at least ``count`` lines."""
    results = out / "results.jsonl"
    return lambda: results.exists() and results.read_bytes().count(b"\n") >= count


def result_lines(out: Path) -> list[dict[str, Any]]:
    """Every whole line of results.jsonl."""
    data = (out / "results.jsonl").read_bytes()
    return [json.loads(line) for line in data.split(b"\n") if line.strip()]


def assert_fleet_complete(
    out: Path, ids: list[str], *, failed: Collection[str] = ()
) -> list[dict[str, Any]]:
    """Every task exactly once in results.jsonl; each but those of ``failed`` ended
    ``stop`` with a demo answer, its transcript whole and paired; returns the result
    lines."""
    lines = result_lines(out)
    recorded = [line["id"] for line in lines]
    assert len(recorded) == len(set(recorded)), "a task was recorded twice"
    assert sorted(recorded) == sorted(ids)
    for line in lines:
        if line["id"] in failed:
            assert line["reason"] == "failed", line
            continue
        assert line["reason"] == "stop", line
        assert line["error"] is None
        loaded = load_transcript(out / line["transcript"])
        assert loaded.whole
        check_transcript(loaded.messages)
        last = loaded.messages[-1]
        assert type(last) is AssistantMessage
        assert last.text.endswith(" squared is " + str(int(line["id"].split("-")[1]) ** 2) + ".")
        steps = sum(1 for m in loaded.messages if type(m) is AssistantMessage)
        assert line["steps"] == steps
        assert line["usage"]["input_tokens"] > 0
    return lines


def transcripts_load_and_pair(out: Path) -> int:
    """Every transcript under ``out`` loads whole and is paired; returns how many there
    are (a storage failure must leave no empty or torn file behind)."""
    count = 0
    for path in (out / "transcripts").iterdir():
        loaded = load_transcript(path)
        assert loaded.whole, path
        check_transcript(loaded.messages)
        count += 1
    return count


def deferral_factory(task: Any) -> Any:
    """A fleet task whose reply calls ``send`` (``approval="always"``: it waits) and
    ``look``; once both are answered the model says done. Each execution appends
    ``<tool> <task id>`` to the file ``task.metadata["ledger"]``."""
    import trio

    from trio_agent import ModelRequest, Tool, ToolResultMessage
    from trio_agent.fleet import TaskSetup
    from trio_agent.testing import ScriptedModel

    from .loop import call, reply, tool_use

    ledger = task.metadata["ledger"]

    def respond(request: ModelRequest) -> AssistantMessage:
        if any(isinstance(m, ToolResultMessage) for m in request.messages):
            return reply("done")
        return tool_use(call("s", "send"), call("k", "look"))

    def make(name: str, **kwargs: Any) -> Tool:
        async def execute(c: Any, args: Any, ctx: Any) -> str:
            async with await trio.open_file(ledger, "a") as f:
                await f.write(f"{name} {task.id}\n")
            return f"{name} ok"

        return Tool(
            name=name, description=name, parameters={"type": "object"}, execute=execute, **kwargs
        )

    return TaskSetup(
        model=ScriptedModel([respond, respond]),
        tools=(make("send", approval="always"), make("look")),
    )
