"""The Agent's tests share these: a probe tool whose calls can be held at a gate, a
reply that calls it, a deadlock guard, and readers of what the model was sent."""

from __future__ import annotations

import functools
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import trio

from tests.kit.loop import call, tool_use
from trio_agent import (
    AgentEvent,
    AssistantMessage,
    Message,
    Tool,
    ToolCall,
    ToolContext,
    UserMessage,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from trio_agent.testing import ScriptedModel


def guarded(test: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    """Fail a test that deadlocks instead of hanging: under the autojump clock a
    deadlock jumps straight to this deadline."""

    @functools.wraps(test)
    async def run(*args: Any, **kwargs: Any) -> None:
        with trio.fail_after(600):
            await test(*args, **kwargs)

    return run


def probe_use(*ids: str, wait: bool = False, text: str | None = None) -> AssistantMessage:
    """A reply calling the probe tool once per id (each call waits for its gate if asked)."""
    return tool_use(*(call(i, wait=wait) for i in ids), text=text)


class Probe:
    """A tool: ``started[id]`` is set when a call starts; a call with ``wait`` waits for
    ``gates[id]``; ``finished`` lists the calls that returned."""

    def __init__(self) -> None:
        self.started: defaultdict[str, trio.Event] = defaultdict(trio.Event)
        self.gates: defaultdict[str, trio.Event] = defaultdict(trio.Event)
        self.finished: list[str] = []
        self.tool = Tool(
            name="probe",
            description="a probe",
            parameters={"type": "object", "properties": {"wait": {"type": "boolean"}}},
            execute=self._execute,
        )

    async def _execute(self, call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
        self.started[call.id].set()
        if args.get("wait"):
            await self.gates[call.id].wait()
        self.finished.append(call.id)
        return f"ok {call.id}"


def texts(messages: tuple[Message, ...] | list[Message]) -> list[str]:
    """The text of each user message, in order."""
    return [m.content[0].text for m in messages if type(m) is UserMessage]  # type: ignore[union-attr]


def user_texts_of(model: ScriptedModel, step: int) -> list[str]:
    return texts(model.requests[step].messages)


async def collect(events: trio.MemoryReceiveChannel[AgentEvent], into: list[AgentEvent]) -> None:
    async for event in events:
        into.append(event)
