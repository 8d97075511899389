"""What enters a run or an agent is checked once, where it enters (see the table in
``trio_agent._core._inputs``); what is behind the door trusts it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio

from trio_agent import (
    AssistantMessage,
    Context,
    CustomMessage,
    LoopConfig,
    Text,
    Tool,
    ToolCall,
    ToolContext,
    UserMessage,
    open_agent,
    open_agent_loop,
    run_agent_loop,
    tool,
)
from trio_agent._core import InvalidArguments, trusted_context
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from collections.abc import Mapping


class CountedContent(dict[str, Any]):
    """JSON data that counts how often a check reads it through: checking a message's
    free-form values unstructures them, which reads ``items()`` once."""

    reads = 0

    def items(self) -> Any:
        type(self).reads += 1
        return super().items()


def _note() -> CustomMessage:
    CountedContent.reads = 0
    return CustomMessage(kind="note", content=CountedContent(a=1))


def _text_reply(text: str = "done") -> AssistantMessage:
    return AssistantMessage(content=(Text(text=text),), stop_reason="stop")


async def test_run_agent_loop_checks_each_prompt_once() -> None:
    note = _note()
    result = await run_agent_loop(
        [UserMessage.text("go"), note], Context(), ScriptedModel([_text_reply()])
    )
    assert result.reason == "stop"
    assert CountedContent.reads == 1


async def test_open_agent_loop_checks_each_prompt_once() -> None:
    # The block's entry checked the prompts; the run it starts does not check them again.
    note = _note()
    async with open_agent_loop(
        [UserMessage.text("go"), note], Context(), ScriptedModel([_text_reply()])
    ) as run:
        async for _ in run.events:
            pass
    assert run.result is not None
    assert run.result.reason == "stop"
    assert CountedContent.reads == 1


async def test_agent_prompt_checks_its_message_once() -> None:
    async with open_agent(ScriptedModel([_text_reply()])) as agent:
        note = _note()
        result = await agent.prompt([UserMessage.text("go"), note])
    assert result.reason == "stop"
    assert CountedContent.reads == 1


async def test_a_queued_message_is_checked_when_queued_not_again_when_polled() -> None:
    model = ScriptedModel([_text_reply("1"), _text_reply("2")])
    async with open_agent(model) as agent:
        await agent.prompt("go")
        note = _note()
        agent.follow_up(note)
        assert CountedContent.reads == 1
        agent.follow_up("and then?")
        result = await agent.continue_()
    assert note in result.messages
    assert CountedContent.reads == 1


async def test_a_config_poll_is_still_checked() -> None:
    # A poll of the application's own is a door: what it returns is checked as it enters.
    handed = [[UserMessage.text("more"), CustomMessage(kind="note", details={"x": object()})]]

    def poll() -> list[Any]:
        return handed.pop() if handed else []

    config = LoopConfig(get_follow_up_messages=poll)
    with pytest.raises(Exception, match=r"get_follow_up_messages\(\)'s result\[1\]\.details"):
        await run_agent_loop("go", Context(), ScriptedModel([_text_reply()]), config)


def test_trusted_context_is_the_context_the_checks_would_build() -> None:
    @tool
    async def noop() -> str:
        """Does nothing."""
        return "ok"

    messages = (UserMessage.text("hi"), _text_reply())
    built = trusted_context("be brief", messages, (noop,))
    assert built == Context(system_prompt="be brief", messages=messages, tools=(noop,))
    # Every field is set: a field added to Context must be added to trusted_context too.
    assert [f.name for f in attrs.fields(Context)] == ["system_prompt", "messages", "tools"]
    assert all(getattr(built, f.name) is not None for f in attrs.fields(Context))


# --- a call's arguments: validated once ---------------------------------------------------


@tool
async def double(n: int) -> str:
    """Double a number.

    Args:
        n: the number.
    """
    return str(2 * n)


class _Validated(ToolContext):
    """A context saying the run already validated ``args`` for ``double``."""

    __slots__ = ("args",)

    def __init__(self, call: ToolCall, args: Mapping[str, Any]) -> None:
        super().__init__(call=call, report=_no_progress)
        self.args = args

    def _validated(self, tool: Tool) -> Mapping[str, Any] | None:
        return self.args if tool is double else None


async def _no_progress(partial: Any) -> None:
    await trio.lowlevel.checkpoint()


async def test_a_direct_call_of_a_decorated_tool_validates_its_arguments() -> None:
    call = ToolCall(id="c", name="double", arguments={"n": "x"})
    with pytest.raises(InvalidArguments, match="Validation failed"):
        await double.execute(call, {"n": "x"}, ToolContext(call=call, report=_no_progress))


async def test_arguments_the_run_validated_are_not_validated_again() -> None:
    # A context that says `{"n": 2.5}` was validated (no run would say so: it is not an
    # integer) shows which check refuses it: not the schema validation (pi's "Validation
    # failed for tool ..." result), which is skipped, but the conversion after it.
    call = ToolCall(id="c", name="double", arguments={"n": 1})
    args = {"n": 2.5}
    with pytest.raises(InvalidArguments, match='Invalid arguments for tool "double"'):
        await double.execute(call, args, _Validated(call, args))
    # Other arguments than those it validated are validated.
    with pytest.raises(InvalidArguments, match='Validation failed for tool "double"'):
        await double.execute(call, {"n": 2.5}, _Validated(call, args))
    assert await double.execute(call, {"n": 2}, _Validated(call, args)) == "4"


async def test_a_run_hands_its_tool_the_arguments_it_validated() -> None:
    seen: list[bool] = []

    async def execute(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
        seen.append(ctx._validated(probe) is args)
        seen.append(ctx._validated(double) is None)  # validated for this tool only
        return "ok"

    probe = Tool(
        name="probe",
        description="Probes.",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
        execute=execute,
    )
    replies = [
        AssistantMessage(
            content=(ToolCall(id="c", name="probe", arguments={"n": "3"}),),
            stop_reason="tool_use",
        ),
        _text_reply(),
    ]
    result = await run_agent_loop("go", Context(tools=(probe,)), ScriptedModel(replies))
    assert result.reason == "stop"
    assert seen == [True, True]
