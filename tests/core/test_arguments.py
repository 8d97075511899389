"""Tool arguments: lenient conversion driven by the schema, strict validation, pi's
error text."""

from __future__ import annotations

import copy
import gc
import json
import types
from typing import Any

import jsonschema_rs
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from tests.kit.loop import make_tool
from trio_agent import (
    AssistantMessage,
    Context,
    Text,
    Tool,
    ToolCall,
    ToolExecutionEnd,
    UserMessage,
    run_agent_loop,
)
from trio_agent._core._arguments import (
    MAX_ECHO,
    MAX_ERRORS,
    InvalidArguments,
    _compiled,
    check_arguments,
    compile_parameters,
    convert_arguments,
)
from trio_agent.testing import ScriptedModel

INVALID = object()
INT = {"type": "integer"}
NUM = {"type": "number"}
BOOL = {"type": "boolean"}
STR = {"type": "string"}
NULL = {"type": "null"}

# (id, schema of one property "x", value sent, value expected — or INVALID)
CASES: list[tuple[str, Any, Any, Any]] = [
    # integers
    ("int-text", INT, "42", 42),
    ("int-negative", INT, "-7", -7),
    ("int-spaces", INT, " 42 ", 42),
    ("int-exact-fraction", INT, "42.0", 42),
    ("int-exponent", INT, "4.2e1", 42),
    ("int-huge", INT, "123456789012345678901234567890", 123456789012345678901234567890),
    ("int-lossy-text", INT, "42.5", INVALID),
    ("int-lossy-float", INT, 42.5, INVALID),
    ("int-integral-float-valid-as-is", INT, 42.0, 42.0),
    ("int-leading-zero", INT, "007", INVALID),
    ("int-plus", INT, "+1", INVALID),
    ("int-underscore", INT, "1_000", INVALID),
    ("int-word", INT, "forty-two", INVALID),
    ("int-null", INT, None, INVALID),
    ("int-true", INT, True, 1),
    ("int-false", INT, False, 0),
    ("int-bool-text", INT, "true", INVALID),
    ("int-too-many-digits", INT, "9" * 5000, INVALID),
    ("int-huge-exponent", INT, "1e100000", INVALID),
    # numbers
    ("number-text", NUM, "3.5", 3.5),
    ("number-int-text", NUM, "3", 3),
    ("number-exponent", NUM, "-1.5e-3", -0.0015),
    ("number-nan", NUM, "NaN", INVALID),
    ("number-infinite", NUM, "1e999", INVALID),
    ("number-hex", NUM, "0x10", INVALID),
    ("number-null", NUM, None, INVALID),
    ("number-bool", NUM, False, 0),
    ("number-bool-text", NUM, "true", INVALID),
    # booleans
    ("bool-true", BOOL, "true", True),
    ("bool-false", BOOL, "false", False),
    ("bool-capitalized", BOOL, "False", False),
    ("bool-yes", BOOL, "yes", INVALID),
    ("bool-one-text", BOOL, "1", INVALID),
    ("bool-one", BOOL, 1, True),
    ("bool-zero", BOOL, 0, False),
    ("bool-one-float", BOOL, 1.0, True),
    ("bool-two", BOOL, 2, INVALID),
    ("bool-minus-one", BOOL, -1, INVALID),
    ("bool-fraction", BOOL, 0.5, INVALID),
    ("bool-null", BOOL, None, INVALID),
    # strings
    ("str-from-int", STR, 42, "42"),
    ("str-from-float", STR, 4.5, "4.5"),
    ("str-from-negative-int", STR, -7, "-7"),
    ("str-from-big-float", STR, 1e20, "1e+20"),
    ("str-from-true", STR, True, "true"),
    ("str-from-false", STR, False, "false"),
    ("str-from-array", STR, [1], INVALID),
    ("str-from-object", STR, {"a": 1}, INVALID),
    ("str-null", STR, None, INVALID),
    ("str-number-text-stays", STR, "42", "42"),
    # arrays and objects given as JSON text
    ("array-json", {"type": "array", "items": INT}, '["1", 2]', [1, 2]),
    ("array-json-spaces", {"type": "array"}, "  [1, 2] ", [1, 2]),
    ("array-not-json", {"type": "array"}, "[1, 2", INVALID),
    ("array-json-object", {"type": "array"}, '{"a": 1}', INVALID),
    ("array-nan", {"type": "array"}, "[NaN]", INVALID),
    ("array-scalar-not-wrapped", {"type": "array", "items": INT}, 1, INVALID),
    ("object-json", {"type": "object", "properties": {"a": INT}}, '{"a": "3"}', {"a": 3}),
    ("object-json-array", {"type": "object"}, "[1]", INVALID),
    ("object-null", {"type": "object"}, None, INVALID),
    # nested
    (
        "nested-object",
        {"type": "object", "properties": {"n": {"type": "object", "properties": {"k": BOOL}}}},
        {"n": {"k": "true"}},
        {"n": {"k": True}},
    ),
    ("array-items", {"type": "array", "items": NUM}, ["1", 2, "3.5"], [1, 2, 3.5]),
    (
        "prefix-items",
        {"type": "array", "prefixItems": [INT, BOOL], "items": STR},
        ["1", "true", 3],
        [1, True, "3"],
    ),
    (
        "additional-properties",
        {"type": "object", "additionalProperties": INT},
        {"a": "1", "b": 2},
        {"a": 1, "b": 2},
    ),
    (
        "pattern-properties",
        {"type": "object", "patternProperties": {"^n_": INT}, "additionalProperties": BOOL},
        {"n_a": "1", "flag": "true"},
        {"n_a": 1, "flag": True},
    ),
    ("untyped-properties", {"properties": {"a": INT}}, {"a": "1"}, {"a": 1}),
    # type lists and unions: only when exactly one reading exists
    ("type-list-nullable", {"type": ["integer", "null"]}, "5", 5),
    ("type-list-null-stays", {"type": ["integer", "null"]}, None, None),
    ("type-list-int-or-number", {"type": ["integer", "number"]}, "5", 5),
    ("type-list-int-first", {"type": ["integer", "number"]}, "5.0", 5),
    ("type-list-number-first", {"type": ["number", "integer"]}, "5.0", 5.0),
    ("type-list-ambiguous-string", {"type": ["integer", "string"]}, "5", "5"),
    ("type-list-bool-or-int", {"type": ["boolean", "integer"]}, "true", True),
    ("type-list-bool-or-int-1", {"type": ["boolean", "integer"]}, "1", 1),
    ("type-list-string-or-bool-from-1", {"type": ["string", "boolean"]}, 1, INVALID),
    ("type-list-string-or-int-from-true", {"type": ["string", "integer"]}, True, INVALID),
    ("type-list-string-or-null-from-true", {"type": ["string", "null"]}, True, "true"),
    ("anyof-optional", {"anyOf": [INT, NULL]}, "5", 5),
    ("anyof-optional-null-text", {"anyOf": [INT, NULL]}, "null", INVALID),
    ("anyof-int-or-bool", {"anyOf": [INT, BOOL]}, "true", True),
    ("anyof-int-or-string", {"anyOf": [INT, STR]}, "5", "5"),
    ("oneof-optional", {"oneOf": [NUM, NULL]}, "2.5", 2.5),
    ("anyof-array-or-null", {"anyOf": [{"type": "array", "items": INT}, NULL]}, '["1"]', [1]),
    (
        "anyof-objects-ambiguous",
        {
            "anyOf": [
                {"type": "object", "properties": {"v": INT}},
                {"type": "object", "properties": {"v": STR}},
            ]
        },
        {"v": "1"},
        {"v": "1"},
    ),
    (
        "anyof-objects-discriminated",
        {
            "anyOf": [
                {"type": "object", "properties": {"k": {"const": "a"}, "v": INT}},
                {"type": "object", "properties": {"k": {"const": "b"}, "v": BOOL}},
            ]
        },
        {"k": "b", "v": "true"},
        {"k": "b", "v": True},
    ),
    (
        "anyof-objects-by-required",
        {
            "anyOf": [
                {"type": "object", "properties": {"a": INT}, "required": ["a"]},
                {"type": "object", "properties": {"b": INT}, "required": ["b"]},
            ]
        },
        {"b": "2"},
        {"b": 2},
    ),
    ("allof", {"allOf": [{"type": "integer"}, {"minimum": 1}]}, "3", 3),
    ("allof-still-invalid", {"allOf": [{"type": "integer"}, {"minimum": 5}]}, "3", INVALID),
    # enums and consts (Literal)
    ("enum-int", {"enum": [1, 2, "x"]}, "2", 2),
    ("enum-ambiguous", {"enum": ["1", 1]}, "1", "1"),
    ("enum-not-member", {"enum": [1, 2]}, "3", INVALID),
    ("enum-bool", {"enum": [True]}, "true", True),
    ("enum-false-to-zero", {"enum": [0, 5]}, False, 0),
    ("enum-one-to-true", {"enum": [True, "x"]}, 1, True),
    ("const-int", {"const": 3}, "3", 3),
    ("typed-enum", {"type": "integer", "enum": [1, 2]}, "2", 2),
    # schemas without types convert nothing
    ("any", {}, "42", "42"),
    ("true-schema", True, "42", "42"),
]


def _wrap(schema: Any, defs: dict[str, Any] | None = None) -> dict[str, Any]:
    wrapped: dict[str, Any] = {"type": "object", "properties": {"x": schema}}
    if defs:
        wrapped["$defs"] = defs
    return wrapped


@pytest.mark.parametrize(
    ("schema", "sent", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_conversion(schema: Any, sent: Any, expected: Any) -> None:
    tool = make_tool("t", parameters=_wrap(schema))
    raw = {"x": sent}
    before = copy.deepcopy(raw)
    if expected is INVALID:
        with pytest.raises(InvalidArguments) as info:
            check_arguments(tool, raw)
        assert info.value.text.startswith('Validation failed for tool "t":\n  - x: ')
    else:
        got = check_arguments(tool, raw)
        assert got == {"x": expected}
        assert json.dumps(got) == json.dumps({"x": expected})  # same JSON types too
        if expected is sent or json.dumps(expected) == json.dumps(sent):
            assert got is raw  # nothing changed: the very same mapping comes back
        else:
            assert got is not raw
    assert raw == before  # the input is never mutated


def test_draft7_tuple_items() -> None:
    schema = _wrap({"type": "array", "items": [INT, BOOL], "additionalItems": NUM})
    schema["$schema"] = "http://json-schema.org/draft-07/schema#"
    got = check_arguments(make_tool("t", parameters=schema), {"x": ["1", "false", "2.5"]})
    assert got == {"x": [1, False, 2.5]}


def test_refs_to_defs() -> None:
    schema = {
        "type": "object",
        "properties": {
            "p": {"$ref": "#/$defs/Point"},
            "ps": {"type": "array", "items": {"$ref": "#/$defs/Point"}},
        },
        "$defs": {
            "Point": {"type": "object", "properties": {"x": INT, "y": NUM}, "required": ["x"]}
        },
    }
    tool = make_tool("t", parameters=schema)
    raw = {"p": {"x": "1", "y": "2.5"}, "ps": '[{"x": "3"}]'}
    assert check_arguments(tool, raw) == {"p": {"x": 1, "y": 2.5}, "ps": [{"x": 3}]}


def test_ref_pointer_escapes_and_definitions() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/definitions/a~1b"}},
        "definitions": {"a/b": INT},
    }
    assert check_arguments(make_tool("t", parameters=schema), {"a": "5"}) == {"a": 5}


def test_ref_cycles_terminate() -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/A"}, "tree": {"$ref": "#/$defs/Tree"}},
        "$defs": {
            "A": {"$ref": "#/$defs/B"},
            "B": {"anyOf": [{"$ref": "#/$defs/A"}, INT]},
            "Tree": {
                "type": "object",
                "properties": {
                    "v": INT,
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}},
                },
            },
        },
    }
    got = convert_arguments(
        schema, {"x": "1", "tree": {"v": "1", "kids": [{"v": "2", "kids": []}]}}
    )
    assert got == {"x": 1, "tree": {"v": 1, "kids": [{"v": 2, "kids": []}]}}


def test_untouched_parts_are_shared_not_copied() -> None:
    schema = _wrap(INT)
    schema["properties"]["big"] = {"type": "array", "items": STR}
    big = ["s"] * 1000
    got = convert_arguments(schema, {"x": "1", "big": big})
    assert got == {"x": 1, "big": big}
    assert got["big"] is big


# --- the fast path is exact: valid arguments are never converted -----------------------

SCHEMAS = [
    _wrap(INT),
    _wrap({"type": ["integer", "string"]}),
    _wrap({"anyOf": [INT, STR, BOOL, NULL]}),
    _wrap({"anyOf": [{"type": "array", "items": INT}, STR]}),
    _wrap({"enum": [1, "1", True, None]}),
    _wrap({"type": "array", "items": {"anyOf": [NUM, STR]}}),
    _wrap(
        {"$ref": "#/$defs/P"},
        {"P": {"type": "object", "additionalProperties": {"anyOf": [BOOL, STR]}}},
    ),
    _wrap(
        {
            "oneOf": [
                {"type": "object", "properties": {"v": INT}},
                {"type": "object", "properties": {"v": STR}},
            ]
        }
    ),
    _wrap({}),
]

# Texts that convert are drawn often: they are what a wrong conversion would touch.
convertible = st.sampled_from(["42", "4.5", "true", "false", "null", "[1]", '{"v": "1"}', '["1"]'])
json_scalars = st.one_of(
    convertible,
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=3),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("vx"), inner, max_size=2)
    ),
    max_leaves=6,
)


SMALL_SCALARS = [None, True, 1, 1.0, 1.5, "a", "42", "true", "null", "[1]", '{"v": "1"}']
SMALL_VALUES = [
    *SMALL_SCALARS,
    *([s] for s in SMALL_SCALARS),
    *({"v": s} for s in SMALL_SCALARS),
    *({"v": [s]} for s in SMALL_SCALARS),
    *({"v": {"v": s}} for s in SMALL_SCALARS),
    *([{"v": s}, s] for s in SMALL_SCALARS),
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_small_valid_arguments_are_never_converted(schema: dict[str, Any]) -> None:
    # Exhaustive over a small grammar of values, next to the random search below.
    validator = jsonschema_rs.validator_for(schema)
    valid = 0
    for value in SMALL_VALUES:
        raw = {"x": value}
        if validator.is_valid(raw):
            valid += 1
            assert convert_arguments(schema, raw) is raw, value
    assert valid > 0


@given(schema=st.sampled_from(SCHEMAS), value=json_values)
def test_valid_arguments_are_never_converted(schema: dict[str, Any], value: Any) -> None:
    raw = {"x": value}
    if jsonschema_rs.validator_for(schema).is_valid(raw):
        assert convert_arguments(schema, raw) is raw


@given(schema=st.sampled_from(SCHEMAS), value=json_values)
def test_conversion_never_mutates_and_is_stable(schema: dict[str, Any], value: Any) -> None:
    raw = {"x": value}
    before = copy.deepcopy(raw)
    once = convert_arguments(schema, raw)
    assert raw == before
    # What was converted needs no second conversion.
    assert convert_arguments(schema, once) is once


# --- the error text ----------------------------------------------------------------------

READ = {
    "type": "object",
    "properties": {
        "path": STR,
        "offset": INT,
        "limit": {"type": "integer", "minimum": 1},
        "ranges": {
            "type": "array",
            "items": {"type": "object", "properties": {"a": INT}, "required": ["a"]},
        },
    },
    "required": ["path"],
    "additionalProperties": False,
}


def test_error_text_lists_every_error_in_pis_format() -> None:
    tool = make_tool("read", parameters=READ)
    raw = {"offset": "ten", "limit": "0", "ranges": [{"a": 1}, {}], "mode": "x"}
    with pytest.raises(InvalidArguments) as info:
        check_arguments(tool, raw)
    assert info.value.text == "\n".join(
        [
            'Validation failed for tool "read":',
            '  - offset: "ten" is not of type "integer"',
            "  - limit: 0 is less than the minimum of 1",
            '  - ranges/1: "a" is a required property',
            "  - root: Additional properties are not allowed ('mode' was unexpected)",
            '  - path: "path" is a required property',
            "",
            "Received arguments:",
            json.dumps(raw, indent=2),
        ]
    )


def test_error_text_root_type() -> None:
    tool = make_tool("t", parameters={"type": "object", "minProperties": 1})
    with pytest.raises(InvalidArguments) as info:
        check_arguments(tool, {})
    assert info.value.text == (
        'Validation failed for tool "t":\n'
        "  - root: {} has less than 1 property\n\nReceived arguments:\n{}"
    )


def test_error_text_is_bounded() -> None:
    tool = make_tool(
        "t",
        parameters={
            "type": "object",
            "properties": {"xs": {"type": "array", "items": INT}, "s": INT},
        },
    )
    raw = {"xs": ["no"] * 500, "s": "z" * 10_000}
    with pytest.raises(InvalidArguments) as info:
        check_arguments(tool, raw)
    text = info.value.text
    lines = text.split("\n")
    errors = [line for line in lines if line.startswith("  - ")]
    assert len(errors) == MAX_ERRORS + 1
    assert errors[-1] == f"  - … and {501 - MAX_ERRORS} more errors"
    assert all(len(line) < 400 for line in errors)  # the 10k string is not repeated
    echo = text.split("Received arguments:\n", 1)[1]
    assert len(echo) < MAX_ECHO + 50
    assert echo.endswith(" more characters)")
    assert len(text) < 25_000


def test_error_text_shows_arguments_as_received() -> None:
    # The echo is what the model sent, not the converted values.
    tool = make_tool("t", parameters=_wrap(INT) | {"required": ["y"]})
    with pytest.raises(InvalidArguments) as info:
        check_arguments(tool, {"x": "1"})
    assert info.value.text.endswith('Received arguments:\n{\n  "x": "1"\n}')


# --- odd inputs and schemas ------------------------------------------------------------


def test_non_dict_mappings_are_accepted() -> None:
    tool = make_tool("t", parameters=_wrap({"type": "object", "properties": {"k": INT}}))
    raw = types.MappingProxyType({"x": types.MappingProxyType({"k": 1})})
    got = check_arguments(tool, raw)
    assert got == {"x": {"k": 1}}
    assert type(got) is dict


def test_non_json_arguments_are_invalid() -> None:
    # (A shim may put any value where the schema does not look; where it does, it must
    # be JSON data.)
    tool = make_tool("t", parameters=_wrap({"type": "array"}))
    with pytest.raises(InvalidArguments) as info:
        check_arguments(tool, {"x": {1, 2}})
    assert info.value.text.startswith(
        'Validation failed for tool "t":\n'
        "  - root: arguments are not JSON data (set is not JSON data)"
    )


def test_remote_refs_are_never_fetched() -> None:
    tool = make_tool(
        "t",
        parameters={
            "type": "object",
            "properties": {"x": {"$ref": "https://example.invalid/s.json"}},
        },
    )
    with pytest.raises(ValueError, match='invalid parameters schema for tool "t"'):
        compile_parameters(tool)
    with pytest.raises(InvalidArguments) as info:
        check_arguments(tool, {"x": 1})
    assert info.value.text.startswith('Tool "t" has an invalid parameters schema: ')
    assert "example.invalid" in info.value.text


@pytest.mark.parametrize(
    "parameters",
    [
        {"type": "object", "properties": {"x": {"type": "integr"}}},
        {"type": "object", "properties": {"x": {"enum": [object()]}}},
    ],
    ids=["not-a-type", "not-json"],
)
def test_broken_schema_is_reported_not_raised(parameters: dict[str, Any]) -> None:
    tool = make_tool("t", parameters=parameters)
    with pytest.raises(InvalidArguments, match="invalid parameters schema"):
        check_arguments(tool, {"x": 1})


def test_validator_is_compiled_once_per_tool_and_released_with_it() -> None:
    tool = make_tool("t", parameters=_wrap(INT))
    check_arguments(tool, {"x": 1})
    first = _compiled[tool]
    check_arguments(tool, {"x": "2"})
    assert _compiled[tool] is first
    other = make_tool("t", parameters=_wrap(INT))  # an equal schema on another tool: its own entry
    check_arguments(other, {"x": 1})
    assert _compiled[other] is not first
    gc.collect()
    count = len(_compiled)
    del tool
    gc.collect()
    assert len(_compiled) == count - 1


# --- through the loop --------------------------------------------------------------------


async def test_loop_converts_then_validates() -> None:
    seen: list[Any] = []

    async def read(call: object, args: Any, ctx: object) -> str:
        seen.append(dict(args))
        await trio.lowlevel.checkpoint()
        return "ok"

    tool = Tool(name="read", description="", parameters=READ, execute=read)
    bad = {"path": "a", "offset": "1.5"}
    model = ScriptedModel(
        [
            AssistantMessage(
                content=(
                    ToolCall(id="c1", name="read", arguments={"path": "a", "offset": "10"}),
                    ToolCall(id="c2", name="read", arguments=bad),
                ),
                stop_reason="tool_use",
            ),
            AssistantMessage(content=(Text(text="done"),), stop_reason="stop"),
        ]
    )
    ends: list[ToolExecutionEnd] = []

    def on_event(event: object) -> None:
        if isinstance(event, ToolExecutionEnd):
            ends.append(event)

    result = await run_agent_loop(
        [UserMessage.text("go")], Context(tools=(tool,)), model, on_event=on_event
    )
    assert seen == [{"path": "a", "offset": 10}]
    assert [(e.call_id, e.outcome) for e in ends] == [("c2", "invalid_arguments"), ("c1", "ok")]
    text = ends[0].result.content[0]
    assert isinstance(text, Text)
    assert text.text == (
        'Validation failed for tool "read":\n'
        '  - offset: "1.5" is not of type "integer"\n\n'
        f"Received arguments:\n{json.dumps(bad, indent=2)}"
    )
    assert result.reason == "stop"
