"""Tool output schemas and structured results: ``Tool(output_schema=...)``, ``@tool``
functions returning attrs classes, dataclasses and TypedDicts, ``structured_content`` on
result messages (checked against the schema, kept in transcripts)."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import json
import pathlib
import uuid
from typing import TYPE_CHECKING, Any, TypedDict

import attrs
import jsonschema
import pytest

from tests.kit.loop import (
    Recorder,
    assert_consistent,
    call,
    ctx,
    make_tool,
    prompt,
    reply,
    tool_use,
)
from trio_agent import (
    AfterToolCallContext,
    AfterToolCallResult,
    JsonlTranscript,
    LoopConfig,
    Tool,
    ToolCall,
    ToolContext,
    ToolExecutionEnd,
    ToolOutput,
    ToolResultMessage,
    dumps,
    load_transcript,
    loads,
    run_agent_loop,
    tool,
)
from trio_agent._core._schema import json_schema
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from trio_agent import AgentRunResult


@attrs.frozen
class Reading:
    """One reading of a sensor."""

    sensor: str
    value: float
    tags: list[str] = attrs.Factory(list)


@dataclasses.dataclass
class Count:
    n: int


class Pair(TypedDict):
    left: str
    right: int


@tool
async def read_sensor(sensor: str) -> Reading:
    """Read a sensor."""
    return Reading(sensor=sensor, value=21.5, tags=["indoor"])


@tool
async def count(n: int) -> Count:
    """Count."""
    return Count(n=n)


@tool
async def pair() -> Pair:
    """A pair."""
    return {"left": "l", "right": 2}


SCHEMA = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"price": {"type": "number"}},
                "required": ["price"],
            },
        }
    },
    "required": ["items"],
}


def returning(output: Any, schema: Mapping[str, Any] | None = SCHEMA, name: str = "probe") -> Tool:
    async def execute(c: ToolCall, args: Mapping[str, Any], tc: ToolContext) -> Any:
        return output

    return make_tool(name, execute, output_schema=schema)


async def run_calls(
    *tools: Tool, config: LoopConfig | None = None
) -> tuple[AgentRunResult, Recorder]:
    rec = Recorder()
    model = ScriptedModel(
        [tool_use(*(call(f"c{i}", t.name) for i, t in enumerate(tools))), reply()]
    )
    result = await run_agent_loop(prompt(), ctx(*tools), model, config, on_event=rec)
    assert_consistent(result, rec.events, model.requests)
    return result, rec


def result_of(result: AgentRunResult, call_id: str = "c0") -> ToolResultMessage:
    (found,) = (
        m for m in result.messages if isinstance(m, ToolResultMessage) and m.tool_call_id == call_id
    )
    return found


# --- @tool derives the output schema from the return annotation -----------------------------


@pytest.mark.parametrize("t", [read_sensor, count, pair], ids=["attrs", "dataclass", "TypedDict"])
def test_a_structured_return_annotation_gives_the_output_schema(t: Tool) -> None:
    returns = {"read_sensor": Reading, "count": Count, "pair": Pair}[t.name]
    assert t.output_schema == json_schema(returns)
    jsonschema.Draft202012Validator.check_schema(dict(t.output_schema))


def test_other_return_annotations_give_no_output_schema() -> None:
    @tool
    async def plain() -> str:
        """Text."""
        return "x"

    @tool
    async def output() -> ToolOutput:
        """A ToolOutput (an attrs class itself, but not a structured result)."""
        return ToolOutput(content="x")

    assert plain.output_schema is None
    assert output.output_schema is None


async def test_structured_content_of_a_decorated_tool_in_a_run() -> None:
    rec = Recorder()
    model = ScriptedModel(
        [tool_use(call("r", "read_sensor", sensor="hall"), call("n", "count", n=3)), reply()]
    )
    result = await run_agent_loop(prompt(), ctx(read_sensor, count), model, on_event=rec)
    reading = result_of(result, "r")
    assert not reading.is_error
    assert reading.structured_content == {"sensor": "hall", "value": 21.5, "tags": ["indoor"]}
    assert json.loads(reading.text) == reading.structured_content  # what the model reads
    assert result_of(result, "n").structured_content == {"n": 3}
    # The event carries the same result; the model never gets the structured copy apart
    # from the text.
    ends = {e.call_id: e for e in rec.of(ToolExecutionEnd)}
    assert ends["r"].result == reading
    assert_consistent(result, rec.events, model.requests)


# --- checked against the declared schema -------------------------------------------------------


async def test_matching_structured_content_is_kept() -> None:
    data = {"items": [{"price": 1}, {"price": 2.5}]}
    result, _ = await run_calls(returning(ToolOutput(content="two items", structured_content=data)))
    got = result_of(result)
    assert (got.is_error, got.structured_content, got.text) == (False, data, "two items")


async def test_mismatching_structured_content_is_an_error_naming_each_path() -> None:
    data = {"items": [{"price": 1}, {"price": 2}, {"price": "cheap"}, {}]}
    result, rec = await run_calls(returning(ToolOutput(content="items", structured_content=data)))
    got = result_of(result)
    assert got.is_error
    assert got.structured_content is None  # nothing unchecked is kept
    lines = got.text.splitlines()
    assert lines[0] == 'Structured content of tool "probe" does not match its output schema:'
    assert lines[1] == '  - items/2/price: "cheap" is not of type "number"'
    assert lines[2] == '  - items/3: "price" is a required property'
    assert lines[4] == "Received structured content:"
    assert json.loads("\n".join(lines[5:])) == data
    assert rec.of(ToolExecutionEnd)[0].outcome == "error"


async def test_a_missing_top_level_field_is_named() -> None:
    result, _ = await run_calls(returning(ToolOutput(content="x", structured_content={})))
    assert '  - items: "items" is a required property' in result_of(result).text


async def test_error_results_and_results_without_structured_content_are_not_checked() -> None:
    wrong = {"items": "none"}
    result, _ = await run_calls(
        returning(ToolOutput(content="failed", structured_content=wrong, is_error=True)),
        returning("just text", name="plain"),
    )
    failed = result_of(result, "c0")
    assert (failed.is_error, failed.structured_content, failed.text) == (True, wrong, "failed")
    plain = result_of(result, "c1")
    assert (plain.is_error, plain.structured_content) == (False, None)


async def test_an_invalid_output_schema_makes_an_error_result_saying_so() -> None:
    broken = returning(
        ToolOutput(content="x", structured_content={"a": 1}), schema={"type": "no such type"}
    )
    result, _ = await run_calls(broken)
    got = result_of(result)
    assert got.is_error
    assert got.text.startswith('Tool "probe" has an invalid output schema:')


async def test_structured_content_that_is_not_json_data_is_an_error() -> None:
    result, _ = await run_calls(
        returning(ToolOutput(content="x", structured_content={"when": object()}), schema=None)
    )
    got = result_of(result)
    assert got.is_error
    assert got.text.startswith("ToolOutput.structured_content is not JSON data")


def test_output_schema_must_be_a_mapping() -> None:
    with pytest.raises(TypeError, match=r"Tool.output_schema must be a JSON Schema"):
        returning("x", schema="{}")  # type: ignore[arg-type]


class NotJson:
    pass


@attrs.frozen
class Holder:
    thing: NotJson


def test_tool_rejects_an_invalid_derived_schema_early() -> None:
    with pytest.raises(TypeError, match=r"@tool cannot build an output schema"):

        @tool
        async def bad() -> Holder:
            """Bad."""
            return Holder(thing=NotJson())


# --- after_tool_call --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "kept", "is_error"),
    [
        # Replacing the content alone drops the structured content: it may say otherwise.
        (AfterToolCallResult(content="redacted"), None, False),
        (AfterToolCallResult(details={"audited": True}), {"items": []}, False),
        (
            AfterToolCallResult(content="one", structured_content={"items": [{"price": 9}]}),
            {"items": [{"price": 9}]},
            False,
        ),
        # A replacement is checked against the schema like the tool's own.
        (AfterToolCallResult(structured_content={"items": 3}), None, True),
    ],
)
async def test_after_tool_call_and_structured_content(
    change: AfterToolCallResult, kept: Any, is_error: bool
) -> None:
    seen: list[Any] = []

    def after(ac: AfterToolCallContext) -> AfterToolCallResult:
        seen.append(ac.result.structured_content)
        return change

    result, _ = await run_calls(
        returning(ToolOutput(content="none", structured_content={"items": []})),
        config=LoopConfig(after_tool_call=after),
    )
    assert seen == [{"items": []}]
    got = result_of(result)
    assert (got.structured_content, got.is_error) == (kept, is_error)
    if is_error:
        assert got.text.startswith("after_tool_call failed: Structured content of tool")
        assert '  - items: 3 is not of type "array"' in got.text


# --- transcripts -----------------------------------------------------------------------------


async def test_structured_content_round_trips_through_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    model = ScriptedModel([tool_use(call("r", "read_sensor", sensor="hall")), reply()])
    async with JsonlTranscript(path) as transcript:
        result = await run_agent_loop(prompt(), ctx(read_sensor), model, on_event=transcript)
    loaded = load_transcript(path)
    assert loaded.messages == result.messages
    assert result_of(result, "r").structured_content == {
        "sensor": "hall",
        "value": 21.5,
        "tags": ["indoor"],
    }
    lines = path.read_text(encoding="utf-8").splitlines()
    # Only the line of a result that has structured content carries the field.
    assert sum('"structured_content"' in line for line in lines) == 1


def test_a_result_without_structured_content_is_written_as_before() -> None:
    plain = ToolResultMessage(tool_call_id="c", tool_name="t", content=(), timestamp=1.0)
    assert json.loads(dumps([plain])) == [
        {
            "tool_call_id": "c",
            "tool_name": "t",
            "content": [],
            "details": None,
            "is_error": False,
            "timestamp": 1.0,
            "role": "tool_result",
        }
    ]
    # ...so a transcript written before the field existed reads back the same.
    assert loads(dumps([plain])) == (plain,)


async def test_a_result_message_whose_structured_content_is_not_json_is_refused() -> None:
    bad = ToolResultMessage(
        tool_call_id="c", tool_name="t", content=(), structured_content={"at": object()}
    )
    model = ScriptedModel([reply()])
    with pytest.raises(TypeError, match=r"structured_content is not JSON data"):
        await run_agent_loop([bad], ctx(), model)
    assert model.requests == []


# --- values JSON carries as strings ------------------------------------------------------------


@attrs.frozen
class Slot:
    ref: uuid.UUID
    starts: datetime.datetime
    length: datetime.timedelta
    fee: decimal.Decimal
    key: bytes
    room: pathlib.Path


@tool
async def book_slot() -> Slot:
    """Book a slot."""
    return Slot(
        ref=uuid.UUID(int=7),
        starts=datetime.datetime(2026, 5, 1, 10, 30),  # naive, as Python writes it
        length=-datetime.timedelta(seconds=1.5),
        fee=decimal.Decimal("1E+2"),
        key=b"\x00\xff",
        room=pathlib.Path("/rooms/a"),
    )


async def test_a_decorated_tool_returning_string_valued_fields_matches_its_schema() -> None:
    assert book_slot.output_schema is not None
    assert book_slot.output_schema["properties"]["starts"] == {
        "type": "string",
        "format": "date-time",
    }
    result, _ = await run_calls(book_slot)
    got = result_of(result)
    assert not got.is_error, got.text
    assert got.structured_content == {
        "ref": "00000000-0000-0000-0000-000000000007",
        "starts": "2026-05-01T10:30:00",
        "length": "-PT1.5S",
        "fee": "100",  # written by the table's writer, as the transcripts write it
        "key": "AP8=",
        "room": "/rooms/a",
    }


async def test_a_wrong_date_time_in_structured_content_is_named() -> None:
    data = {"when": "tomorrow-ish"}
    schema = {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}}}
    result, _ = await run_calls(returning(ToolOutput(content="x", structured_content=data), schema))
    got = result_of(result)
    assert got.is_error
    assert got.text.splitlines()[1] == '  - when: "tomorrow-ish" is not a "date-time"'


@attrs.frozen
class Circle:
    r: float


@attrs.frozen
class Square:
    side: float


@attrs.frozen
class Drawing:
    shape: Circle | Square
    shapes: list[Circle | Square]


@tool
async def draw() -> Drawing:
    """Draw."""
    return Drawing(shape=Square(side=2.0), shapes=[Circle(r=1.0), Square(side=3.0)])


async def test_a_decorated_tool_returning_a_union_of_classes_tags_it_as_its_schema_says() -> None:
    # The schema asks for the "type" tag on each member of a union of classes; the
    # result is written by the same converter that reads structured output, so it has it.
    result, _ = await run_calls(draw)
    got = result_of(result)
    assert not got.is_error, got.text
    assert got.structured_content == {
        "shape": {"type": "Square", "side": 2.0},
        "shapes": [{"type": "Circle", "r": 1.0}, {"type": "Square", "side": 3.0}],
    }
    assert draw.output_schema is not None
    jsonschema.validate(got.structured_content, draw.output_schema)
