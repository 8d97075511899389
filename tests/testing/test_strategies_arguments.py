"""``tool_arguments``: arguments drawn from a tool's own JSON Schema pass (or, in invalid
mode, fail) the loop's own argument check, on schemas of every common shape."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

import attrs
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings

import trio_agent
from tests.kit.loop import make_tool
from trio_agent import Tool, ToolCall, ToolContext, ToolOutput
from trio_agent._core._arguments import InvalidArguments, check_arguments
from trio_agent.testing import tool_arguments

if TYPE_CHECKING:
    from collections.abc import Mapping

# A fixed number of draws per schema whatever the profile: the rates below are measured
# over these (5 schemas x 60 = 300 draws per mode).
DRAWS = settings(
    max_examples=60,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


async def _echo(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput | str:
    return "ok"


@attrs.frozen
class Point:
    x: int
    y: float


placed: list[tuple[str, Point, tuple[str, ...], str, int]] = []


@trio_agent.tool
async def place(
    name: str,
    at: Point,
    tags: tuple[str, ...],
    mode: Literal["a", "b"] = "a",
    count: Annotated[int, msgspec.Meta(ge=1, le=9)] = 1,
) -> str:
    """Place a thing at a point."""
    placed.append((name, at, tags, mode, count))
    return "placed"


SCHEMAS: dict[str, Tool] = {
    "nested": make_tool(
        "nested",
        parameters={
            "type": "object",
            "properties": {
                "a": {
                    "type": "object",
                    "properties": {
                        "b": {
                            "type": "array",
                            "items": {"type": "integer", "minimum": 0, "maximum": 5},
                            "minItems": 1,
                            "maxItems": 4,
                        },
                        "c": {"type": "boolean"},
                    },
                    "required": ["b"],
                    "additionalProperties": False,
                }
            },
            "required": ["a"],
            "additionalProperties": False,
        },
    ),
    "enums and bounds": make_tool(
        "enums",
        parameters={
            "type": "object",
            "properties": {
                "color": {"enum": ["red", "green", "blue"]},
                "level": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                "count": {"type": "integer", "minimum": 1, "maximum": 3},
            },
            "required": ["color", "level", "count"],
            "additionalProperties": False,
        },
    ),
    "string patterns": make_tool(
        "patterns",
        parameters={
            "type": "object",
            "properties": {
                "id": {"type": "string", "pattern": "^[a-z]{3}-[0-9]{2}$"},
                "path": {"type": "string", "minLength": 1, "maxLength": 20},
            },
            "required": ["id", "path"],
        },
    ),
    "arrays of objects": make_tool(
        "arrays",
        parameters={
            "type": "object",
            "properties": {
                "edits": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"old": {"type": "string"}, "new": {"type": "string"}},
                        "required": ["old", "new"],
                        "additionalProperties": False,
                    },
                    "uniqueItems": True,
                    "maxItems": 3,
                },
            },
            "required": ["edits"],
            "additionalProperties": False,
        },
    ),
    "@tool function": place,
}


def _passes(tool: Tool, args: Mapping[str, Any]) -> bool:
    try:
        check_arguments(tool, args)
    except InvalidArguments:
        return False
    return True


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_valid_arguments_pass_the_tools_own_check(name: str) -> None:
    tool = SCHEMAS[name]
    verdicts: list[bool] = []

    @DRAWS
    @given(args=tool_arguments(tool))
    def draw(args: dict[str, Any]) -> None:
        verdicts.append(_passes(tool, args))

    draw()
    assert len(verdicts) >= 50
    assert sum(verdicts) / len(verdicts) >= 0.95, f"{sum(verdicts)} of {len(verdicts)}"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_invalid_arguments_always_fail_the_tools_own_check(name: str) -> None:
    tool = SCHEMAS[name]
    verdicts: list[bool] = []

    @DRAWS
    @given(args=tool_arguments(tool, valid=False))
    def draw(args: dict[str, Any]) -> None:
        verdicts.append(_passes(tool, args))

    draw()
    assert len(verdicts) >= 50
    assert not any(verdicts)


@settings(max_examples=30, database=None, deadline=None)
@given(args=tool_arguments(place))
async def test_valid_arguments_run_a_tool_functions_body(args: dict[str, Any]) -> None:
    # The decorated function really runs: the arguments convert into its parameters.
    placed.clear()
    call = ToolCall(id="c", name="place", arguments=args)
    out = await place.execute(call, args, ToolContext(call=call, report=_no_progress))
    assert out == "placed"
    assert len(placed) == 1
    name, at, tags, mode, count = placed[0]
    assert (name, mode) == (args["name"], args.get("mode", "a"))
    assert at == Point(x=args["at"]["x"], y=args["at"]["y"])
    assert tags == tuple(args["tags"])
    assert 1 <= count <= 9


async def _no_progress(partial: Any) -> None:
    raise AssertionError("place reports no progress")


def test_invalid_mode_is_not_fooled_by_lenient_conversion() -> None:
    # An integer given as "42" is converted by the loop, so it is *valid*; the invalid
    # mode must find a real breakage instead.
    counter = make_tool(
        "counter",
        parameters={
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
            "additionalProperties": False,
        },
    )
    assert _passes(counter, {"n": "42"})
    seen: list[dict[str, Any]] = []

    @DRAWS
    @given(args=tool_arguments(counter, valid=False))
    def draw(args: dict[str, Any]) -> None:
        seen.append(args)
        assert not _passes(counter, args)

    draw()
    assert seen


def test_prepare_arguments_is_applied_as_the_loop_does() -> None:
    # A shim that renames an old argument: valid draws pass through it, and the
    # schema-valid ones are the ones the loop accepts after it.
    def rename(raw: Mapping[str, Any]) -> Mapping[str, Any]:
        out = dict(raw)
        if "old" in out:
            out["new"] = out.pop("old")
        return out

    shimmed = Tool(
        name="shimmed",
        description="",
        parameters={
            "type": "object",
            "properties": {"new": {"type": "string"}},
            "required": ["new"],
            "additionalProperties": False,
        },
        execute=_echo,
        prepare_arguments=rename,
    )

    @DRAWS
    @given(args=tool_arguments(shimmed))
    def draw(args: dict[str, Any]) -> None:
        assert _passes(shimmed, rename(args))

    draw()


def test_invalid_mode_on_a_schema_that_accepts_everything_fails() -> None:
    from hypothesis.errors import FailedHealthCheck, Unsatisfiable

    anything = make_tool("anything", parameters={"type": "object"})

    @settings(max_examples=5, database=None, deadline=None)
    @given(args=tool_arguments(anything, valid=False))
    def draw(args: dict[str, Any]) -> None:
        raise AssertionError(f"drew {args!r}, but every object is valid")

    with pytest.raises((Unsatisfiable, FailedHealthCheck)):
        draw()
