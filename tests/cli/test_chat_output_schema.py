"""``trio-agent chat --output-schema FILE.json``: every prompt asks for a JSON value
matching the schema, and the validated value is printed as JSON."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from tests.cli.test_chat import chat_cli
from tests.kit.http_server import sse
from tests.kit.providers import KEY, anthropic_reply, openai_reply

if TYPE_CHECKING:
    from pathlib import Path

    from tests.kit.http_server import Server

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city", "population"],
}


ENV = {**os.environ, "OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": KEY}


async def _chat(
    *args: str, stdin: bytes = b"Paris has 2.1 million people\n"
) -> tuple[int, str, str]:
    return await chat_cli(*args, stdin=stdin, env=ENV)


def _args(server: Server, tmp_path: Path, provider: str = "openai") -> list[str]:
    schema = tmp_path / "city.json"
    schema.write_text(json.dumps(SCHEMA))
    url = server.url + "/v1" if provider == "openai" else server.url
    return ["--provider", provider, "--base-url", url, "--model", "m", "--no-tools",
            "--folder", str(tmp_path), "--transcript", str(tmp_path / "t.jsonl"),
            "--output-schema", str(schema)]  # fmt: skip


def _printed_json(out: str) -> object:
    """The JSON value printed (indented) among the session's lines."""
    start = out.index("{\n")
    end = out.index("\n}", start) + 2
    return json.loads(out[start:end])


async def test_the_validated_value_is_printed_as_json(server: Server, tmp_path: Path) -> None:
    server.add(sse(openai_reply(json.dumps({"city": "Paris", "population": 2100000}), [])))
    code, out, err = await _chat(*_args(server, tmp_path))
    assert code == 0, err
    assert _printed_json(out) == {"city": "Paris", "population": 2100000}
    fmt = server.requests[0].json()["response_format"]["json_schema"]
    assert fmt["strict"] is True
    assert fmt["schema"]["additionalProperties"] is False


async def test_an_invalid_answer_is_retried_then_an_error(server: Server, tmp_path: Path) -> None:
    bad = sse(anthropic_reply("", [("toolu_1", "final_result", {"city": "Paris"})]))
    good = sse(
        anthropic_reply("", [("toolu_2", "final_result", {"city": "Paris", "population": 2})])
    )
    server.add(bad, good)
    code, out, err = await _chat(*_args(server, tmp_path, "anthropic"))
    assert code == 0, err
    assert _printed_json(out) == {"city": "Paris", "population": 2}
    retried = server.requests[1].json()["messages"][-1]["content"][0]
    assert "population: required field missing" in retried["content"][0]["text"]

    server.add(*(sse(anthropic_reply("no", [])) for _ in range(3)))
    code, out, err = await _chat(
        *_args(server, tmp_path, "anthropic"), "--resume", str(tmp_path / "t.jsonl")
    )
    assert code == 1
    assert "output invalid: the output was still invalid after 2 retries" in err


async def test_a_bad_schema_file_is_a_usage_error(tmp_path: Path) -> None:
    args = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--folder", str(tmp_path)]
    missing = await _chat(*args, "--output-schema", str(tmp_path / "nope.json"), stdin=b"")
    assert missing[0] == 2
    assert "cannot read --output-schema" in missing[2]
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    code, _, err = await _chat(*args, "--output-schema", str(broken), stdin=b"")
    assert code == 2
    assert "is not JSON" in err
    invalid = tmp_path / "invalid.json"
    invalid.write_text(json.dumps({"type": 12}))
    code, _, err = await _chat(*args, "--output-schema", str(invalid), stdin=b"")
    assert code == 2
    assert "invalid output schema" in err
