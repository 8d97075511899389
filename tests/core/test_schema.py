"""``json_schema`` and ``strict_json_schema``: derived schemas are valid JSON Schema,
their strict form keeps OpenAI's documented strict-mode rules (checked by a walker), and
a value of a type validates against its own schema and structures back to itself."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import pathlib
import uuid
from typing import Annotated, Any, Literal, NewType, NotRequired, TypedDict

import attrs
import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agent import json_schema, strict_json_schema
from trio_agent._core import check_structured_content
from trio_agent._core._output import (
    OutputFailure,
    OutputPlan,
    StructuredOutput,
    output_converter,
    plan_output,
)
from trio_agent._core._schema import drop_strict_nulls

from ..kit.loop import make_tool


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


@attrs.frozen
class Price:
    """A price.

    Attributes:
        amount: how much, in the currency's unit.
    """

    amount: float
    currency: Literal["EUR", "USD"] = "EUR"


@attrs.frozen
class LineItem:
    sku: str = attrs.field(metadata={"description": "the stock keeping unit"})
    quantity: int
    price: Price
    colour: Colour | None = None
    tags: list[str] = attrs.field(factory=list)


@attrs.frozen
class Cat:
    lives: int


@attrs.frozen
class Dog:
    name: str
    good: bool = True


@attrs.frozen
class Invoice:
    """An invoice read from a document."""

    number: str
    items: list[LineItem]
    pet: Cat | Dog
    notes: str | None = None
    totals: dict[str, float] = attrs.field(factory=dict)


# The functional form: under `from __future__ import annotations`, Python 3.11 files a
# class-syntax NotRequired key as required.
Address = TypedDict("Address", {"street": str, "zip": NotRequired[str]})  # noqa: UP013


@dataclasses.dataclass
class Person:
    name: str
    address: Address
    age: int = 0


@attrs.frozen
class Tree:
    label: str
    children: list[Tree] = attrs.field(factory=list)


@attrs.frozen
class Booking:
    """A booking: every field a value JSON carries as a string."""

    id: uuid.UUID
    when: datetime.datetime
    day: datetime.date
    at: datetime.time
    length: datetime.timedelta
    price: decimal.Decimal
    ticket: bytes
    folder: pathlib.Path
    seats: frozenset[int]
    pair: tuple[int, str]
    until: datetime.date | None = None


UserId = NewType("UserId", int)

TYPES: list[Any] = [
    int,
    str,
    float,
    bool,
    list[int],
    tuple[int, str],
    tuple[float, ...],
    frozenset[str],
    dict[str, int],
    Literal["a", "b"],
    Colour,
    int | None,
    Cat | Dog,
    list[Cat | Dog],
    Annotated[int, "meta"],
    UserId,
    Price,
    LineItem,
    Invoice,
    Address,
    Person,
    Tree,
    Booking,
    datetime.datetime,
    decimal.Decimal,
    bytes,
    set[uuid.UUID],
]

META = jsonschema.Draft202012Validator.META_SCHEMA


@pytest.mark.parametrize("tp", TYPES, ids=repr)
def test_derived_schema_passes_the_metaschema(tp: Any) -> None:
    schema = json_schema(tp)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validators.validator_for(META)(META).validate(schema)


def test_attrs_class_schema_in_detail() -> None:
    schema = json_schema(Invoice)
    assert schema["title"] == "Invoice"
    assert schema["description"] == "An invoice read from a document."
    assert schema["required"] == ["number", "items", "pet"]
    assert schema["properties"]["notes"] == {
        "anyOf": [{"type": "string"}, {"type": "null"}],
        "default": None,
    }
    assert schema["properties"]["totals"] == {
        "type": "object",
        "additionalProperties": {"type": "number"},
    }
    line = schema["$defs"]["LineItem"]
    # Metadata and the docstring's Attributes section become descriptions.
    assert line["properties"]["sku"]["description"] == "the stock keeping unit"
    price = schema["$defs"]["Price"]
    assert price["properties"]["amount"]["description"] == "how much, in the currency's unit."
    assert price["properties"]["currency"] == {"enum": ["EUR", "USD"], "default": "EUR"}
    assert schema["$defs"]["Colour"]["enum"] == ["red", "green"]
    # A union of classes is tagged by the class name.
    cat, dog = schema["properties"]["pet"]["anyOf"]
    assert cat["properties"]["type"] == {"const": "Cat"}
    assert cat["required"] == ["type", "lives"]
    assert dog["required"] == ["type", "name"]


def test_typeddict_and_dataclass() -> None:
    schema = json_schema(Person)
    assert schema["required"] == ["name", "address"]
    assert schema["properties"]["age"] == {"type": "integer", "default": 0}
    assert schema["$defs"]["Address"]["required"] == ["street"]


def test_recursive_class_keeps_its_definition() -> None:
    schema = json_schema(Tree)
    assert schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Tree"}
    assert "Tree" in schema["$defs"]
    jsonschema.validate({"label": "a", "children": [{"label": "b"}]}, schema)


@pytest.mark.parametrize("tp", [complex, dict[int, str], object.__class__, Literal[1.5]], ids=repr)
def test_types_without_a_schema_are_refused(tp: Any) -> None:
    with pytest.raises(TypeError, match="no JSON Schema"):
        json_schema(tp)


def test_a_tagged_class_cannot_have_a_type_field() -> None:
    @attrs.frozen
    class Typed:
        type: str

    with pytest.raises(TypeError, match="cannot have a field named 'type'"):
        json_schema(Typed | Cat)


# --- strict mode ------------------------------------------------------------------------

# OpenAI's documented rules for strict structured outputs (Structured Outputs guide,
# "Supported schemas"): the root is an object (not anyOf); every object sets
# additionalProperties false and lists every property as required; these keywords are
# not supported.
UNSUPPORTED = {
    "default",
    "uniqueItems",
    "prefixItems",
    "contains",
    "minContains",
    "maxContains",
    "unevaluatedItems",
    "unevaluatedProperties",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "allOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "contentEncoding",
}
STRICT_FORMATS = {
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
}
"""The string formats strict mode supports (the guide's list)."""


def strict_violations(schema: dict[str, Any]) -> list[str]:
    """Every place ``schema`` breaks OpenAI's strict-mode rules."""
    problems = []
    if schema.get("type") != "object" or "anyOf" in schema:
        problems.append("#: the root must be an object")

    def walk(node: Any, where: str) -> None:
        if isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{where}/{i}")
            return
        if not isinstance(node, dict):
            return
        for key in UNSUPPORTED & node.keys():
            problems.append(f"{where}: unsupported keyword {key}")
        if "format" in node and node["format"] not in STRICT_FORMATS:
            problems.append(f"{where}: unsupported format {node['format']}")
        if node.get("type") == "array" and "items" not in node:
            problems.append(f"{where}: an array without items")
        if any(t in node.get("pattern", "") for t in ("(?=", "(?!", "(?<=", "(?<!")):
            problems.append(f"{where}: a pattern with lookaround")
        if node.get("type") == "object":
            if node.get("additionalProperties") is not False:
                problems.append(f"{where}: additionalProperties is not false")
            props = node.get("properties")
            if props is None:
                problems.append(f"{where}: an object without properties")
            elif sorted(node.get("required", [])) != sorted(props):
                problems.append(f"{where}: not every property is required")
        for key, value in node.items():
            if key in ("properties", "$defs"):
                for name, sub in value.items():
                    walk(sub, f"{where}/{key}/{name}")
            elif key in ("items", "anyOf", "allOf"):
                walk(value, f"{where}/{key}")

    walk(schema, "#")
    return problems


@pytest.mark.parametrize("tp", [Price, LineItem, Cat, Dog, Person, Tree, Booking], ids=repr)
def test_strict_schema_keeps_openai_rules(tp: Any) -> None:
    schema = json_schema(tp)
    assert strict_violations(schema)  # the plain schema is not strict
    strict = strict_json_schema(schema)
    assert strict_violations(strict) == []
    jsonschema.Draft202012Validator.check_schema(strict)


def test_the_walker_finds_what_breaks_the_rules() -> None:
    # The walker itself can fail: each rule on its own.
    assert strict_violations({"anyOf": [{"type": "object"}]})
    assert strict_violations({"type": "object", "properties": {"a": {}}, "required": ["a"]})
    bad = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"a": {"type": "string", "default": "x"}},
        "required": [],
    }
    assert len(strict_violations(bad)) == 2
    odd = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "a": {"type": "string", "format": "path"},
            "b": {"type": "array"},
            "c": {"type": "string", "pattern": "^(?!-)x$"},
        },
        "required": ["a", "b", "c"],
    }
    assert len(strict_violations(odd)) == 3


def test_strict_makes_optional_fields_nullable_and_back() -> None:
    schema = json_schema(LineItem)
    strict = strict_json_schema(schema)
    assert strict["properties"]["tags"] == {
        "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]
    }
    answer = {"sku": "x", "quantity": 1, "price": {"amount": 1.0, "currency": None}, "tags": None}
    answer["colour"] = None
    jsonschema.validate(answer, strict)
    # The nulls strict mode forced are dropped (the defaults apply); a nullable one stays.
    assert drop_strict_nulls(answer, schema) == {
        "sku": "x",
        "quantity": 1,
        "price": {"amount": 1.0},
        "colour": None,
    }


@pytest.mark.parametrize("tp", [dict[str, int], Invoice, list[int]], ids=repr)
def test_schemas_strict_mode_cannot_express_are_refused(tp: Any) -> None:
    with pytest.raises(ValueError, match="strict mode"):
        strict_json_schema(json_schema(tp))


# --- a value validates against its own schema ----------------------------------------

finite = st.floats(allow_nan=False, allow_infinity=False)
prices = st.builds(Price, amount=finite, currency=st.sampled_from(["EUR", "USD"]))
line_items = st.builds(
    LineItem,
    sku=st.text(),
    quantity=st.integers(),
    price=prices,
    colour=st.none() | st.sampled_from(Colour),
    tags=st.lists(st.text(), max_size=3),
)
pets = st.builds(Cat, lives=st.integers()) | st.builds(Dog, name=st.text(), good=st.booleans())
invoices = st.builds(
    Invoice,
    number=st.text(),
    items=st.lists(line_items, max_size=3),
    pet=pets,
    notes=st.none() | st.text(),
    totals=st.dictionaries(st.text(), finite, max_size=3),
)
people = st.builds(
    Person,
    name=st.text(),
    address=st.fixed_dictionaries({"street": st.text()}, optional={"zip": st.text()}),
    age=st.integers(),
)


offsets = st.timedeltas(
    min_value=-datetime.timedelta(hours=23, minutes=59),
    max_value=datetime.timedelta(hours=23, minutes=59),
).map(lambda d: datetime.timezone(datetime.timedelta(minutes=d // datetime.timedelta(minutes=1))))
zones = st.none() | st.just(datetime.UTC) | offsets
bookings = st.builds(
    Booking,
    id=st.uuids(),
    when=st.datetimes(timezones=zones),
    day=st.dates(),
    at=st.times(timezones=zones),
    length=st.timedeltas(),
    price=st.decimals(allow_nan=False, allow_infinity=False),
    ticket=st.binary(),
    folder=st.builds(pathlib.PurePosixPath, st.text()).map(lambda p: pathlib.Path(str(p))),
    seats=st.frozensets(st.integers()),
    pair=st.tuples(st.integers(), st.text()),
    until=st.none() | st.dates(),
)

# Built once: the plan configures the converter's tagged unions (as a run does before it
# structures anything).
PLANS = {tp: OutputPlan(StructuredOutput(tp)) for tp in (Invoice, Person, Booking)}
VALIDATORS = {tp: jsonschema.Draft202012Validator(json_schema(tp)) for tp in PLANS}
# A tool declaring the type's schema as its output schema: formats checked as tool
# results are.
AS_TOOL_OUTPUT = {tp: make_tool(output_schema=json_schema(tp)) for tp in PLANS}


@given(
    st.one_of(
        invoices.map(lambda v: (Invoice, v)),
        people.map(lambda v: (Person, v)),
        bookings.map(lambda v: (Booking, v)),
    )
)
def test_a_value_validates_against_its_own_schema(case: tuple[Any, Any]) -> None:
    tp, value = case
    # As JSON text carries it (a tuple becomes a list).
    data = json.loads(json.dumps(output_converter.unstructure(value, tp)))
    VALIDATORS[tp].validate(data)
    # Its formats (date-time, duration, uuid...) pass too.
    assert check_structured_content(AS_TOOL_OUTPUT[tp], data) is None
    # And the one check of structured output gives the value back.
    assert PLANS[tp].check(data) == value


@given(st.lists(st.one_of(st.integers(), st.text()), max_size=4))
def test_a_wrapped_value_round_trips(value: list[int | str]) -> None:
    plan = OutputPlan(StructuredOutput(list[int | str]))
    assert plan.check({"response": value}) == value


def test_a_plan_is_compiled_once_per_output() -> None:
    first = plan_output(Invoice, ())
    assert plan_output(Invoice, ()) is first
    assert plan_output(StructuredOutput(Invoice), ()) is first
    assert plan_output(StructuredOutput(Invoice, retries=5), ()) is not first
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert plan_output(dict(schema), ()) is plan_output(dict(schema), ())
    assert first is not None
    assert first.request("tool") is first.request("tool")


# --- values written as strings ---------------------------------------------------------

TWO_HOURS = datetime.timedelta(hours=2)
BOOKING = Booking(
    id=uuid.UUID("12345678-1234-5678-1234-567812345678"),
    when=datetime.datetime(
        2026, 5, 1, 10, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=2))
    ),
    day=datetime.date(2026, 5, 1),
    at=datetime.time(9, 15),
    length=datetime.timedelta(days=1, hours=2, minutes=30, seconds=1.5),
    price=decimal.Decimal("-12.50"),
    ticket=b"\x00\xffok",
    folder=pathlib.Path("/srv/bookings"),
    seats=frozenset({3, 4}),
    pair=(1, "a"),
)
BOOKING_JSON = {
    "id": "12345678-1234-5678-1234-567812345678",
    "when": "2026-05-01T10:30:00+02:00",
    "day": "2026-05-01",
    "at": "09:15:00",
    "length": "P1DT2H30M1.5S",
    "price": "-12.50",
    "ticket": "AP9vaw==",
    "folder": "/srv/bookings",
    "seats": [3, 4],
    "pair": [1, "a"],
}


def test_string_valued_types_schemas() -> None:
    props = json_schema(Booking)["properties"]
    assert props["id"] == {"type": "string", "format": "uuid"}
    assert props["when"] == {"type": "string", "format": "date-time"}
    assert props["day"] == {"type": "string", "format": "date"}
    assert props["at"] == {"type": "string", "format": "time"}
    assert props["length"] == {"type": "string", "format": "duration"}
    assert props["price"]["type"] == "string"
    assert props["price"]["pattern"] == r"^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$"
    assert props["ticket"] == {"type": "string", "contentEncoding": "base64"}
    assert props["folder"] == {"type": "string", "format": "path"}
    assert props["seats"] == {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    assert props["pair"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
    assert props["until"]["anyOf"] == [{"type": "string", "format": "date"}, {"type": "null"}]


def test_string_valued_types_are_written_and_read_back() -> None:
    data = output_converter.unstructure(BOOKING, Booking)
    assert json.loads(json.dumps(data)) == {**BOOKING_JSON, "until": None}
    assert PLANS[Booking].check(BOOKING_JSON) == BOOKING
    # The other spellings a model may use are read too.
    other = {
        **BOOKING_JSON,
        "when": "2026-05-01T08:30:00Z",
        "length": "PT26H30M1,5S",
        "price": "-1.25e1",
        "id": "12345678123456781234567812345678",
    }
    assert PLANS[Booking].check(other) == BOOKING


def test_strict_form_of_string_valued_types() -> None:
    strict = strict_json_schema(json_schema(Booking))
    assert strict_violations(strict) == []
    props = strict["properties"]
    assert props["when"] == {"type": "string", "format": "date-time"}
    assert props["length"] == {"type": "string", "format": "duration"}
    # What strict mode does not take is said in the description instead.
    assert props["ticket"] == {"type": "string", "description": "(contentEncoding: base64)"}
    assert props["folder"] == {"type": "string", "description": "(format: path)"}
    assert props["pair"] == {
        "type": "array",
        "items": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        "minItems": 2,
        "maxItems": 2,
    }
    assert props["seats"] == {"type": "array", "items": {"type": "integer"}}
    jsonschema.validate(BOOKING_JSON | {"until": None}, strict)


@pytest.mark.parametrize(
    ("field", "bad", "line"),
    [
        ("when", "yesterday", "when: expected a date-time (ISO 8601)"),
        ("day", "2026-02-30", "day: expected a date (ISO 8601)"),
        ("at", "25:00", "at: expected a time (ISO 8601)"),
        ("length", "P1M", "length: expected a duration (ISO 8601, like P1DT2H30M)"),
        ("length", "PT", "length: expected a duration (ISO 8601, like P1DT2H30M)"),
        ("id", "not-a-uuid", "id: expected a UUID"),
        ("ticket", "***", "ticket: expected base64 data"),
        ("price", "12,50", 'price: expected a decimal number in a string (like "-12.50")'),
        ("price", "NaN", 'price: expected a decimal number in a string (like "-12.50")'),
        ("until", "soon", "until: expected a date (ISO 8601)"),
        ("when", 20260501, "when: expected a string"),
    ],
)
def test_a_bad_string_value_names_its_path(field: str, bad: Any, line: str) -> None:
    with pytest.raises(OutputFailure) as caught:
        PLANS[Booking].check({**BOOKING_JSON, field: bad})
    assert caught.value.lines == [line]


def test_every_bad_string_value_is_listed_at_once() -> None:
    bad = {**BOOKING_JSON, "when": "x", "id": "y", "ticket": "!"}
    with pytest.raises(OutputFailure) as caught:
        PLANS[Booking].check(bad)
    assert sorted(caught.value.lines) == [
        "id: expected a UUID",
        "ticket: expected base64 data",
        "when: expected a date-time (ISO 8601)",
    ]


def test_a_tool_output_schema_checks_formats_as_the_converter_reads_them() -> None:
    tool = AS_TOOL_OUTPUT[Booking]
    # A naive date-time and a negative or fractional duration are valid (RFC 3339's
    # checker would refuse them); a wrong one is an error naming the path.
    fine = {**BOOKING_JSON, "when": "2026-05-01T10:30:00", "length": "-PT1.5S"}
    assert check_structured_content(tool, fine) is None
    error = check_structured_content(tool, {**BOOKING_JSON, "length": "P1Y"})
    assert error is not None
    assert "  - length: " in error


@given(st.timedeltas())
def test_a_duration_reads_back_as_written(value: datetime.timedelta) -> None:
    data = output_converter.unstructure(value, datetime.timedelta)
    assert output_converter.structure(data, datetime.timedelta) == value
