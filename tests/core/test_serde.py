"""Round trips through real JSON text, and clear errors for malformed transcripts."""

from __future__ import annotations

import datetime
import decimal
import json
import pathlib
import uuid

import pytest

from trio_agent import (
    AgentEnd,
    AssistantMessage,
    CustomMessage,
    Image,
    Text,
    Thinking,
    ToolCall,
    ToolResultMessage,
    TranscriptFormatError,
    Usage,
    UserMessage,
    dumps,
    loads,
)
from trio_agent._core._events import AgentEvent
from trio_agent._core._messages import NO_USAGE, sum_usage
from trio_agent._core._serde import event_to_json, from_jsonable, join_surrogate_pairs

EVERY_KIND = [
    UserMessage(
        content=(Text(text="hi"), Image(data="aGk=", mime_type="image/png")), timestamp=1.5
    ),
    AssistantMessage(
        content=(
            Thinking(thinking="hmm", signature="sig", redacted=False),
            Thinking(thinking="", signature="opaque", redacted=True),
            Text(text="calling", signature="t-sig"),
            ToolCall(id="c1", name="read", arguments={"path": "a", "n": [1, 2.5, None, True]}),
        ),
        stop_reason="tool_use",
        usage=Usage(input_tokens=10, output_tokens=5, cache_read_tokens=3, cache_write_tokens=1),
        model="m",
        provider="p",
        timestamp=2.25,
    ),
    AssistantMessage(content=(), stop_reason="error", error_message="overloaded", timestamp=3.0),
    ToolResultMessage(
        tool_call_id="c1",
        tool_name="read",
        content=(Text(text="ünïcode \u2028 line"),),
        details={"bytes": 12, "nested": {"ok": True}},
        is_error=True,
        timestamp=4.0,
    ),
    CustomMessage(kind="note", content=["any", {"json": 1}], details=None, timestamp=5.0),
]


@pytest.mark.parametrize("message", EVERY_KIND, ids=lambda m: m.role)
def test_each_kind_round_trips_through_json_text(message: object) -> None:
    text = dumps([message])  # type: ignore[list-item]
    assert isinstance(json.loads(text), list)
    assert loads(text) == (message,)


def test_a_whole_transcript_round_trips() -> None:
    assert loads(dumps(EVERY_KIND)) == tuple(EVERY_KIND)
    assert loads(dumps(EVERY_KIND).encode()) == tuple(EVERY_KIND)


def test_wire_tags() -> None:
    data = json.loads(dumps(EVERY_KIND))
    assert [d["role"] for d in data] == ["user", "assistant", "assistant", "tool_result", "custom"]
    assert [b["type"] for b in data[1]["content"]] == ["thinking", "thinking", "text", "tool_call"]
    assert data[0]["content"][1]["type"] == "image"


def test_usage_total() -> None:
    assert (
        Usage(input_tokens=1, output_tokens=2, cache_read_tokens=3, cache_write_tokens=4).total
        == 10
    )
    assert Usage().total == 0


def test_usage_sums_share_the_empty_usage() -> None:
    some = Usage(input_tokens=1, output_tokens=2, cache_read_tokens=3, cache_write_tokens=4)
    assert some + NO_USAGE is some
    assert NO_USAGE + some is some
    assert some + some == Usage(
        input_tokens=2, output_tokens=4, cache_read_tokens=6, cache_write_tokens=8
    )
    # Nothing counted: the one shared empty usage, not a new object per run.
    plain = AssistantMessage(content=(Text(text="hi"),), stop_reason="stop")
    zero = AssistantMessage(content=(), stop_reason="stop", usage=Usage())
    assert sum_usage([plain, zero, UserMessage.text("x")]) is NO_USAGE
    assert sum_usage([]) is NO_USAGE
    counted = AssistantMessage(content=(), stop_reason="stop", usage=some)
    assert sum_usage([plain, counted, zero, counted]) == some + some


@pytest.mark.parametrize(
    ("text", "path", "fragment"),
    [
        ("{", "$", "malformed JSON"),
        ('{"role": "user"}', "$", "expected a JSON array"),
        ("[1]", "$[0]", "expected a JSON object"),
        ('[{"role": "robot"}]', "$[0].role", "unknown role 'robot'"),
        ('[{"content": []}]', "$[0].role", "missing"),
        (
            '[{"role":"user","content":[{"type":"nope","text":"x"}],"timestamp":1}]',
            "$[0].content[0].type",
            "unknown type 'nope'",
        ),
        (
            '[{"role":"user","content":[{"type":"text"}],"timestamp":1}]',
            "$[0].content[0].text",
            "missing",
        ),
        (
            '[{"role":"user","content":[{"type":"text","text":3}],"timestamp":1}]',
            "$[0].content[0].text",
            "expected a string",
        ),
        (
            '[{"role":"assistant","content":[],"stop_reason":"bogus","timestamp":1}]',
            "$[0].stop_reason",
            "expected one of",
        ),
        (
            '[{"role":"user","content":[],"timestamp":1},'
            '{"role":"tool_result","tool_call_id":"a","tool_name":"t","content":[],'
            '"is_error":"false","timestamp":1}]',
            "$[1].is_error",
            "expected true or false",
        ),
        (
            '[{"role":"assistant","content":[{"type":"tool_call","id":"a","name":"t",'
            '"arguments":[1]}],"stop_reason":"stop","timestamp":1}]',
            "$[0].content[0].arguments",
            "expected a JSON object",
        ),
        (
            '[{"role":"assistant","content":[{"type":"image","data":"","mime_type":"x"}],'
            '"stop_reason":"stop","timestamp":1}]',
            "$[0].content[0].type",
            "unknown type 'image'",
        ),
    ],
)
def test_malformed_input_names_the_bad_path(text: str, path: str, fragment: str) -> None:
    with pytest.raises(TranscriptFormatError) as info:
        loads(text)
    assert info.value.path == path
    assert fragment in str(info.value)
    assert path in str(info.value)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (["hello"], "messages[0] is str 'hello', not a message (UserMessage, "),
        ([EVERY_KIND[0], {"role": "user"}], "messages[1] is dict {'role': 'user'}, not a message"),
        ("hello", "messages must be a sequence of messages, not str 'hello'"),
        (EVERY_KIND[0], "messages must be a sequence of messages, not UserMessage"),
        (None, "messages must be a sequence of messages, not None"),
    ],
)
def test_dumps_refuses_what_loads_would_refuse(value: object, error: str) -> None:
    # What is written must read back: a value that is not a message is a TypeError
    # naming it and its position, as the transcript writers say.
    with pytest.raises(TypeError) as raised:
        dumps(value)  # type: ignore[arg-type]
    assert str(raised.value).startswith(error)


def test_dumps_takes_any_iterable_of_messages() -> None:
    assert loads(dumps(m for m in EVERY_KIND)) == tuple(EVERY_KIND)


def test_events_serialize_with_their_tags() -> None:
    end = AgentEnd(reason="stop", messages=tuple(EVERY_KIND))
    data = json.loads(event_to_json(end))
    assert data["type"] == "agent_end"
    assert from_jsonable(data, AgentEvent) == end


def test_surrogates_are_escaped_so_the_text_encodes_as_utf8() -> None:
    lone = "caf\udce9.txt, \ud83d alone, \ude00 alone, 😀, ünïcode"
    messages = [
        UserMessage.text(lone, timestamp=1.0),
        ToolResultMessage(
            tool_call_id="c\ud800",
            tool_name="t",
            content=(Text(text=lone),),
            details={lone: lone},
            timestamp=2.0,
        ),
    ]
    text = dumps(messages)
    raw = text.encode("utf-8")  # no surrogate left to fail the encoder
    assert "caf\\udce9.txt, \\ud83d alone, \\ude00 alone, 😀, ünïcode" in text
    assert loads(raw) == loads(text) == tuple(messages)
    line = event_to_json(AgentEnd(reason="stop", messages=tuple(messages)))
    assert json.loads(line.encode("utf-8"))["messages"][0]["content"][0]["text"] == lone


def test_a_high_and_a_low_surrogate_read_back_as_their_character() -> None:
    """JSON cannot tell the code points U+D83D U+DE00 from the character they encode in
    UTF-16: they read back as that character (what a stream that split it meant)."""
    split = UserMessage.text("a\ud83d\ude00b", timestamp=1.0)
    assert loads(dumps([split]).encode()) == (UserMessage.text("a😀b", timestamp=1.0),)


@pytest.mark.parametrize(
    ("text", "joined"),
    [
        ("plain", "plain"),
        ("\ud83d\ude00", "😀"),
        ("x\ud83d\ude00y\udbff\udfff", "x😀y\U0010ffff"),
        ("\ude00\ud83d", "\ude00\ud83d"),  # low then high: not a pair
        ("\ud83d\ud83d\ude00", "\ud83d😀"),
        ("caf\udce9", "caf\udce9"),
    ],
)
def test_join_surrogate_pairs(text: str, joined: str) -> None:
    assert join_surrogate_pairs(text) == joined


def test_details_write_string_valued_types_as_the_schema_function_describes_them() -> None:
    # The transcripts' converter and structured output's share one strict base: a date,
    # a UUID, a decimal, bytes or a path in free-form details is written as the string
    # json_schema describes (and reads back as that string: details are untyped).
    when = datetime.datetime(2026, 5, 1, 10, 30, tzinfo=datetime.UTC)
    details = {
        "when": when,
        "id": uuid.UUID(int=1),
        "price": decimal.Decimal("1E+2"),
        "raw": b"\x00\xff",
        "path": pathlib.PurePosixPath("/srv/a"),
        "took": datetime.timedelta(minutes=90),
    }
    message = CustomMessage(kind="note", details=details, timestamp=1.0)
    (back,) = loads(dumps([message]))
    assert back.details == {
        "when": "2026-05-01T10:30:00+00:00",
        "id": "00000000-0000-0000-0000-000000000001",
        "price": "100",
        "raw": "AP8=",
        "path": "/srv/a",
        "took": "PT1H30M",
    }
