"""The Agent as a state machine: prompt, steer, follow_up, abort, interrupt, continue,
tool calls finishing and model replies, in any order, checked against a small model.

Theory of operation
-------------------
Nothing here runs on a clock. The model and the tool are *gated*: a request waits until
the rule ``model_replies`` hands it a reply, and each tool call waits until the rule
``tool_finishes`` lets it answer (or fail). So every rule moves the agent from one quiet
state to the next, and the test knows exactly where the agent must be — waiting for a
reply, waiting for some calls, or idle.

Hypothesis' state machines are synchronous (hypothesis-trio is dead), so one trio loop
runs in a thread for the whole machine, and each rule runs there through
``trio.from_thread.run``, then waits for ``wait_all_tasks_blocked`` (every task of the
agent parked on a gate) before the invariants are read.

The model of the agent (:class:`Expected`) holds the two queues, the transcript as it
should be, the phase and the calls in flight. It encodes the rules of the loop and the
``Agent`` with the default ``one_at_a_time`` modes: a steering poll after every turn, a
follow-up poll when the model stops, ``prompt`` delivering one queued steering message
ahead of its own, an abort keeping finished results and pairing the rest,
``steer(interrupt=True)`` cutting the batch or the reply and going on with that message,
``max_steps`` putting a polled message back at the front of its queue.
"""

from __future__ import annotations

import collections
import threading
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio
import trio.testing
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from trio_agent import (
    Agent,
    AgentBusyError,
    AgentEnd,
    AgentEvent,
    AgentRunResult,
    AgentUsageError,
    AssistantMessage,
    Context,
    LoopConfig,
    Message,
    Text,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    open_agent,
)
from trio_agent._core._pairing import transcript_violations
from trio_agent.testing import assert_run_invariants, events_for
from trio_agent.testing._invariants import distinct_calls_view
from trio_agent.testing._script_rig import live_tasks

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from trio_agent import AssistantEvent, ModelRequest, ToolContext

MAX_STEPS = 4
Phase = Literal["idle", "model", "tools"]
QueueKind = Literal["steer", "follow_up"]


# --- gated fakes -------------------------------------------------------------------------


class GatedModel:
    """Each request waits until the test hands it a reply (then streams it at once)."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []
        self.waiting = 0
        self.send, self.receive = trio.open_memory_channel[AssistantMessage](0)

    def stream(self, request: ModelRequest) -> _GatedStream:
        self.requests.append(request)
        return _GatedStream(self)


class _GatedStream:
    def __init__(self, model: GatedModel) -> None:
        self._model = model
        self._events: list[AssistantEvent] | None = None

    async def __aenter__(self) -> _GatedStream:
        await trio.lowlevel.checkpoint()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    def __aiter__(self) -> _GatedStream:
        return self

    async def __anext__(self) -> AssistantEvent:
        if self._events is None:
            self._model.waiting += 1
            try:
                reply = await self._model.receive.receive()
            finally:
                self._model.waiting -= 1
            self._events = events_for(reply)
        await trio.lowlevel.checkpoint()
        if not self._events:
            raise StopAsyncIteration
        return self._events.pop(0)


class GatedTool:
    """Every call of the tool ``gate`` waits until the test says how it ends."""

    def __init__(self) -> None:
        self.running: dict[str, trio.Event] = {}
        self.verdicts: dict[str, bool] = {}
        self.started: list[str] = []
        self.finished: list[str] = []
        self.tool = Tool(
            name="gate",
            description="Waits for the test.",
            parameters={"type": "object"},
            execute=self._execute,
        )

    async def _execute(self, call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
        self.started.append(call.id)
        gate = self.running[call.id] = trio.Event()
        try:
            await gate.wait()
            if not self.verdicts.pop(call.id):
                raise RuntimeError(f"{call.id} failed")
            return f"{call.id} ok"
        finally:
            del self.running[call.id]
            self.finished.append(call.id)

    def finish(self, call_id: str, ok: bool) -> None:
        self.verdicts[call_id] = ok
        self.running[call_id].set()


# --- the trio loop in a thread -------------------------------------------------------------


class TrioThread:
    """One trio loop in a thread; ``call(afn)`` runs ``afn`` there and returns its result."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="agent-machine", daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the trio thread did not start")

    def _main(self) -> None:
        try:
            trio.run(self._serve)
        except Exception as exc:  # reported by close()
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self.token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            self._ready.set()
            await self._stop.wait()
            nursery.cancel_scope.cancel()

    def call(self, afn: Callable[[], Awaitable[Any]]) -> Any:
        return trio.from_thread.run(afn, trio_token=self.token)

    def close(self) -> None:
        trio.from_thread.run_sync(self._stop.set, trio_token=self.token)
        self._thread.join(30)
        if self._error is not None:
            raise self._error


# --- the model of the agent ----------------------------------------------------------------


@attrs.define
class Expected:
    """What the agent must look like after each rule."""

    steer: collections.deque[Message] = attrs.field(factory=collections.deque)
    follow: collections.deque[Message] = attrs.field(factory=collections.deque)
    transcript: list[tuple[Any, ...]] = attrs.field(factory=list)
    phase: Phase = "idle"
    batch: list[str] = attrs.field(factory=list)  # the calls of the running batch, in order
    results: dict[str, bool] = attrs.field(factory=dict)  # call id -> is_error, once finished
    requests: int = 0
    run_steps: int = 0
    modes: dict[QueueKind, str] = attrs.field(
        factory=lambda: {"steer": "one_at_a_time", "follow_up": "one_at_a_time"}
    )
    reason: str | None = None  # how the last run ended

    def queue(self, kind: QueueKind) -> collections.deque[Message]:
        return self.steer if kind == "steer" else self.follow

    def take(self, kind: QueueKind) -> list[tuple[QueueKind, Message]]:
        """One poll of a queue: the oldest message, or all of them in mode ``all``."""
        q = self.queue(kind)
        if self.modes[kind] == "all":
            taken = [(kind, m) for m in q]
            q.clear()
            return taken
        return [(kind, q.popleft())] if q else []

    def start_run(self, pending: list[tuple[QueueKind | None, Message]]) -> None:
        self.run_steps = 0
        self.reason = None
        self.request(pending)

    def request(self, pending: list[tuple[QueueKind | None, Message]]) -> None:
        self.transcript.extend(("user", m) for _, m in pending)
        self.run_steps += 1
        self.requests += 1
        self.phase = "model"

    def next_request(self, pending: list[tuple[QueueKind | None, Message]]) -> None:
        """Before every request after a run's first: the max_steps check."""
        if self.run_steps >= MAX_STEPS:
            # The polled messages never reach the transcript: back to their queue's front.
            for kind, m in reversed(pending):
                assert kind is not None
                self.queue(kind).appendleft(m)
            self.end("max_steps")
            return
        self.request(pending)

    def end(self, reason: str) -> None:
        self.phase = "idle"
        self.reason = reason
        self.batch = []
        self.results = {}

    def reply(self, message: AssistantMessage) -> None:
        ids = tuple(c.id for c in message.tool_calls)
        self.transcript.append(("assistant", message.stop_reason, ids))
        if message.stop_reason == "tool_use" and ids:
            self.phase = "tools"
            self.batch = list(ids)
            self.results = {}
        elif message.stop_reason == "stop":
            self.natural_end()
        else:
            self.end(message.stop_reason)

    def natural_end(self) -> None:
        pending = self.take("steer") or self.take("follow_up")
        if pending:
            self.next_request(list(pending))
        else:
            self.end("stop")

    def tool_done(self, call_id: str, ok: bool) -> None:
        self.results[call_id] = not ok
        if len(self.results) == len(self.batch):
            self.close_batch(None)
            self.next_request(list(self.take("steer")))

    def close_batch(self, cut_is_error: bool | None) -> None:
        for cid in self.batch:
            self.transcript.append(("tool_result", cid, self.results.get(cid, cut_is_error)))
        self.batch = []
        self.results = {}

    def abort(self) -> None:
        if self.phase == "model":
            self.transcript.append(("assistant", "aborted", ()))
        elif self.phase == "tools":
            self.close_batch(True)
        self.end("aborted")

    def interrupt(self, message: Message) -> None:
        self.steer.appendleft(message)
        if self.phase == "idle":
            return
        if self.phase == "model":
            self.transcript.append(("assistant", "aborted", ()))
        else:
            self.close_batch(True)
        self.next_request(list(self.take("steer")))


def shape(message: Message) -> tuple[Any, ...]:
    """How the model describes a transcript entry."""
    if isinstance(message, AssistantMessage):
        return ("assistant", message.stop_reason, tuple(c.id for c in message.tool_calls))
    if isinstance(message, ToolResultMessage):
        return ("tool_result", message.tool_call_id, message.is_error)
    return ("user", message)


def same(entry: tuple[Any, ...], expected: tuple[Any, ...]) -> bool:
    if entry[0] == "user" and expected[0] == "user":
        return entry[1] is expected[1]  # queued messages are delivered as the very objects
    return entry == expected


# --- the machine -----------------------------------------------------------------------------


REPLIES = st.sampled_from(["tool_use 1", "tool_use 2", "tool_use 3", "stop", "error", "length"])


class AgentMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.expected = Expected()
        self.texts = 0
        self.replies = 0
        self.outcomes: list[AgentRunResult | BaseException] = []
        self.events: list[AgentEvent] = []
        # Each finished run with what it started from: (result, first event, first
        # request, transcript before); checked once by `each_run_keeps_the_loop_invariants`.
        self.finished: list[tuple[AgentRunResult, int, int, tuple[Message, ...]]] = []
        self.checked = 0
        self.trio = TrioThread()
        self.trio.call(self._open)

    async def _open(self) -> None:
        self.model = GatedModel()
        self.tool = GatedTool()
        self.tasks_before = live_tasks()
        self._closed = trio.Event()
        self._opened = trio.Event()
        self.trio.nursery.start_soon(self._host)
        await self._opened.wait()

    async def _host(self) -> None:
        config = LoopConfig(max_steps=MAX_STEPS, cleanup_timeout=5.0)
        async with open_agent(self.model, tools=[self.tool.tool], config=config) as agent:
            self.agent: Agent = agent
            async with agent.subscribe() as events, trio.open_nursery() as nursery:
                nursery.start_soon(self._listen, events)
                self._opened.set()
                await self._closed.wait()
                nursery.cancel_scope.cancel()

    async def _listen(self, events: trio.MemoryReceiveChannel[AgentEvent]) -> None:
        async for event in events:
            self.events.append(event)

    def teardown(self) -> None:
        async def close() -> None:
            self._closed.set()
            await trio.testing.wait_all_tasks_blocked()

        try:
            self.trio.call(close)
            # Closing the agent ended every run: nothing of it is alive, every tool
            # call's finally block ran.
            leaked = self.trio.call(self._leaked)
            assert not leaked, f"tasks alive after the agent closed: {leaked}"
            assert sorted(self.tool.started) == sorted(self.tool.finished)
        finally:
            self.trio.close()

    async def _leaked(self) -> list[str]:
        await trio.testing.wait_all_tasks_blocked()
        alive = live_tasks() - self.tasks_before - {trio.lowlevel.current_task()}
        return sorted(t.name for t in alive)

    # --- helpers --------------------------------------------------------------------

    def settle(self, action: Callable[[], Any]) -> Any:
        """Run ``action`` in the trio thread, then wait until the agent is quiet."""

        async def go() -> Any:
            out = action()
            await trio.testing.wait_all_tasks_blocked()
            return out

        return self.trio.call(go)

    def text(self, what: str) -> UserMessage:
        self.texts += 1
        return UserMessage.text(f"{what} {self.texts}", timestamp=float(self.texts))

    def start(self, method: Callable[[], Awaitable[AgentRunResult]]) -> None:
        async def run() -> None:
            start = (len(self.events), len(self.model.requests), self.agent.state.messages)
            try:
                result = await method()
            except (AgentBusyError, AgentUsageError) as exc:
                self.outcomes.append(exc)
            else:
                self.outcomes.append(result)
                self.finished.append((result, *start))

        self.settle(lambda: self.trio.nursery.start_soon(run))

    # --- rules ------------------------------------------------------------------------

    @initialize(
        steering=st.sampled_from(["one_at_a_time", "all"]),
        follow_ups=st.sampled_from(["one_at_a_time", "all"]),
        now=st.booleans(),
    )
    def configure(self, steering: str, follow_ups: str, now: bool) -> None:
        def set_modes() -> None:
            self.agent.steering_mode = steering  # type: ignore[assignment]
            self.agent.follow_up_mode = follow_ups  # type: ignore[assignment]

        self.settle(set_modes)
        self.expected.modes = {"steer": steering, "follow_up": follow_ups}
        # Most machines should start with a conversation; the rest start idle.
        if now:
            self.prompt()

    @rule()
    def prompt(self) -> None:
        message = self.text("prompt")
        e = self.expected
        before = len(self.outcomes)
        self.start(lambda: self.agent.prompt(message))
        if e.phase != "idle":
            assert isinstance(self.outcomes[-1], AgentBusyError), self.outcomes[before:]
            return
        e.start_run([*e.take("steer"), (None, message)])

    @rule()
    def continue_(self) -> None:
        e = self.expected
        self.start(self.agent.continue_)
        if e.phase != "idle":
            assert isinstance(self.outcomes[-1], AgentBusyError)
            return
        if not e.transcript:
            assert isinstance(self.outcomes[-1], AgentUsageError)
            return
        if e.transcript[-1][0] == "assistant":
            pending = e.take("steer") or e.take("follow_up")
            if not pending:
                assert isinstance(self.outcomes[-1], AgentUsageError)
                return
            e.start_run(list(pending))
        else:
            # From a user or tool-result tail the run's own first steering poll runs.
            e.start_run(list(e.take("steer")))

    @rule(from_thread=st.booleans())
    def steer(self, from_thread: bool) -> None:
        message = self.text("steer")
        if from_thread:
            # This thread is not the trio thread: the *_from_thread API is for it.
            self.agent.steer_from_thread(message)
            self.settle(lambda: None)
        else:
            self.settle(lambda: self.agent.steer(message))
        self.expected.steer.append(message)

    @rule(from_thread=st.booleans())
    def follow_up(self, from_thread: bool) -> None:
        message = self.text("follow-up")
        if from_thread:
            self.agent.follow_up_from_thread(message)
            self.settle(lambda: None)
        else:
            self.settle(lambda: self.agent.follow_up(message))
        self.expected.follow.append(message)

    @rule()
    def reset(self) -> None:
        e = self.expected

        def reset() -> BaseException | None:
            try:
                self.agent.reset()
            except AgentBusyError as exc:
                return exc
            return None

        error = self.settle(reset)
        if e.phase != "idle":
            assert isinstance(error, AgentBusyError)
            return
        assert error is None
        e.transcript.clear()
        e.steer.clear()
        e.follow.clear()

    @rule()
    def steer_with_interrupt(self) -> None:
        message = self.text("interrupt")
        self.settle(lambda: self.agent.steer(message, interrupt=True))
        self.expected.interrupt(message)

    @rule(from_thread=st.booleans())
    def abort(self, from_thread: bool) -> None:
        if from_thread:
            self.agent.abort_from_thread()
            self.settle(lambda: None)
        else:
            self.settle(self.agent.abort)
        if self.expected.phase != "idle":
            self.expected.abort()

    @precondition(lambda self: self.expected.phase == "model")
    @rule(kind=REPLIES)
    def model_replies(self, kind: str) -> None:
        self.replies += 1
        reason, _, n = kind.partition(" ")
        calls = tuple(
            ToolCall(id=f"r{self.replies}.{k}", name="gate", arguments={})
            for k in range(int(n or 0))
        )
        content: tuple[Text | ToolCall, ...] = (Text(text=f"reply {self.replies}"), *calls)
        message = AssistantMessage(
            content=content,
            stop_reason=reason,  # type: ignore[arg-type]
            error_message="scripted" if reason == "error" else None,
            timestamp=float(self.replies),
        )

        async def send() -> None:
            await self.model.send.send(message)
            await trio.testing.wait_all_tasks_blocked()

        self.trio.call(send)
        self.expected.reply(message)

    @precondition(lambda self: self.expected.phase == "tools")
    @rule(data=st.data(), ok=st.booleans())
    def tool_finishes(self, data: st.DataObject, ok: bool) -> None:
        e = self.expected
        running = [cid for cid in e.batch if cid not in e.results]
        call_id = data.draw(st.sampled_from(running), label="call")
        self.settle(lambda: self.tool.finish(call_id, ok))
        e.tool_done(call_id, ok)

    # --- invariants ---------------------------------------------------------------------

    @invariant()
    def agrees_with_the_model(self) -> None:
        e = self.expected
        state = self.agent.state
        where = f"(phase {e.phase}, transcript {[x[:2] for x in e.transcript]})"
        assert state.is_running == (e.phase != "idle"), where
        assert self.model.waiting == (1 if e.phase == "model" else 0), where
        running = sorted(self.tool.running)
        expected_running = sorted(c for c in e.batch if c not in e.results)
        assert running == expected_running, where
        assert len(self.model.requests) == e.requests, where
        got = [shape(m) for m in state.messages]
        assert len(got) == len(e.transcript), f"{got} vs {e.transcript}"
        for i, (entry, want) in enumerate(zip(got, e.transcript, strict=True)):
            assert same(entry, want), f"messages[{i}]: {entry} != {want} {where}"

    @invariant()
    def queues_are_fifo_and_nothing_is_lost(self) -> None:
        e = self.expected
        assert [id(m) for m in self.agent.queued_steering] == [id(m) for m in e.steer]
        assert [id(m) for m in self.agent.queued_follow_ups] == [id(m) for m in e.follow]

    @invariant()
    def pairing_holds_in_every_request_and_when_idle(self) -> None:
        for i, request in enumerate(self.model.requests):
            problems = transcript_violations(distinct_calls_view(request.messages))
            assert not problems, f"request {i}: {problems}"
        if self.expected.phase == "idle":
            assert not transcript_violations(self.agent.state.messages)
            assert not self.tool.running

    @invariant()
    def each_run_keeps_the_loop_invariants(self) -> None:
        # The loop's own invariants (1-6 and 8 of docs/guarantees.md, "Every run keeps
        # eight invariants"), on each run the agent made, from the events a subscriber
        # received.
        for result, first_event, first_request, before in self.finished[self.checked :]:
            events = self.events[first_event:]
            ends = [i for i, ev in enumerate(events) if isinstance(ev, AgentEnd)]
            assert ends, "a run returned before its AgentEnd reached the subscriber"
            assert_run_invariants(
                result,
                events[: ends[0] + 1],
                self.model.requests[first_request : first_request + result.steps],
                Context(messages=before),
                max_steps=MAX_STEPS,
            )
        self.checked = len(self.finished)

    @invariant()
    def a_finished_prompt_reports_how_its_run_ended(self) -> None:
        e = self.expected
        results = [o for o in self.outcomes if isinstance(o, AgentRunResult)]
        if e.phase == "idle" and e.reason is not None:
            assert results, "the run ended but prompt() has not returned"
            assert results[-1].reason == e.reason


AgentMachine.TestCase.settings = settings(
    # A machine run makes a few dozen cross-thread calls, costlier than a loop example:
    # it gets half the profile's examples (1,250 in `thorough`).
    max_examples=max(10, settings.default.max_examples // 2),
    stateful_step_count=40,
    deadline=None,
)
TestAgentMachine = AgentMachine.TestCase
