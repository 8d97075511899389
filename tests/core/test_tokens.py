"""``AssistantMessage.tokens``: checked values, packed on disk, read back bit for bit."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agent import (
    AssistantMessage,
    Text,
    Tokens,
    TranscriptFormatError,
    dumps,
    load_transcript,
    loads,
    write_transcript,
)

if TYPE_CHECKING:
    from pathlib import Path

ids = st.lists(st.integers(0, 2**32 - 1), max_size=50)


def reply(tokens: Tokens | None) -> AssistantMessage:
    return AssistantMessage(
        content=(Text(text="hi"),), stop_reason="stop", timestamp=1.0, tokens=tokens
    )


@given(
    prompt=ids,
    data=st.data(),
    version=st.none() | st.text(max_size=10),
)
def test_tokens_round_trip_exactly(
    prompt: list[int], data: st.DataObject, version: str | None
) -> None:
    completion = data.draw(ids)
    logprobs = data.draw(
        st.just([])
        | st.lists(st.floats(allow_nan=False), min_size=len(completion), max_size=len(completion))
    )
    tokens = Tokens(
        prompt_ids=prompt, completion_ids=completion, logprobs=logprobs, model_version=version
    )
    (back,) = loads(dumps([reply(tokens)]))
    assert isinstance(back, AssistantMessage)
    assert back.tokens == tokens
    assert [math.copysign(1, v) for v in back.tokens.logprobs] == [
        math.copysign(1, v) for v in tokens.logprobs
    ]


def test_packed_compactly_and_old_lines_unchanged() -> None:
    plain = json.loads(dumps([reply(None)]))[0]
    assert "tokens" not in plain  # a reply without tokens is written as before
    tokens = Tokens(prompt_ids=range(1000, 2000), completion_ids=range(500), logprobs=[-0.5] * 500)
    text = dumps([reply(tokens)])
    assert len(text) < 6 * 1500 + 12 * 500  # not one JSON value per token
    assert json.loads(text)[0]["tokens"]["pack"] == "le"


def test_a_transcript_written_before_tokens_existed_loads(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    path.write_text(
        '{"format":"trio-agent-transcript","version":1}\n'
        '{"content":[{"text":"hi","signature":null,"type":"text"}],"stop_reason":"stop",'
        '"usage":{"input_tokens":0,"output_tokens":0,"cache_read_tokens":0,'
        '"cache_write_tokens":0},"model":"","provider":"","error_message":null,'
        '"timestamp":1.0,"role":"assistant"}\n'
    )
    (message,) = load_transcript(path).messages
    assert message == reply(None)
    write_transcript(path, [reply(Tokens(prompt_ids=[1], completion_ids=[2]))])
    (message,) = load_transcript(path).messages
    assert isinstance(message, AssistantMessage)
    assert message.tokens == Tokens(prompt_ids=[1], completion_ids=[2])


@pytest.mark.parametrize(
    ("tokens", "why"),
    [
        ({"pack": "le", "prompt_ids": "AQ==", "completion_ids": ""}, "multiple of 4"),
        ({"pack": "le", "prompt_ids": "!!", "completion_ids": ""}, "base64"),
        ({"pack": "zz", "prompt_ids": "", "completion_ids": ""}, "packing"),
        ({"pack": "le", "prompt_ids": [1, 2], "completion_ids": ""}, "base64 text"),
        (
            {"pack": "le", "prompt_ids": "", "completion_ids": "AQAAAA==", "logprobs": ""},
            None,
        ),
        (
            {
                "pack": "le",
                "prompt_ids": "",
                "completion_ids": "AQAAAA==",
                "logprobs": "AAAAAAAAAAAAAAAAAAAAAA==",
            },
            "one per id",
        ),
    ],
)
def test_bad_packed_tokens_are_format_errors(tokens: dict[str, object], why: str | None) -> None:
    line = json.loads(dumps([reply(None)]))
    line[0]["tokens"] = tokens
    if why is None:
        (message,) = loads(json.dumps(line))
        assert isinstance(message, AssistantMessage)
        assert message.tokens == Tokens(prompt_ids=(), completion_ids=(1,))
        return
    with pytest.raises(TranscriptFormatError, match=why) as info:
        loads(json.dumps(line))
    assert info.value.path.startswith("$[0].tokens")


def test_tokens_are_checked() -> None:
    with pytest.raises(ValueError, match="between 0 and"):
        Tokens(prompt_ids=[-1], completion_ids=[])
    with pytest.raises(TypeError, match="must be an int"):
        Tokens(prompt_ids=[True], completion_ids=[])
    with pytest.raises(ValueError, match="one per id"):
        Tokens(prompt_ids=[], completion_ids=[1, 2], logprobs=[-1.0])
