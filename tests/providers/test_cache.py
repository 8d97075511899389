"""Prompt caching: where each provider puts its cache hints, and the cache tokens each
reports in ``Usage`` — against the fake servers on 127.0.0.1."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import trio

from tests.kit.http_server import recorded
from tests.kit.providers import TOOLS, collect, final, make_model, two_round_trips
from trio_agent import (
    Context,
    ModelOptions,
    ModelRequest,
    ToolSpec,
    Usage,
    UserMessage,
    run_agent_loop,
)

if TYPE_CHECKING:
    from tests.kit.http_server import Server

EPHEMERAL = {"type": "ephemeral"}


def breakpoints(body: dict[str, Any]) -> list[str]:
    """Where a Messages API body has ``cache_control`` marks, in prompt order."""
    found = []
    for tool in body.get("tools", []):
        if "cache_control" in tool:
            found.append(f"tool {tool['name']}")
    for block in body.get("system", []):
        if "cache_control" in block:
            found.append("system")
    for n, turn in enumerate(body["messages"]):
        for k, block in enumerate(turn["content"]):
            if "cache_control" in block:
                assert block["cache_control"] == EPHEMERAL
                assert k == len(turn["content"]) - 1, "a breakpoint ends its turn"
                found.append(f"{turn['role']} {n}")
    return found


async def test_anthropic_breakpoints_in_an_agent_run(server: Server) -> None:
    two_round_trips(server, "anthropic")
    context = Context(system_prompt="Agent.", tools=TOOLS)
    async with make_model("anthropic", server.url) as model:
        with trio.fail_after(10):
            await run_agent_loop([UserMessage.text("Read a.txt and b.txt")], context, model)
    marks = [breakpoints(r.json()) for r in server.requests]
    # The system prompt, the tool list (its last tool), the last user turn and the one
    # before it: never more than the API's 4.
    assert marks == [
        ["tool add", "system", "user 0"],
        ["tool add", "system", "user 0", "user 2"],
        ["tool add", "system", "user 2", "user 4"],
    ]
    # The previous request's last breakpoint is again a breakpoint in the next one.
    assert all(len(m) <= 4 for m in marks)


@pytest.mark.parametrize(
    ("made_with", "cache", "expected"),
    [
        (True, None, True),
        (True, False, False),
        (False, None, False),
        (False, True, True),
        (False, "key-1", True),
    ],
)
def test_anthropic_cache_option_overrides_the_model_default(
    made_with: bool, cache: bool | str | None, expected: bool
) -> None:
    spec = ToolSpec(name="ls", description="List.", parameters={"type": "object"})
    req = ModelRequest(
        system_prompt="S",
        messages=(UserMessage.text("x"),),
        tools=(spec,),
        options=ModelOptions(cache=cache),
    )
    model = make_model("anthropic", "http://127.0.0.1:9", prompt_cache=made_with)
    marks = breakpoints(model.request_body(req))
    assert marks == (["tool ls", "system", "user 0"] if expected else [])


@pytest.mark.parametrize("kind", ["openai", "responses"])
def test_openai_prompt_cache_key(kind: str) -> None:
    model = make_model(kind, "http://127.0.0.1:9")
    keyed = model.request_body(
        ModelRequest(
            system_prompt="",
            messages=(UserMessage.text("x"),),
            options=ModelOptions(cache="run-42"),
        )
    )
    plain = model.request_body(
        ModelRequest(
            system_prompt="", messages=(UserMessage.text("x"),), options=ModelOptions(cache=True)
        )
    )
    assert keyed["prompt_cache_key"] == "run-42"
    assert "prompt_cache_key" not in plain


@pytest.mark.parametrize(
    ("kind", "usage"),
    [
        (
            "anthropic",
            Usage(
                input_tokens=21, output_tokens=17, cache_read_tokens=3072, cache_write_tokens=1460
            ),
        ),
        ("openai", Usage(input_tokens=163, output_tokens=12, cache_read_tokens=1024)),
        ("responses", Usage(input_tokens=163, output_tokens=12, cache_read_tokens=1024)),
        ("gemini", Usage(input_tokens=163, output_tokens=12, cache_read_tokens=1024)),
    ],
)
async def test_cache_tokens_are_reported(kind: str, usage: Usage, server: Server) -> None:
    from tests.kit.providers import TEXT_STREAMS

    server.add(recorded(TEXT_STREAMS[kind]))
    async with make_model(kind, server.url) as model:
        message = final(await collect(model))
    assert message.usage == usage
