"""Structured-output test helpers: a model's answer in each asking mode, and the message
that sent one back."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio

from trio_agent import (
    AgentEvent,
    AgentRunResult,
    AssistantMessage,
    Context,
    OutputError,
    Text,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    run_agent_loop,
)
from trio_agent.testing import ScriptedModel, assert_run_invariants

if TYPE_CHECKING:
    from collections.abc import Sequence


def answer_in(mode: str, value: Any, text: str | None, i: int) -> AssistantMessage:
    """The reply that answers with the JSON ``value``, or with ``text`` as it is: in tool
    mode a call to ``final_result`` (id ``f<i>``; ``text`` is its argument text, kept as
    a provider keeps a malformed one), else the reply's text."""
    if mode == "tool":
        call = ToolCall(id=f"f{i}", name="final_result", arguments=value or {}, raw_arguments=text)
        return AssistantMessage(content=(call,), stop_reason="tool_use")
    body = text if text is not None else json.dumps(value)
    return AssistantMessage(content=(Text(text=body),), stop_reason="stop")


def sent_back(mode: str, message: Any) -> str:
    """The text of the message that sent an answer back: the final-answer call's error
    result (tool mode), else a user message."""
    if mode == "tool":
        assert isinstance(message, ToolResultMessage)
        assert message.is_error
    else:
        assert isinstance(message, UserMessage)
    block = message.content[0]
    assert isinstance(block, Text)
    return block.text


@attrs.frozen
class Corruption:
    """One wrong answer: its JSON value, or its text; and what the message sending it
    back must say (its path, and maybe more)."""

    value: Any
    text: str | None
    said: str


async def run_corrupted(
    mode: str, output_type: Any, good: Any, bad: Sequence[Corruption], retries: int, **kw: Any
) -> AgentRunResult[Any]:
    """Run a scripted model that gives the ``bad`` answers, then the ``good`` one, and
    check what every such run must show; returns the result (its output for the caller
    to compare). ``kw`` go to ``run_agent_loop`` (``output_retries=``...).

    Checked: every run invariant; each answer sent back names what its corruption says;
    ``len(bad) <= retries``: the run ends ``stop`` after ``len(bad) + 1`` requests; else
    it ends ``output_invalid`` after ``retries + 1``, its error naming the last failure,
    and reading ``output`` raises.
    """
    script = [answer_in(mode, c.value, c.text, i) for i, c in enumerate(bad)]
    script.append(answer_in(mode, good, None, len(bad)))
    model = ScriptedModel(script)
    events: list[AgentEvent] = []
    context = Context(system_prompt="Extract.")
    with trio.fail_after(100):
        result = await run_agent_loop(
            "go", context, model, on_event=events.append, output_type=output_type, **kw
        )
    assert_run_invariants(result, events, model.requests, context)
    for i, corruption in enumerate(bad[: retries + 1]):
        if i + 1 < model.request_count:
            said = sent_back(mode, model.requests[i + 1].messages[-1])
            assert corruption.said in said, (corruption, said)
    if len(bad) <= retries:
        assert result.reason == "stop", result.error_message
        assert model.request_count == len(bad) + 1
    else:
        assert result.reason == "output_invalid"
        assert model.request_count == retries + 1
        assert result.error_message is not None
        assert bad[retries].said in result.error_message
        with pytest.raises(OutputError):
            _ = result.output
    return result
