"""The workspace tools' JSON Schemas, built by ``@tool``, describe the same parameters as
the schemas that were written by hand before (kept here verbatim as the reference):
names, types, required, descriptions, defaults and bounds. The one addition is
``additionalProperties: false``: ``@tool`` refuses unknown arguments, and a call with one
gets an error result naming it, through the loop, with the transcript still paired."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import trio

from trio_agent import (
    AssistantMessage,
    Context,
    Text,
    ToolCall,
    ToolContext,
    ToolResultMessage,
    UserMessage,
    check_transcript,
    run_agent_loop,
)
from trio_agent._core._arguments import InvalidArguments
from trio_agent.testing import ScriptedModel
from trio_agent.tools import workspace
from trio_agent.tools._bash import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from pathlib import Path

_PATH = {"type": "string", "description": "Path relative to the workspace (or absolute inside it)."}


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


HAND_WRITTEN: dict[str, dict[str, Any]] = {
    "read": _schema(
        {
            "path": _PATH,
            "offset": {
                "type": "integer",
                "minimum": 1,
                "description": "First line to read (1-based).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": "How many lines to read at most.",
            },
        },
        ["path"],
    ),
    "write": _schema({"path": _PATH, "content": {"type": "string"}}, ["path", "content"]),
    "edit": _schema(
        {
            "path": _PATH,
            "old": {"type": "string", "description": "The exact text to replace."},
            "new": {"type": "string", "description": "The text to put instead."},
        },
        ["path", "old", "new"],
    ),
    "ls": _schema({"path": {**_PATH, "default": "."}}, []),
    "find": _schema(
        {
            "pattern": {"type": "string", "description": "A glob, like src/**/*.py."},
            "path": {**_PATH, "description": "Folder to search (default: all)."},
        },
        ["pattern"],
    ),
    "grep": _schema(
        {
            "pattern": {"type": "string", "description": "A regular expression."},
            "path": {**_PATH, "description": "A file or folder to search (default: all)."},
            "ignore_case": {"type": "boolean", "default": False},
        },
        ["pattern"],
    ),
    "bash": _schema(
        {
            "command": {"type": "string"},
            "timeout": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": f"Seconds (default {DEFAULT_TIMEOUT:g}).",
            },
        },
        ["command"],
    ),
}


def test_schemas_match_the_hand_written_ones(tmp_path: Path) -> None:
    tools = workspace(tmp_path)
    assert [t.name for t in tools] == ["read", "write", "edit", "ls", "find", "grep", "bash"]
    for t in tools:
        built = dict(t.parameters)
        assert built.pop("additionalProperties") is False, t.name
        assert built == HAND_WRITTEN[t.name], t.name
        # Same order of the required names too (the model sees the list).
        assert built["required"] == HAND_WRITTEN[t.name]["required"], t.name


@pytest.mark.parametrize(
    ("name", "args", "problem"),
    [
        ("read", {"path": "a", "offset": 0}, "offset: 0 is less than the minimum of 1"),
        ("read", {"path": "a", "offset": None}, 'offset: null is not of type "integer"'),
        ("grep", {"pattern": "x", "path": ["a"]}, 'path: ["a"] is not of type "string"'),
        ("write", {"path": "a"}, '"content" is a required property'),
        ("ls", {"path": ".", "depth": 2}, "'depth' was unexpected"),
    ],
)
async def test_bad_arguments_are_refused_before_any_file_work(
    tmp_path: Path, name: str, args: dict[str, Any], problem: str
) -> None:
    tool = {t.name: t for t in workspace(tmp_path)}[name]
    call = ToolCall(id="c1", name=name, arguments=args)

    async def report(partial: object) -> None:
        pass

    with trio.fail_after(5), pytest.raises(InvalidArguments) as info:
        await tool.execute(call, args, ToolContext(call=call, report=report))
    assert problem in str(info.value)
    assert not list(await trio.Path(tmp_path).iterdir())  # nothing written


# Per tool: arguments it accepts, made distinct per call (``{}`` is "bad" or "good") so that
# a side effect of the refused call would show.
ACCEPTED: dict[str, dict[str, Any]] = {
    "read": {"path": "{}.txt"},
    "write": {"path": "{}-new.txt", "content": "written"},
    "edit": {"path": "{}.txt", "old": "before", "new": "after"},
    "ls": {"path": "."},
    "find": {"pattern": "*.txt"},
    "grep": {"pattern": "before"},
    "bash": {"command": "touch {}-ran"},
}


def _filled(args: dict[str, Any], which: str) -> dict[str, Any]:
    return {k: v.format(which) if isinstance(v, str) else v for k, v in args.items()}


@pytest.mark.parametrize("name", list(ACCEPTED))
async def test_an_unknown_argument_is_an_error_result_naming_it(tmp_path: Path, name: str) -> None:
    # A model's call with an argument the tool does not have (here ``encoding``) is not
    # run with that argument dropped: it gets an error result that names the argument,
    # and the same call without it, in the same batch, runs.
    for which in ("bad", "good"):
        (tmp_path / f"{which}.txt").write_text("before\n")
    bad = ToolCall(
        id="bad", name=name, arguments={**_filled(ACCEPTED[name], "bad"), "encoding": "utf-8"}
    )
    good = ToolCall(id="good", name=name, arguments=_filled(ACCEPTED[name], "good"))
    model = ScriptedModel(
        [
            AssistantMessage(content=(bad, good), stop_reason="tool_use"),
            AssistantMessage(content=(Text(text="done"),), stop_reason="stop"),
        ]
    )
    with trio.fail_after(20):
        result = await run_agent_loop(
            [UserMessage.text("go")], Context(tools=workspace(tmp_path)), model
        )
    check_transcript(result.transcript)
    assert result.reason == "stop"
    refused, ran = (m for m in result.messages if isinstance(m, ToolResultMessage))
    assert (refused.tool_call_id, ran.tool_call_id) == ("bad", "good")
    assert refused.is_error
    assert refused.text.startswith(f'Validation failed for tool "{name}":\n')
    assert "'encoding' was unexpected" in refused.text
    assert not ran.is_error, ran.text
    # The refused call did nothing; its twin did its work.
    assert (tmp_path / "bad.txt").read_text() == "before\n"
    assert not (tmp_path / "bad-new.txt").exists()
    assert not (tmp_path / "bad-ran").exists()
    if name in ("write", "edit", "bash"):
        effect = {"write": "good-new.txt", "edit": "good.txt", "bash": "good-ran"}[name]
        assert (tmp_path / effect).exists()
        if name == "edit":
            assert (tmp_path / "good.txt").read_text() == "after\n"
