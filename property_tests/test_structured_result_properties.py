"""Structured tool results on generated values: a ``@tool`` function returning any value
of its annotated attrs type gives a result whose ``structured_content`` is that value's
JSON data, valid against the derived output schema, rendered as the text the model
reads, and kept exactly through a transcript; any corruption of that data is an error
result naming the path that broke."""

from __future__ import annotations

import enum
import json

import attrs
import jsonschema
import msgspec
from hypothesis import given
from hypothesis import strategies as st

from tests.kit.loop import call, ctx, make_tool, prompt, reply, tool_use
from trio_agent import ToolOutput, ToolResultMessage, dumps, loads, run_agent_loop, tool
from trio_agent.testing import ScriptedModel


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@attrs.frozen
class Part:
    name: str
    price: float


@attrs.frozen
class Order:
    """An order."""

    id: int
    parts: list[Part]
    note: str | None = None
    color: Color = Color.RED
    urgent: bool = False


finite = st.floats(allow_nan=False, allow_infinity=False)
parts = st.builds(Part, name=st.text(max_size=8), price=finite)
orders = st.builds(
    Order,
    id=st.integers(-(2**53), 2**53),
    parts=st.lists(parts, max_size=4),
    note=st.none() | st.text(max_size=8),
    color=st.sampled_from(Color),
    urgent=st.booleans(),
)

returned: list[Order] = []


@tool
async def make_order() -> Order:
    """Make the order under test."""
    return returned[-1]


async def _result(*tools: object, name: str) -> ToolResultMessage:
    model = ScriptedModel([tool_use(call("c", name)), reply()])
    result = await run_agent_loop(prompt(), ctx(*tools), model)  # type: ignore[arg-type]
    assert loads(dumps(result.messages)) == result.messages  # kept exactly
    (found,) = (m for m in result.messages if isinstance(m, ToolResultMessage))
    return found


@given(order=orders)
async def test_any_returned_value_is_its_structured_content(order: Order) -> None:
    returned.append(order)
    got = await _result(make_order, name="make_order")
    data = msgspec.to_builtins(order)
    assert not got.is_error
    assert got.structured_content == data
    assert json.loads(got.text) == data  # the text the model reads says the same
    assert make_order.output_schema is not None
    jsonschema.validate(data, dict(make_order.output_schema))


CORRUPTIONS = st.sampled_from(
    ["drop id", "id as text", "price as text", "drop price", "parts as object"]
)


@given(order=orders, corruption=CORRUPTIONS, data=st.data())
async def test_any_corruption_is_an_error_naming_its_path(
    order: Order, corruption: str, data: st.DataObject
) -> None:
    value = msgspec.to_builtins(order)
    if corruption in ("price as text", "drop price") and not value["parts"]:
        corruption = "drop id"
    if corruption == "drop id":
        del value["id"]
        path = "id"
    elif corruption == "id as text":
        value["id"] = str(value["id"])
        path = "id"
    elif corruption == "parts as object":
        value["parts"] = {}
        path = "parts"
    else:
        i = data.draw(st.integers(0, len(value["parts"]) - 1), label="part")
        if corruption == "drop price":
            del value["parts"][i]["price"]
            path = f"parts/{i}"
        else:
            value["parts"][i]["price"] = "cheap"
            path = f"parts/{i}/price"

    async def execute(*_: object) -> ToolOutput:
        return ToolOutput(content="an order", structured_content=value)

    liar = make_tool("liar", execute, output_schema=make_order.output_schema)
    got = await _result(liar, name="liar")
    assert got.is_error
    assert got.structured_content is None
    lines = got.text.splitlines()
    assert lines[0] == 'Structured content of tool "liar" does not match its output schema:'
    assert any(line.startswith(f"  - {path}: ") for line in lines[1:]), got.text
