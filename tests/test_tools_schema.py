"""The workspace tools' JSON Schemas, built by ``@tool``, describe the same parameters as
the schemas that were written by hand before (kept here verbatim as the reference):
names, types, required, descriptions, defaults and bounds. The one addition is
``additionalProperties: false``: ``@tool`` refuses unknown arguments."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import trio

from trio_agent import ToolCall, ToolContext
from trio_agent._arguments import InvalidArguments
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
