"""``agent.state`` is exact at every instant: whatever runs after an event — a tool, a
``before_tool_call`` hook, the model's stream, a subscriber — finds the event already
in the state.

Each check is repeated over many runs: trio picks among ready tasks at random, so a
state updated by another task than the run's (as it once was) is caught lagging in some
of them.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio
import trio.testing

from tests.kit.agent import Probe, guarded, probe_use
from tests.kit.loop import reply
from trio_agent import (
    AgentEnd,
    AssistantMessage,
    BeforeToolCallContext,
    LoopConfig,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    Text,
    TextDelta,
    ToolCall,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    check_transcript,
    open_agent,
)
from trio_agent.testing import ScriptedModel, events_for

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence

    from trio_agent import Agent, AssistantEvent, ModelRequest, ToolContext

RUNS = 200


def two_calls(turn: int) -> AssistantMessage:
    return probe_use(f"a{turn}", f"b{turn}")


@guarded
async def test_a_running_tool_finds_its_own_call_pending(
    autojump_clock: trio.testing.MockClock,
) -> None:
    agent_box: list[Agent] = []
    checked: list[str] = []

    async def execute(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
        state = agent_box[0].state
        assert state.is_running
        assert call.id in state.pending_tool_calls, (call.id, state.pending_tool_calls)
        # The reply that made the call is already in the transcript.
        last = state.messages[-1]
        assert type(last) is AssistantMessage
        assert call in last.tool_calls
        assert state.streaming_message is None
        checked.append(call.id)
        await trio.lowlevel.checkpoint()
        return "ok"

    probe = Probe()
    tool = attrs.evolve(probe.tool, execute=execute)
    # One call per turn on odd runs (it runs in the run's own task, right after its
    # ToolExecutionStart), two on even runs (they run in a nursery).
    model = ScriptedModel(
        [
            m
            for turn in range(RUNS)
            for m in (two_calls(turn) if turn % 2 else probe_use(f"a{turn}"), reply())
        ]
    )
    async with open_agent(model, tools=[tool]) as agent:
        agent_box.append(agent)
        for _ in range(RUNS):
            await agent.prompt("go")
        check_transcript(agent.state.messages)
    assert len(checked) == RUNS + RUNS // 2


@guarded
async def test_a_before_tool_call_hook_finds_its_call_pending_and_the_reply_appended(
    autojump_clock: trio.testing.MockClock,
) -> None:
    agent_box: list[Agent] = []
    checked: list[str] = []

    async def before(ctx: BeforeToolCallContext) -> None:
        state = agent_box[0].state
        assert state.is_running
        assert ctx.tool_call.id in state.pending_tool_calls
        assert state.messages[-1] is ctx.assistant_message
        checked.append(ctx.tool_call.id)

    probe = Probe()
    model = ScriptedModel([m for turn in range(RUNS) for m in (two_calls(turn), reply())])
    config = LoopConfig(before_tool_call=before)
    async with open_agent(model, tools=[probe.tool], config=config) as agent:
        agent_box.append(agent)
        for _ in range(RUNS):
            await agent.prompt("go")
    assert len(checked) == 2 * RUNS


class WatchedModel:
    """Streams ``inner``'s replies; each time the loop asks for the next event, checks
    that the agent's streaming message already shows every delta handed out so far."""

    def __init__(self, inner: ScriptedModel, agent_box: list[Agent]) -> None:
        self.inner = inner
        self.agent_box = agent_box
        self.checks = 0

    @asynccontextmanager
    async def _stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        async with self.inner.stream(request) as events:
            yield _Watch(self, events)

    def stream(self, request: ModelRequest) -> Any:
        return self._stream(request)


class _Watch:
    def __init__(self, model: WatchedModel, events: Any) -> None:
        self.model = model
        self.events = events.__aiter__()
        self.text = ""

    def __aiter__(self) -> _Watch:
        return self

    async def __anext__(self) -> AssistantEvent:
        if self.text:
            streaming = self.model.agent_box[0].state.streaming_message
            assert streaming is not None
            assert [b.text for b in streaming.content if type(b) is Text] == [self.text]
            self.model.checks += 1
        event = await self.events.__anext__()
        if type(event) is TextDelta:
            self.text += event.delta
        return event  # type: ignore[no-any-return]


@guarded
async def test_the_streaming_message_shows_each_delta_before_the_next_is_read(
    autojump_clock: trio.testing.MockClock,
) -> None:
    text = AssistantMessage(content=(Text(text="abcdef"),), stop_reason="stop")
    replies: Sequence[Any] = [events_for(text, chunk_size=1) for _ in range(RUNS)]
    agent_box: list[Agent] = []
    model = WatchedModel(ScriptedModel(replies), agent_box)
    async with open_agent(model) as agent:
        agent_box.append(agent)
        for _ in range(RUNS):
            await agent.prompt("go")
            assert agent.state.messages[-1] == text
            assert agent.state.streaming_message is None
    assert model.checks >= 5 * RUNS


@guarded
async def test_a_subscriber_finds_each_event_in_the_state(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """At each event a subscriber receives, the state already includes it (it may
    include the run's next event too: the run goes on once the subscriber took one).
    A tool that waits for the subscriber pins the moment a call runs."""
    probe = Probe()
    runs = RUNS // 2
    model = ScriptedModel(
        [m for turn in range(runs) for m in (probe_use(f"a{turn}", wait=True), reply())]
    )
    checked: list[str] = []
    async with open_agent(model, tools=[probe.tool]) as agent, trio.open_nursery() as nursery:
        async with agent.subscribe() as events:

            async def prompts() -> None:
                for _ in range(runs):
                    await agent.prompt("go")

            nursery.start_soon(prompts)
            ended = 0
            async for event in events:
                state = agent.state
                match event:
                    case MessageStart(message=AssistantMessage()):
                        assert state.streaming_message is not None or any(
                            m.role == "assistant" for m in state.messages[-1:]
                        )
                    case MessageUpdate():
                        assert state.streaming_message is not None or (
                            state.messages[-1].role == "assistant"
                        )
                    case MessageEnd(message=message):
                        assert any(m is message for m in state.messages)
                    case ToolExecutionStart(call_id=call_id):
                        # The call waits for us: it is running, hence pending.
                        assert call_id in state.pending_tool_calls
                        assert state.is_running
                        probe.gates[call_id].set()
                    case ToolExecutionEnd(call_id=call_id):
                        assert call_id not in state.pending_tool_calls
                    case TurnEnd(tool_results=results):
                        for result in results:
                            assert any(m is result for m in state.messages)
                    case AgentEnd(messages=messages):
                        assert not state.is_running
                        assert state.messages[-len(messages) :] == messages
                        ended += 1
                checked.append(event.type)
                if ended == runs:
                    break
    assert checked.count("tool_execution_start") == runs
    check_transcript(agent.state.messages)
