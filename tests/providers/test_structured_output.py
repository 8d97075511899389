"""Structured output against the fake OpenAI-compatible and Anthropic servers: the
request asks as the mode says (``response_format``, ``output_config``, tool choice), and
a streamed answer becomes the typed value."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio

from tests.kit.http_server import sse
from tests.kit.providers import anthropic_reply, make_model, openai_reply
from trio_agent import Context, LoopConfig, ModelOptions, StructuredOutput, run_agent_loop

if TYPE_CHECKING:
    from tests.kit.http_server import Server


@attrs.frozen
class Contact:
    """A contact found in an email.

    Attributes:
        name: the person's full name.
    """

    name: str
    email: str
    demo: bool = False


ANSWER = {"name": "Jane Doe", "email": "jane@example.com", "demo": True}
VALUE = Contact(name="Jane Doe", email="jane@example.com", demo=True)


def _reply(kind: str, text: str, calls: list[tuple[str, str, dict[str, Any] | str]]) -> str:
    return (openai_reply if kind == "openai" else anthropic_reply)(text, calls)


async def _run(server: Server, kind: str, output_type: Any, **model_kwargs: Any) -> Any:
    async with make_model(kind, server.url, **model_kwargs) as model:
        with trio.fail_after(10):
            return await run_agent_loop(
                "Jane Doe <jane@example.com> wants a demo.",
                Context(system_prompt="Extract."),
                model,
                output_type=output_type,
            )


async def test_openai_auto_is_native_strict(server: Server) -> None:
    server.add(sse(_reply("openai", json.dumps({**ANSWER}), []), split=7))
    result = await _run(server, "openai", Contact)
    assert result.output == VALUE
    body = server.requests[0].json()
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    spec = fmt["json_schema"]
    assert spec["name"] == "final_result"
    assert spec["strict"] is True
    assert spec["schema"]["additionalProperties"] is False
    assert spec["schema"]["required"] == ["name", "email", "demo"]
    assert spec["schema"]["properties"]["demo"] == {
        "anyOf": [{"type": "boolean"}, {"type": "null"}]
    }
    assert spec["schema"]["properties"]["name"]["description"] == "the person's full name."
    assert "tools" not in body
    assert "tool_choice" not in body


async def test_openai_native_null_for_an_optional_field_takes_the_default(server: Server) -> None:
    server.add(sse(_reply("openai", json.dumps({**ANSWER, "demo": None}), []), split=5))
    result = await _run(server, "openai", Contact)
    assert result.output == Contact(name="Jane Doe", email="jane@example.com")


async def test_openai_native_without_a_strict_form(server: Server) -> None:
    server.add(sse(_reply("openai", json.dumps({"a": 1}), []), split=5))
    result = await _run(server, "openai", dict[str, int])
    assert result.output == {"a": 1}
    # A free-form object has no strict form: sent as it is, with strict false.
    spec = server.requests[0].json()["response_format"]["json_schema"]
    assert spec["strict"] is False
    assert spec["schema"] == {"type": "object", "additionalProperties": {"type": "integer"}}


async def test_openai_tool_mode_requires_a_tool_call(server: Server) -> None:
    server.add(sse(_reply("openai", "", [("call_1", "final_result", ANSWER)]), split=9))
    result = await _run(server, "openai", StructuredOutput(Contact, mode="tool"))
    assert result.output == VALUE
    body = server.requests[0].json()
    assert body["tool_choice"] == "required"
    assert [t["function"]["name"] for t in body["tools"]] == ["final_result"]
    assert "response_format" not in body


async def test_anthropic_auto_is_a_forced_final_tool(server: Server) -> None:
    server.add(sse(_reply("anthropic", "Here:", [("toolu_1", "final_result", ANSWER)]), split=11))
    result = await _run(server, "anthropic", Contact)
    assert result.output == VALUE
    body = server.requests[0].json()
    assert body["tool_choice"] == {"type": "any"}
    (final,) = body["tools"]
    assert final["name"] == "final_result"
    assert final["input_schema"]["required"] == ["name", "email"]
    assert "output_config" not in body


async def test_anthropic_tool_choice_is_left_out_with_thinking(server: Server) -> None:
    server.add(sse(_reply("anthropic", "", [("toolu_1", "final_result", ANSWER)])))
    async with make_model("anthropic", server.url) as model:
        with trio.fail_after(10):
            result = await run_agent_loop(
                "x",
                Context(),
                model,
                LoopConfig(model_options=ModelOptions(reasoning="low")),
                output_type=Contact,
            )
    assert result.output == VALUE
    body = server.requests[0].json()
    assert "tool_choice" not in body
    assert body["thinking"]["type"] == "enabled"


async def test_anthropic_native_sends_output_config(server: Server) -> None:
    server.add(sse(_reply("anthropic", json.dumps(ANSWER), []), split=6))
    result = await _run(server, "anthropic", StructuredOutput(Contact, mode="native"))
    assert result.output == VALUE
    body = server.requests[0].json()
    fmt = body["output_config"]["format"]
    assert fmt["type"] == "json_schema"
    assert fmt["schema"]["additionalProperties"] is False
    assert "tools" not in body


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_prompted_mode_asks_in_the_system_prompt(server: Server, kind: str) -> None:
    server.add(
        sse(_reply(kind, "not json", [])),
        sse(_reply(kind, f"```json\n{json.dumps(ANSWER)}\n```", [])),
    )
    result = await _run(server, kind, StructuredOutput(Contact, mode="prompted"))
    assert result.output == VALUE
    first, second = (r.json() for r in server.requests)
    system = first["messages"][0]["content"] if kind == "openai" else first["system"][0]["text"]
    assert system.startswith("Extract.")
    assert '"email"' in system
    assert "response_format" not in first
    assert "output_config" not in first
    # The invalid answer was sent back, saying what was wrong.
    retry = second["messages"][-1]
    text = retry["content"] if kind == "openai" else retry["content"][-1]["text"]
    assert "$: the answer is not valid JSON" in json.dumps(text)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_malformed_final_call_is_kept_answered_and_asked_again(
    server: Server, kind: str
) -> None:
    cut_short = json.dumps(ANSWER)[:-9]
    server.add(
        sse(_reply(kind, "", [("call_1", "final_result", cut_short)]), split=5),
        sse(_reply(kind, "", [("call_2", "final_result", ANSWER)]), split=5),
    )
    result = await _run(server, kind, StructuredOutput(Contact, mode="tool"))
    assert result.reason == "stop"
    assert result.output == VALUE
    kept = result.messages[1].tool_calls[0]
    assert (kept.raw_arguments, dict(kept.arguments)) == (cut_short, {})
    second = server.requests[1].json()
    # The kept call goes back with empty arguments, its result naming the problem.
    if kind == "openai":
        sent = second["messages"][-2]["tool_calls"][0]["function"]["arguments"]
        result_text = second["messages"][-1]["content"]
    else:
        sent = json.dumps(second["messages"][-2]["content"][-1]["input"])
        result_text = json.dumps(second["messages"][-1]["content"])
    assert json.loads(sent) == {}
    assert "malformed argument JSON" in result_text


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_an_ordinary_call_with_malformed_arguments_still_fails_the_reply(
    server: Server, kind: str
) -> None:
    server.add(sse(_reply(kind, "", [("call_1", "lookup", '{"q": ')])))
    result = await _run(server, kind, StructuredOutput(Contact, mode="tool"))
    assert result.reason == "error"
    assert result.error_message is not None
    assert "lookup (call_1) has malformed argument JSON" in result.error_message
    assert result.messages[1].tool_calls == ()
