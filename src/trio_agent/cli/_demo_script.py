"""The scripted session ``trio-agent demo`` plays: a model that tours the current folder.

The model is a :class:`~trio_agent.testing.ScriptedModel` whose responses are callables
of the request, so each step reads the real tool results so far and adapts to the folder:
list it, read two informative files at once, search for loose ends (and count lines with
bash, when allowed), then answer from what the tools returned. It only reads: the demo
never gives it a tool that writes.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

import trio

from .._core import _events as ev
from .._core._messages import AssistantMessage, Text, ToolCall, ToolResultMessage
from .._run._streams import StreamWrapper
from ..testing import ScriptedModel

if TYPE_CHECKING:
    from collections.abc import Sequence
    from contextlib import AbstractAsyncContextManager

    from .._core._model import Model, ModelRequest

__all__ = ["SYSTEM_PROMPT", "PacedModel", "demo_model", "prompt_for"]

SYSTEM_PROMPT = (
    "You are a coding agent. Explore the folder with your tools before answering, run "
    "independent tool calls in parallel, and never change a file."
)
MODEL = "scripted-demo"
PROVIDER = "offline"
CHUNK = 5
"""Characters per streamed text delta."""
GREP_PATTERN = r"\b(TODO|FIXME|XXX)\b"

# Files that say the most about a folder, best first (compared case-insensitively).
_TELLING = (
    "readme.md",
    "readme.rst",
    "readme.txt",
    "readme",
    "pyproject.toml",
    "package.json",
    "cargo.toml",
    "go.mod",
    "setup.py",
    "setup.cfg",
    "makefile",
    "cmakelists.txt",
)
_TEXTY = (".md", ".rst", ".txt", ".toml", ".cfg", ".ini", ".json", ".yaml", ".yml", ".py")


def prompt_for(folder_name: str) -> str:
    return f"Give me a quick tour of this folder ({folder_name}): what is it, and what is in it?"


def _reply(text: str, *calls: ToolCall) -> AssistantMessage:
    return AssistantMessage(
        content=(Text(text=text), *calls),
        stop_reason="tool_use" if calls else "stop",
        model=MODEL,
        provider=PROVIDER,
    )


def _result(request: ModelRequest, call_id: str) -> ToolResultMessage | None:
    for m in reversed(request.messages):
        if type(m) is ToolResultMessage and m.tool_call_id == call_id:
            return m
    return None


def _ok_details(request: ModelRequest, call_id: str) -> dict[str, Any] | None:
    r = _result(request, call_id)
    if r is None or r.is_error or not isinstance(r.details, dict):
        return None
    return r.details


def pick_files(files: Sequence[str], count: int = 2) -> list[str]:
    """The ``count`` files that probably say the most about a folder.

    Hidden files are never picked: they are where secrets live (``.env``), and the demo
    quotes what it reads.
    """
    ranked = sorted(
        (name for name in files if not name.startswith(".")),
        key=lambda name: (
            _TELLING.index(name.lower()) if name.lower() in _TELLING else len(_TELLING),
            not name.lower().endswith(_TEXTY),
            name,
        ),
    )
    return ranked[:count]


def _read_ids(files: Sequence[str]) -> list[str]:
    return [f"read-{i + 1}" for i in range(len(files))]


class _Session:
    """The four steps; each is called with the request the loop sends."""

    def __init__(self, *, bash: bool) -> None:
        self.bash = bash
        self.files: list[str] = []

    def look(self, request: ModelRequest) -> AssistantMessage:
        return _reply(
            "I'll start by listing what is in this folder.",
            ToolCall(id="ls-1", name="ls", arguments={"path": "."}),
        )

    def read(self, request: ModelRequest) -> AssistantMessage:
        listing = _ok_details(request, "ls-1")
        self.files = pick_files(listing["files"]) if listing else []
        if not self.files:
            return _reply(
                "There is no file at the top level, so I'll look for files further down.",
                ToolCall(id="find-1", name="find", arguments={"pattern": "*"}),
            )
        names = " and ".join(self.files)
        both = "both at once" if len(self.files) > 1 else "it"
        calls = [
            ToolCall(id=cid, name="read", arguments={"path": name, "limit": 60})
            for cid, name in zip(_read_ids(self.files), self.files, strict=True)
        ]
        return _reply(f"{names} should tell me what this is. Reading {both}.", *calls)

    def search(self, request: ModelRequest) -> AssistantMessage:
        calls = [ToolCall(id="grep-1", name="grep", arguments={"pattern": GREP_PATTERN})]
        text = "Now let me look for loose ends: TODO, FIXME and XXX markers"
        if self.bash and self.files:
            quoted = " ".join(shlex.quote(f) for f in self.files)
            calls.append(
                ToolCall(
                    id="bash-1",
                    name="bash",
                    arguments={"command": f"wc -l -- {quoted}", "timeout": 10},
                )
            )
            text += ", and count the lines of what I read with wc, in parallel"
        return _reply(text + ".", *calls)

    def answer(self, request: ModelRequest, folder_name: str) -> AssistantMessage:
        lines = [f"Here is what I found in {folder_name}:", ""]
        listing = _ok_details(request, "ls-1")
        if listing is None:
            lines.append("- I could not list the folder.")
        else:
            dirs, files = listing["dirs"], listing["files"]
            if not dirs and not files:
                lines.append("- The folder is empty.")
            else:
                # Visible names first: they say more than .git/ or .venv/.
                names = sorted([*(d + "/" for d in dirs), *files], key=lambda n: n[0] == ".")
                some = ", ".join(names[:6])
                lines.append(
                    f"- It holds {_count(len(dirs), 'folder')} and {_count(len(files), 'file')} "
                    f"at the top level ({some}{', …' if len(dirs) + len(files) > 6 else ''})."
                )
        for cid, name in zip(_read_ids(self.files), self.files, strict=True):
            lines.append(_describe_read(_result(request, cid), name))
        found = _result(request, "find-1")
        if found is not None and not self.files:
            count = found.details.get("count", 0) if isinstance(found.details, dict) else 0
            lines.append(f"- Further down, find sees {_count(count, 'path')}.")
        lines.append(_describe_grep(_result(request, "grep-1")))
        counted = _result(request, "bash-1")
        if counted is not None and not counted.is_error:
            totals = [ln.split()[0] for ln in counted.text.split("\n") if ln.endswith(" total")]
            if totals:
                lines.append(f"- Together they have {totals[0]} lines, says wc.")
        lines += [
            "",
            "Everything above came from your files, through the same workspace tools a real "
            "model would call (read-only here); only my words were scripted.",
        ]
        return _reply("\n".join(lines))


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _describe_read(result: ToolResultMessage | None, name: str) -> str:
    if result is None:
        return f"- {name}: no result."
    if result.is_error:
        return f"- {name} could not be read: {result.text.splitlines()[0]}"
    details = result.details if isinstance(result.details, dict) else {}
    first = ""
    for line in result.text.split("\n"):
        _, _, content = line.partition("\t")
        if content.strip():
            first = content.strip()
            break
    if len(first) > 70:
        first = first[:70] + "…"
    size = _count(details.get("total_lines", 0), "line")
    opening = f", and opens with “{first}”" if first else ""
    return f"- {name} has {size}{opening}."


def _describe_grep(result: ToolResultMessage | None) -> str:
    if result is None or result.is_error or not isinstance(result.details, dict):
        return "- The search for loose ends failed."
    n = result.details.get("matches", 0)
    searched = _count(result.details.get("files_searched", 0), "text file")
    if n == 0:
        return f"- No TODO, FIXME or XXX in {searched}: tidy."
    first = result.text.split("\n")[0].split(": ", 1)[0]
    more = "at least " if result.details.get("truncated") else ""
    return f"- {more}{_count(n, 'TODO/FIXME/XXX marker')} in {searched}, the first at {first}."


def demo_model(folder_name: str, *, bash: bool) -> ScriptedModel:
    """The scripted model of the demo, for a folder called ``folder_name``."""
    session = _Session(bash=bash)
    return ScriptedModel(
        [
            session.look,
            session.read,
            session.search,
            lambda request: session.answer(request, folder_name),
        ],
        chunk_size=CHUNK,
    )


class PacedModel:
    """Wraps a model so its stream goes at a human pace: a pause before each reply and
    ``pace`` seconds per text delta (``pace=0``: as fast as the loop takes it)."""

    def __init__(self, inner: Model, pace: float) -> None:
        self._inner = inner
        self._pace = pace

    def stream(self, request: ModelRequest) -> _PacedStream:
        return _PacedStream(self._inner.stream(request), self._pace)


class _PacedStream(StreamWrapper):
    """The wrapped stream, each event handed on after its pause."""

    __slots__ = ("_pace",)

    def __init__(self, inner: AbstractAsyncContextManager[Any], pace: float) -> None:
        super().__init__(inner)
        self._pace = pace

    async def __anext__(self) -> ev.AssistantEvent:
        event = await super().__anext__()
        if self._pace:
            if type(event) is ev.Start:
                await trio.sleep(self._pace * 15)  # a model takes a moment to start
            elif type(event) in (ev.TextDelta, ev.ThinkingDelta, ev.ToolCallStart):
                await trio.sleep(self._pace)
        return event
