"""``@trio_agent.tool``: schemas from annotations, docstrings, conversion to the annotated
types, injected context, and real runs through the loop."""

# No `from __future__ import annotations` here: the decorated functions below are
# inspected at run time, and some annotations name classes defined in the tests.

import enum
import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

import attrs
import msgspec
import pytest
import trio

import trio_agent
from tests.kit.loop import text_of
from trio_agent import (
    AgentEvent,
    AssistantMessage,
    Context,
    Text,
    Tool,
    ToolCall,
    ToolContext,
    ToolExecutionEnd,
    ToolExecutionUpdate,
    ToolOutput,
    ToolResultMessage,
    UserMessage,
    run_agent_loop,
    tool,
)
from trio_agent._core._arguments import InvalidArguments
from trio_agent._core._tool_decorator import parse_docstring
from trio_agent.testing import ScriptedModel


@attrs.frozen
class Point:
    x: int
    y: float = 0.0


@attrs.frozen
class Polygon:
    name: str
    points: tuple[Point, ...] = ()


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


async def run_calls(
    t: Tool, *arguments: Mapping[str, Any]
) -> tuple[list[ToolResultMessage], list[AgentEvent], ScriptedModel, str]:
    """One real run: the model calls ``t`` once per ``arguments``, then stops."""
    calls = tuple(ToolCall(id=f"c{i}", name=t.name, arguments=a) for i, a in enumerate(arguments))
    model = ScriptedModel(
        [
            AssistantMessage(content=calls, stop_reason="tool_use"),
            AssistantMessage(content=(Text(text="done"),), stop_reason="stop"),
        ]
    )
    events: list[AgentEvent] = []
    with trio.fail_after(5):
        result = await run_agent_loop(
            [UserMessage.text("go")], Context(tools=(t,)), model, on_event=events.append
        )
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    return results, events, model, result.reason


# --- the tool and its schema -------------------------------------------------------------


@tool
async def read(path: str, offset: int | None = None, limit: int = 100) -> str:
    """Read a text file.

    Lines are numbered from 1.

    Args:
        path: the file, relative to
            the workspace.
        offset (int): first line to show.
        limit: how many lines to show.

    Returns:
        The numbered lines.
    """
    await trio.lowlevel.checkpoint()
    return f"{path}:{offset}:{limit}"


def test_read_tool() -> None:
    assert isinstance(read, Tool)
    assert read.name == "read"
    assert read.label is None
    assert read.execution_mode == "parallel"
    assert read.timeout is None
    assert read.description == (
        "Read a text file.\n\nLines are numbered from 1.\n\nReturns:\n    The numbered lines."
    )
    assert read.parameters == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "the file, relative to the workspace."},
            "offset": {
                "anyOf": [{"type": "integer"}, {"type": "null"}],
                "default": None,
                "description": "first line to show.",
            },
            "limit": {"type": "integer", "default": 100, "description": "how many lines to show."},
        },
        "required": ["path"],
        "additionalProperties": False,
    }


async def test_read_through_the_loop() -> None:
    results, _, model, reason = await run_calls(
        read, {"path": "a.txt"}, {"path": "b.txt", "offset": "3", "limit": 5.0}
    )
    assert [text_of(r) for r in results] == ["a.txt:None:100", "b.txt:3:5"]
    assert not any(r.is_error for r in results)
    assert reason == "stop"
    spec = model.requests[0].tools[0]
    assert (spec.name, spec.description, spec.parameters) == (
        read.name,
        read.description,
        read.parameters,
    )


async def test_invalid_arguments_never_reach_the_function() -> None:
    called = False

    @tool
    async def flag(on: bool) -> str:
        nonlocal called
        called = True
        await trio.lowlevel.checkpoint()
        return "ok"

    results, events, _, _ = await run_calls(flag, {"on": "yes"}, {"on": "1"}, {"of": True})
    assert not called
    ends = [e for e in events if isinstance(e, ToolExecutionEnd)]
    assert [e.outcome for e in ends] == ["invalid_arguments"] * 3
    assert text_of(results[0]) == (
        'Validation failed for tool "flag":\n'
        '  - on: "yes" is not of type "boolean"\n\n'
        'Received arguments:\n{\n  "on": "yes"\n}'
    )
    assert text_of(results[2]).splitlines()[1:3] == [
        "  - root: Additional properties are not allowed ('of' was unexpected)",
        '  - on: "on" is a required property',
    ]


def test_options_and_bare_use_agree() -> None:
    def shim(raw: Mapping[str, Any]) -> Mapping[str, Any]:
        return raw

    async def grep(pattern: str) -> str:
        """Search."""
        await trio.lowlevel.checkpoint()
        return pattern

    plain = tool(grep)
    custom = tool(
        name="search",
        description="Find text.",
        label="Search files",
        timeout=2.5,
        execution_mode="sequential",
        prepare_arguments=shim,
    )(grep)
    assert (plain.name, plain.description, plain.label) == ("grep", "Search.", None)
    assert (custom.name, custom.description, custom.label) == (
        "search",
        "Find text.",
        "Search files",
    )
    assert (custom.timeout, custom.execution_mode, custom.prepare_arguments) == (
        2.5,
        "sequential",
        shim,
    )
    assert custom.parameters == plain.parameters
    assert trio_agent.tool is tool
    assert "tool" in trio_agent.__all__


# --- annotations → JSON Schema ------------------------------------------------------------

SCHEMAS: list[tuple[Any, dict[str, Any]]] = [
    (str, {"type": "string"}),
    (int, {"type": "integer"}),
    (float, {"type": "number"}),
    (bool, {"type": "boolean"}),
    (list[str], {"type": "array", "items": {"type": "string"}}),
    (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
    (
        tuple[int, str],
        {
            "type": "array",
            "minItems": 2,
            "maxItems": 2,
            "prefixItems": [{"type": "integer"}, {"type": "string"}],
            "items": False,
        },
    ),
    (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
    (Literal["a", "b"], {"enum": ["a", "b"]}),
    (str | None, {"anyOf": [{"type": "string"}, {"type": "null"}]}),
    (Color, {"$ref": "#/$defs/Color"}),
    (Annotated[int, msgspec.Meta(ge=1)], {"type": "integer", "minimum": 1}),
    (Any, {}),
]


@pytest.mark.parametrize(("annotation", "expected"), SCHEMAS, ids=[repr(s[0]) for s in SCHEMAS])
def test_annotation_schemas(annotation: Any, expected: dict[str, Any]) -> None:
    async def f(x):  # type: ignore[no-untyped-def]
        await trio.lowlevel.checkpoint()
        return ""

    f.__annotations__ = {"x": annotation, "return": str}
    t = tool(f)
    assert t.parameters["properties"] == {"x": expected}
    assert t.parameters["required"] == ["x"]


def test_attrs_classes_go_to_defs() -> None:
    @tool
    async def draw(shape: Polygon, around: Point | None = None) -> str:
        await trio.lowlevel.checkpoint()
        return ""

    assert draw.parameters == {
        "type": "object",
        "properties": {
            "shape": {"$ref": "#/$defs/Polygon"},
            "around": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}], "default": None},
        },
        "required": ["shape"],
        "additionalProperties": False,
        "$defs": {
            "Polygon": {
                "title": "Polygon",
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "points": {
                        "type": "array",
                        "items": {"$ref": "#/$defs/Point"},
                        "default": [],
                    },
                },
                "required": ["name"],
            },
            "Point": {
                "title": "Point",
                "type": "object",
                "properties": {"x": {"type": "integer"}, "y": {"type": "number", "default": 0.0}},
                "required": ["x"],
            },
        },
    }


def test_a_tool_without_parameters() -> None:
    @tool
    async def now() -> str:
        await trio.lowlevel.checkpoint()
        return "12:00"

    assert now.parameters == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }
    assert now.description == ""


def test_an_annotated_description_beats_the_docstring() -> None:
    @tool
    async def f(
        a: Annotated[int, msgspec.Meta(description="from the annotation", ge=0)],
        b: Annotated[int, msgspec.Meta(ge=1)],
    ) -> str:
        """F.

        Args:
            a: from the docstring.
            b: from the docstring.
        """
        await trio.lowlevel.checkpoint()
        return ""

    assert f.parameters["properties"] == {
        "a": {"description": "from the annotation", "type": "integer", "minimum": 0},
        "b": {"description": "from the docstring.", "type": "integer", "minimum": 1},
    }


# --- conversion to the annotated types ------------------------------------------------------


async def test_arguments_arrive_as_the_annotated_types() -> None:
    seen: list[tuple[Any, ...]] = []

    @tool
    async def draw(
        shape: Polygon,
        scale: float,
        count: int,
        tags: tuple[str, ...],
        color: Color,
        mode: Literal["fill", "line"] = "line",
        pair: tuple[int, str] | None = None,
    ) -> str:
        seen.append((shape, scale, count, tags, color, mode, pair))
        await trio.lowlevel.checkpoint()
        return "drawn"

    results, _, _, _ = await run_calls(
        draw,
        {
            "shape": {"name": "tri", "points": [{"x": 1}, {"x": "2", "y": "0.5"}]},
            "scale": 2,
            "count": 3.0,
            "tags": ["a", "b"],
            "color": "blue",
            "mode": "fill",
            "pair": '[1, "one"]',
        },
    )
    assert text_of(results[0]) == "drawn"
    shape, scale, count, tags, color, mode, pair = seen[0]
    assert shape == Polygon(name="tri", points=(Point(x=1), Point(x=2, y=0.5)))
    assert (type(scale), scale) == (float, 2.0)
    assert (type(count), count) == (int, 3)
    assert tags == ("a", "b")
    assert color is Color.BLUE
    assert mode == "fill"
    assert pair == (1, "one")


async def test_lossy_values_are_refused() -> None:
    @tool
    async def take(count: int, point: Point) -> str:
        await trio.lowlevel.checkpoint()
        return "taken"

    results, _, _, _ = await run_calls(
        take,
        {"count": 3.5, "point": {"x": 1}},
        {"count": None, "point": {"x": 1}},
        {"count": 1, "point": {"x": "1.5"}},
        {"count": "yes", "point": {"x": 1}},
    )
    assert all(r.is_error for r in results)
    assert [text_of(r).splitlines()[1] for r in results] == [
        '  - count: 3.5 is not of type "integer"',
        '  - count: null is not of type "integer"',
        '  - point/x: "1.5" is not of type "integer"',
        '  - count: "yes" is not of type "integer"',
    ]


async def test_direct_calls_are_validated_too() -> None:
    # execute() may be called without the loop; the non-strict conversion must still
    # never see unvalidated values ("1" would become True).
    @tool
    async def flag(on: bool) -> str:
        await trio.lowlevel.checkpoint()
        return repr(on)

    call = ToolCall(id="c", name="flag", arguments={"on": "1"})

    async def report(partial: Any) -> None:
        await trio.lowlevel.checkpoint()

    ctx = ToolContext(call=call, report=report)
    with pytest.raises(InvalidArguments, match='Validation failed for tool "flag"'):
        await flag.execute(call, call.arguments, ctx)
    assert await flag.execute(call, {"on": "true"}, ctx) == "True"


async def test_mutable_defaults_are_not_shared() -> None:
    seen: list[list[str]] = []

    @tool
    async def collect(items: list[str] = ["a"]) -> str:  # noqa: B006 - the point of the test
        items.append("x")
        seen.append(items)
        await trio.lowlevel.checkpoint()
        return ""

    assert collect.parameters["properties"]["items"]["default"] == ["a"]
    await run_calls(collect, {}, {})
    assert seen == [["a", "x"], ["a", "x"]]


# --- injected context, call, results ------------------------------------------------------


async def test_context_and_call_are_injected() -> None:
    @tool
    async def slow(ctx: ToolContext, steps: int, call: ToolCall) -> ToolOutput:
        for i in range(steps):
            await ctx.report_progress(i)
        return ToolOutput(content=f"{call.id} did {steps}", details={"steps": steps})

    assert slow.parameters["properties"] == {"steps": {"type": "integer"}}
    results, events, _, _ = await run_calls(slow, {"steps": 3})
    assert text_of(results[0]) == "c0 did 3"
    assert results[0].details == {"steps": 3}
    updates = [e.partial for e in events if isinstance(e, ToolExecutionUpdate)]
    assert updates == [0, 1, 2]


async def test_any_name_annotated_tool_context_is_injected() -> None:
    @tool
    async def who(
        context: Annotated[ToolContext, "injected"], n: int, c: ToolCall | None = None
    ) -> str:
        await trio.lowlevel.checkpoint()
        assert c is not None
        return f"{context.tool_name}:{n}:{c.id}"

    assert list(who.parameters["properties"]) == ["n"]
    results, _, _, _ = await run_calls(who, {"n": 1})
    assert text_of(results[0]) == "who:1:c0"


async def test_positional_only_parameters() -> None:
    @tool
    async def pos(a: int, /, b: str, *, c: bool = False) -> str:
        await trio.lowlevel.checkpoint()
        return f"{a}{b}{c}"

    results, _, _, _ = await run_calls(pos, {"a": 1, "b": "x"})
    assert text_of(results[0]) == "1xFalse"


async def test_terminate_and_failures() -> None:
    @tool
    async def finish(ok: bool) -> ToolOutput:
        await trio.lowlevel.checkpoint()
        if not ok:
            raise RuntimeError("cannot finish")
        return ToolOutput(content="finished", terminate=True)

    results, _, _, reason = await run_calls(finish, {"ok": True})
    assert reason == "terminated"
    assert text_of(results[0]) == "finished"
    results, events, _, reason = await run_calls(finish, {"ok": False})
    assert reason == "stop"
    assert results[0].is_error
    assert text_of(results[0]) == "cannot finish"
    assert [e.outcome for e in events if isinstance(e, ToolExecutionEnd)] == ["error"]


# --- decoration errors ------------------------------------------------------------------------


def test_refuses_what_it_cannot_describe() -> None:
    def not_async(x: int) -> str:
        return ""

    async def star_args(*xs: int) -> str:
        await trio.lowlevel.checkpoint()
        return ""

    async def star_kwargs(**kw: int) -> str:
        await trio.lowlevel.checkpoint()
        return ""

    async def unannotated(x) -> str:  # type: ignore[no-untyped-def]
        await trio.lowlevel.checkpoint()
        return ""

    async def opaque(x: trio.Lock) -> str:
        await trio.lowlevel.checkpoint()
        return ""

    async def unresolvable(x: "NoSuchType") -> str:  # type: ignore[name-defined]  # noqa: F821
        await trio.lowlevel.checkpoint()
        return ""

    cases: Sequence[tuple[Any, str]] = [
        (not_async, "needs an async function"),
        (star_args, r"cannot describe \*args or \*\*kwargs"),
        (star_kwargs, r"cannot describe \*args or \*\*kwargs"),
        (unannotated, "needs an annotation on parameter 'x'"),
        (opaque, "cannot build a JSON Schema"),
        (unresolvable, "cannot resolve the annotations"),
    ]
    for fn, message in cases:
        with pytest.raises(TypeError, match=message):
            tool(fn)


# --- docstrings ----------------------------------------------------------------------------

DOCSTRINGS: list[tuple[str | None, str, dict[str, str]]] = [
    (None, "", {}),
    ("One line.", "One line.", {}),
    (
        """Summary.

        Args:
            a: first.
            b (int, optional): second,
                continued
                twice.
            *rest: ignored entries are still parsed.

        Raises:
            ValueError: when.
        """,
        "Summary.\n\nRaises:\n    ValueError: when.",
        {
            "a": "first.",
            "b": "second, continued twice.",
            "rest": "ignored entries are still parsed.",
        },
    ),
    (
        """Summary.
        Parameters:
            x: the x.

            y: after a blank line.
        """,
        "Summary.",
        {"x": "the x.", "y": "after a blank line."},
    ),
    (
        """Summary.

        Body mentions Args: inline, which is not a section.
        """,
        "Summary.\n\nBody mentions Args: inline, which is not a section.",
        {},
    ),
]


@pytest.mark.parametrize(("doc", "description", "args"), DOCSTRINGS)
def test_parse_docstring(doc: str | None, description: str, args: dict[str, str]) -> None:
    assert parse_docstring(doc) == (description, args)


def test_schemas_are_plain_json() -> None:
    # What the model is sent must be plain JSON data (no tuples or enums left inside).
    @tool
    async def draw(shape: Polygon, color: Color = Color.RED, at: tuple[int, int] = (0, 0)) -> str:
        await trio.lowlevel.checkpoint()
        return ""

    assert draw.parameters["properties"]["color"]["default"] == "red"
    assert draw.parameters["properties"]["at"]["default"] == [0, 0]
    for t in (read, draw):
        assert json.loads(json.dumps(t.parameters)) == t.parameters
