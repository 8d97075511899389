"""Builders of messages and tools, and checks of runs, shared by the tests: each is
defined here once (the Agent's probe tool is in :mod:`tests.kit.agent`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

import trio

from trio_agent import (
    AgentEvent,
    AssistantEvent,
    AssistantMessage,
    Context,
    ModelRequest,
    Start,
    Text,
    TextDelta,
    TextEnd,
    TextStart,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolContext,
    ToolOutput,
    ToolResultMessage,
    UserMessage,
    check_transcript,
)
from trio_agent.testing import assert_run_invariants

ANY_OBJECT: Mapping[str, Any] = {"type": "object"}


def call(id: str, name: str = "probe", **arguments: Any) -> ToolCall:
    return ToolCall(id=id, name=name, arguments=arguments)


def tool_use(*calls: ToolCall, text: str | None = None, **fields: Any) -> AssistantMessage:
    """A reply that makes ``calls`` (after ``text``, if given); ``fields`` are more of the
    message's fields (``usage``, ``model``, ...)."""
    content: tuple[Any, ...] = ((Text(text=text),) if text else ()) + calls
    return AssistantMessage(content=content, stop_reason="tool_use", **fields)


def reply(
    text: str = "done", stop_reason: Any = "stop", *calls: ToolCall, **fields: Any
) -> AssistantMessage:
    """A reply of ``text`` (then ``calls``) that ended with ``stop_reason`` (an ``error`` or
    ``aborted`` one with the error message "boom"); ``fields`` as for :func:`tool_use`."""
    return AssistantMessage(
        content=(Text(text=text), *calls),
        stop_reason=stop_reason,
        error_message="boom" if stop_reason in ("error", "aborted") else None,
        **fields,
    )


def user(text: str = "go", t: float = 1.0) -> UserMessage:
    """A user message of ``text`` at the fixed time ``t`` (so transcripts compare equal)."""
    return UserMessage.text(text, timestamp=t)


def reply_cut_in_its_third_block() -> tuple[list[AssistantEvent], tuple[Any, ...]]:
    """A reply's events up to a cut inside its third block — a finished text block, a
    finished call to ``probe`` (its arguments in two deltas), then text still streaming —
    and the content a reply cut there keeps."""
    done = ToolCall(id="c1", name="probe", arguments={"x": 1})
    events: list[AssistantEvent] = [
        Start(),
        TextStart(index=0),
        TextDelta(index=0, delta="half "),
        TextDelta(index=0, delta="done"),
        TextEnd(index=0, text="half done"),
        ToolCallStart(index=1, id="c1", name="probe"),
        ToolCallDelta(index=1, delta='{"x": '),
        ToolCallDelta(index=1, delta="1}"),
        ToolCallEnd(index=1, tool_call=done),
        TextStart(index=2),
        TextDelta(index=2, delta="cut "),
    ]
    return events, (Text(text="half done"), done, Text(text="cut "))


def prompt(text: str = "go") -> list[UserMessage]:
    return [UserMessage.text(text)]


Execute = Callable[[ToolCall, Mapping[str, Any], ToolContext], Awaitable["ToolOutput | str"]]


def make_tool(
    name: str = "probe",
    execute: Execute | None = None,
    *,
    parameters: Mapping[str, Any] = ANY_OBJECT,
    **kwargs: Any,
) -> Tool:
    async def default(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
        await trio.lowlevel.checkpoint()
        return f"{name} ok"

    return Tool(
        name=name,
        description=f"the {name} tool",
        parameters=parameters,
        execute=execute or default,
        **kwargs,
    )


def sleeper(name: str, seconds: float, log: list[str] | None = None) -> Tool:
    """A tool that sleeps ``seconds`` (or ``args['s']``) and logs start/end/finally."""

    async def execute(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
        if log is not None:
            log.append(f"start {call.id}")
        try:
            await trio.sleep(float(args.get("s", seconds)))
            if log is not None:
                log.append(f"end {call.id}")
            return f"{call.id} slept"
        finally:
            if log is not None:
                log.append(f"finally {call.id}")

    return make_tool(name, execute)


def results_of(messages: Sequence[Any]) -> dict[str, ToolResultMessage]:
    """Call id → its result, of the tool results among ``messages``."""
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolResultMessage)}


def text_of(out: ToolOutput | ToolResultMessage) -> str:
    """What a tool answered, as text: a ``ToolOutput``'s content, which must be a string;
    a result message's first block, which must be text."""
    if isinstance(out, ToolOutput):
        assert isinstance(out.content, str)
        return out.content
    block = out.content[0]
    assert isinstance(block, Text)
    return block.text


def ctx(*tools: Tool, messages: Sequence[Any] = (), system_prompt: str = "sys") -> Context:
    return Context(system_prompt=system_prompt, messages=tuple(messages), tools=tools)


class Recorder:
    """An ``on_event`` sink that keeps every event."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)

    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def of(self, cls: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, cls)]


def assert_paired(messages: Sequence[Any]) -> None:
    check_transcript(messages)


def assert_consistent(
    result: Any,
    events: Sequence[AgentEvent],
    requests: Sequence[ModelRequest],
    *,
    tool_execution: Literal["parallel", "sequential"] = "parallel",
) -> None:
    """The public :func:`assert_run_invariants` on a finished run.

    ``requests`` are the model's (``ScriptedModel.requests``). The context the run started
    from is read back from the result: the transcript is that context's messages followed
    by ``result.messages`` (a run whose ``prepare_next_turn`` swapped the context is
    checked without that part).
    """
    new = len(result.messages)
    transcript = tuple(result.transcript)
    kept = transcript[: len(transcript) - new]
    swapped = transcript[len(kept) :] != tuple(result.messages)
    before = Context(messages=() if swapped else kept)
    assert_run_invariants(
        result,
        events,
        requests,
        before,
        context_swapped=swapped,
        tool_execution=tool_execution,
    )


async def abort_when_reached(
    run: Any, pause: Any, reason: str, recorder: Recorder | None = None
) -> None:
    """Drain ``run.events`` (into ``recorder``) and abort the run once ``pause`` is reached."""

    async def drain() -> None:
        async for event in run.events:
            if recorder is not None:
                recorder(event)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain)
        await pause.reached.wait()
        run.abort(reason)
