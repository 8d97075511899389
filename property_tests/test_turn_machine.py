"""The turn machine alone (``_core._turn``): random event sequences, no scheduler.

Theory of operation
-------------------
No trio loop runs here. :class:`Sim` plays the driver: it asks the machine for the next
step and performs it with outcomes drawn by Hypothesis — replies with any stop reason,
zero to three calls (duplicate and reused ids among them), results in any order, polls
returning queued messages, hooks answering either way — and at every checkpoint it may
abort (with or without a grace), interrupt (as ``steer(interrupt=True)`` does, a message
first put at the front of the steering queue), or let a ``run_timeout`` deadline fire —
and so may a hook, a poll or the event sink from the run's own task, with no
checkpoint until the run's next one.
A cancel is modelled as trio's: the run's scope is cancelled, and the next checkpoint
raises; the scope catches it, and the run resumes (an interrupt's cut) or closes.

The invariants are checked at every step:

- the phase and what is in flight agree (a reply only while streaming, a batch only
  while executing; an interrupt cuts only one of them);
- no request while a call is unanswered (the transcript is paired before each), none
  after an abort was asked, and ``steps`` never passes ``max_steps``;
- exactly one end: ``close`` builds one ``AgentEnd`` and nothing after it;
- at the end, every call of the transcript has exactly one result; every ``TurnStart``
  one ``TurnEnd``; every call one ``ToolExecutionStart`` before one
  ``ToolExecutionEnd``; the ``MessageEnd`` events are the result's messages; every
  prompt and polled message is delivered once or reported undelivered; an abort ends
  the run ``aborted`` (a deadline ``timeout``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hypothesis import event as note
from hypothesis import given
from hypothesis import strategies as st

from trio_agent import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    AssistantMessage,
    Context,
    LoopConfig,
    Message,
    MessageEnd,
    MessageStart,
    NextTurn,
    Text,
    Tool,
    ToolCall,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolResultMessage,
    TurnEnd,
    TurnStart,
    Usage,
    UserMessage,
)
from trio_agent._core import make_result
from trio_agent._core._events import NO_STATS
from trio_agent._core._pairing import transcript_violations
from trio_agent._core._turn import BatchEnd, TurnMachine, runs_sequentially
from trio_agent._run._stream import StreamAccumulator
from trio_agent.testing import ScriptedModel, events_for

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from trio_agent import ToolContext
    from trio_agent._core._events import EndReason
    from trio_agent._core._messages import StopReason


class Cut(Exception):
    """A checkpoint found the run's scope cancelled (trio would raise ``Cancelled``)."""


async def _never(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
    raise AssertionError("the machine never runs a tool")


def _never_called(*args: object) -> Any:
    raise AssertionError("the machine never calls a hook: the driver does")


TOOLS = (
    Tool(name="t", description="a tool", parameters={"type": "object"}, execute=_never),
    Tool(
        name="s",
        description="a sequential tool",
        parameters={"type": "object"},
        execute=_never,
        execution_mode="sequential",
    ),
)
# Mostly nothing, so that runs also reach their other ends; interrupts more often.
CONTROLS = st.sampled_from(["-"] * 100 + ["abort", "grace", "deadline"] + ["interrupt"] * 4)


class Listening:
    def __init__(self, listening: bool) -> None:
        self.listening = listening


class SimBatch:
    """The driver's batch, played: calls start, settle in a drawn order, may be cut."""

    def __init__(self, sim: Sim, calls: tuple[ToolCall, ...]) -> None:
        self.sim = sim
        self.calls = calls
        self.sequential = runs_sequentially(sim.m.config, sim.m.tools, calls)
        self.results: dict[int, ToolResultMessage] = {}
        self.terminate: dict[int, bool] = {}
        self.started: set[int] = set()
        self.deferring = False  # no call of a played batch waits for a decision

    def _start(self, i: int) -> None:
        self.started.add(i)
        call = self.calls[i]
        self.sim.emit([ToolExecutionStart(call_id=call.id, tool_name=call.name, args={})])

    def run(self) -> None:
        sim = self.sim
        n = len(self.calls)
        if self.sequential:
            order = list(range(n))
        else:
            order = sim.data.draw(st.permutations(range(n)), label="completion order")
            for i in range(n):
                self._start(i)
        for i in order:
            if self.sequential:
                self._start(i)
            sim.checkpoint(in_batch=True)
            call = self.calls[i]
            is_error = sim.data.draw(st.booleans(), label="fails")
            result = make_result(call, "done", is_error=is_error)
            self.results[i] = result
            self.terminate[i] = sim.data.draw(st.booleans(), label="terminate")
            settled = sim.m.settle(result)
            sim.check_state()
            sim.emit([_end(result, "error" if is_error else "ok"), *settled])

    def close(self, outcome: Any, text: str) -> BatchEnd:
        events: list[AgentEvent] = []
        results: list[ToolResultMessage] = []
        for i, call in enumerate(self.calls):
            if i not in self.started:
                events.append(ToolExecutionStart(call_id=call.id, tool_name=call.name, args={}))
            result = self.results.get(i)
            if result is None:
                result = make_result(call, text, is_error=True)
                settled = self.sim.m.settle(result)
                events.append(_end(result, outcome))
                events.extend(settled)
            results.append(result)
        terminate = bool(self.calls) and all(
            self.terminate.get(i, False) for i in range(len(self.calls))
        )
        self.sim.terminated = terminate
        return BatchEnd(events, results, NO_STATS, terminate)


def _end(result: ToolResultMessage, outcome: Any) -> ToolExecutionEnd:
    return ToolExecutionEnd(
        call_id=result.tool_call_id,
        tool_name=result.tool_name,
        result=result,
        is_error=result.is_error,
        outcome=outcome,
    )


class Sim:
    """The driver, played (see the module docstring)."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        draw = data.draw
        self.max_steps = draw(st.integers(1, 5), label="max_steps")
        steering = draw(st.booleans(), label="steering poll")
        follow_up = draw(st.booleans(), label="follow-up poll")
        config = LoopConfig(
            max_steps=self.max_steps,
            tool_execution=draw(st.sampled_from(["parallel", "sequential"]), label="mode"),
            continue_after_length=draw(st.booleans(), label="continue_after_length"),
            max_output_tokens=draw(st.none() | st.integers(1, 120), label="max_output_tokens"),
            prepare_next_turn=_never_called if draw(st.booleans(), label="prepare") else None,
            should_stop_after_turn=_never_called if draw(st.booleans(), label="stop?") else None,
        )
        self.listener = Listening(draw(st.booleans(), label="listening"))
        self.prompts = [UserMessage.text(f"p{i}") for i in range(draw(st.integers(0, 2)))]
        history: tuple[Message, ...] = () if self.prompts else (UserMessage.text("history"),)
        self.context = Context(messages=history, tools=TOOLS)
        self.m = TurnMachine(
            self.prompts,
            self.context,
            ScriptedModel([]),
            config,
            listener=self.listener,
            polls=(_never_called if steering else None, _never_called if follow_up else None),
        )
        n = 0

        def queue(kind: str) -> list[Message]:
            nonlocal n
            k = draw(st.integers(0, 3), label=f"{kind} queued")
            n += k
            return [UserMessage.text(f"{kind}{n - j}") for j in range(k)]

        self.steering = queue("steering") if steering else []
        self.follow_ups = queue("follow-up") if follow_up else []
        self.given: list[Message] = list(self.prompts)  # every message handed to the run
        self.events: list[AgentEvent] = []
        self.cancelled = False  # the run's scope is cancelled; the next checkpoint raises
        self.grace = False  # an abort with a grace: the deadline may fire in the batch
        self.deadline = False  # the run_timeout fired
        self.abort_asked = False
        self.abort_taken = False
        self.requests = 0
        self.lifecycles = ["running"]
        # What the last reply means, by the rules as the loop's documentation states
        # them (see `ends_the_run`): read when the next request goes out and at the end.
        self.last_reply: AssistantMessage | None = None
        self.reply_cut = False  # an interrupt cut the reply streaming now
        self.last_cut = False  # ... the last reply
        self.terminated = False  # every call of the last batch set terminate
        self.answered = 0  # len(new_messages) when the last turn ended

    # --- trio, played --------------------------------------------------------------------

    def control(self, in_batch: bool = False) -> None:
        """What another task (or the clock) may do while the run waits at a checkpoint."""
        m = self.m
        if self.grace and in_batch and self.data.draw(st.booleans(), label="grace over"):
            self.cancelled = True
        what = self.data.draw(CONTROLS, label="control")
        if what in ("abort", "grace"):
            act = m.abort("told to", grace=what == "grace")
            self.abort_asked = True  # after a deadline fired too: the run ends "aborted"
            if act == "cancel":
                self.cancelled = True
            else:
                assert act == "grace"
                assert m.phase == "executing"
                self.grace = True
        elif what == "interrupt":
            if m.steering_poll is not None:
                self.steering.insert(0, UserMessage.text("interrupting"))
            phase, before = m.phase, m.interrupt
            cut = m.request_interrupt()
            if cut is not None and before != "cutting":
                # It cuts what is in flight, the reply or the batch, and nothing else.
                assert cut == (phase in ("streaming", "executing"))
            assert (cut is None) == (m.lifecycle != "running")
            if cut:
                assert m.phase in ("streaming", "executing")
                self.cancelled = True
                self.reply_cut = m.phase == "streaming"
        elif what == "deadline" and not self.deadline:
            self.deadline = self.cancelled = True
        self.check_state()

    def checkpoint(self, in_batch: bool = False) -> None:
        self.control(in_batch)
        if self.cancelled and self.abort_asked:
            self.abort_taken = True  # the abort is taken here: the run ends "aborted"
        self.check_cancel()

    def check_cancel(self) -> None:
        if self.cancelled:
            raise Cut

    def check_abort(self) -> None:
        if self.m.lifecycle == "aborting":
            self.cancelled = True
            self.abort_taken = self.abort_asked
        self.check_cancel()

    def maybe_checkpoint(self, label: str) -> None:
        """A hook, a poll or a delivery: it may wait (a checkpoint) or not; either way it
        may abort or interrupt the run itself, from the run's own task (then nothing is
        raised before the run's next checkpoint)."""
        if self.data.draw(st.booleans(), label=label):
            self.checkpoint()
        else:
            self.control()

    def emit(self, events: Sequence[AgentEvent]) -> None:
        self.check_state()
        if not self.listener.listening:
            return
        # Delivered: a cancel during a delivery leaves the rest owed, delivered first
        # later, so the order recorded here is the order the sink sees.
        self.events.extend(events)
        self.maybe_checkpoint("delivery waits")

    # --- the driver, played ----------------------------------------------------------------

    def run(self) -> None:
        m = self.m
        while True:
            try:
                self.main()
                break
            except Cut:
                if m.lifecycle != "running":
                    break
                if self.deadline:
                    m.time_out(1.0)
                    break
                # A cancel caught while running is an interrupt's cut of what was in
                # flight: the run resumes, and the machine ends that turn first.
                assert m.interrupt == "cutting"
                assert m.phase in ("streaming", "executing")
                note(f"a cut while {m.phase}")
                self.cancelled = False
        if not m.ended:
            self.closed(m.close("timeout" if m.timed_out else "aborted"))

    def main(self) -> None:
        m = self.m
        while True:
            ask = m.next()
            self.check_state()
            if ask == "end":
                self.closed(m.close(m.ending))
                return
            if ask == "start":
                self.emit([AgentStart()])
            elif ask == "check_abort":
                self.check_abort()
            elif ask == "poll_steering":
                self.poll(self.steering)
            elif ask == "poll_follow_up":
                self.poll(self.follow_ups)
            elif ask == "prepare_next_turn":
                self.maybe_checkpoint("prepare_next_turn waits")
                m.apply_next_turn(NextTurn())
            elif ask == "should_stop":
                self.maybe_checkpoint("should_stop_after_turn waits")
                m.stop_said(self.data.draw(st.booleans(), label="stop"))
            elif ask == "turn":
                self.turn()
            else:
                assert ask == "end_cut_turn", ask
                self.finish_turn()

    def poll(self, queue: list[Message]) -> None:
        self.maybe_checkpoint("poll waits")
        k = len(queue) if self.data.draw(st.booleans(), label="all") else min(1, len(queue))
        taken = queue[:k]
        del queue[:k]
        self.given.extend(taken)
        self.m.polled(taken)

    def turn(self) -> None:
        m = self.m
        self.emit(m.open_turn())
        while True:
            self.maybe_checkpoint("transform_context waits")
            if not m.takes_steering_first():
                break
            if m.steering_polled():
                self.poll(self.steering)
            self.emit(m.take_pending())
        self.check_abort()
        # A request goes out: nothing unanswered, no abort asked, within max_steps.
        assert not self.abort_asked
        assert m.lifecycle == "running"
        assert _violations(m.transcript) == []
        acc = StreamAccumulator()
        self.check_goes_on()
        m.start_reply(m.llm_view, acc)
        self.requests += 1
        assert m.steps == self.requests <= self.max_steps
        self.stream(acc)
        self.finish_turn()

    def stream(self, acc: StreamAccumulator) -> None:
        events = events_for(self.reply())
        if self.data.draw(st.sampled_from([False] * 9 + [True]), label="stream ends early"):
            events = events[: self.data.draw(st.integers(1, len(events)), label="events sent")]
        for i, event in enumerate(events):
            # As an in-memory stream: the first event a full checkpoint (another task
            # may act), the others only a check for a cancel.
            if i == 0 or self.data.draw(st.sampled_from([False] * 3 + [True]), label="waits"):
                self.checkpoint()
            else:
                self.check_cancel()
            acc.feed(event)
            if self.listener.listening and not acc.start_emitted and acc.started:
                acc.start_emitted = True
                self.emit([MessageStart(message=acc.empty())])
            if acc.final is not None:
                break
        self.end_reply()

    def reply(self) -> AssistantMessage:
        """Mostly what a well-behaved model sends (calls with ``tool_use``, none with
        ``stop``); now and then anything (duplicate ids, calls with any stop reason)."""
        draw = self.data.draw
        stop: StopReason = draw(
            st.sampled_from(["tool_use"] * 4 + ["stop"] * 2 + ["length", "error", "aborted"]),
            label="stop reason",
        )
        # (sampled_from shrinks towards the first element: the usual case)
        well_behaved = draw(st.sampled_from([True] * 4 + [False]), label="well behaved")
        call = st.builds(
            ToolCall, id=st.sampled_from(["a", "b", "c"]), name=st.sampled_from(["t", "s"])
        )
        if not well_behaved:
            calls = draw(st.lists(call, max_size=3), label="calls")
        elif stop == "stop":
            calls = []
        else:
            calls = draw(
                st.lists(call, min_size=stop == "tool_use", max_size=3, unique_by=lambda c: c.id),
                label="calls",
            )
        usage = Usage(output_tokens=draw(st.integers(0, 50), label="output tokens"))
        return AssistantMessage(content=(Text(text="x"), *calls), stop_reason=stop, usage=usage)

    def end_reply(self) -> None:
        self.check_cancel()
        m = self.m
        events = m.end_reply()
        self.last_reply, self.last_cut, self.reply_cut = m.turn_message, self.reply_cut, False
        self.terminated = False
        self.emit(events)

    def finish_turn(self) -> None:
        m = self.m
        if m.phase == "streaming":
            self.end_reply()
        if m.phase == "replied":
            decision = m.decision
            assert decision is not None
            if decision.action == "execute":
                # Only the calls of a reply that does not end the run run.
                assert self.ends_the_run() is None
                assert not self.last_cut
                batch = SimBatch(self, decision.calls)
                pending = m.interrupt == "pending"
                # A batch that starts while an interrupt waits is cut at once.
                if m.start_batch(batch) != pending:
                    raise AssertionError("a pending interrupt must cut the batch at once")
                if pending:
                    self.cancelled = True
                batch.run()
                self.check_cancel()
            else:
                self.emit(m.skip_calls())
        if m.phase == "executing":
            self.emit(m.end_batch())
            if m.lifecycle == "aborting":
                self.check_abort()
        events = m.end_turn()
        self.answered = len(m.new_messages)
        self.emit(events)

    # --- the invariants --------------------------------------------------------------------

    def ends_the_run(self) -> EndReason | None:
        """The end reason the last reply's stop reason and calls give the run, if they end
        it: duplicate call ids, or an error, a truncated (unless continued) or an aborted
        reply, or calls with a stop reason other than ``tool_use`` or ``tool_use`` with
        none, end the run; an interrupt's cut reply does not."""
        reply = self.last_reply
        if reply is None or self.last_cut:
            return None
        ids = [c.id for c in reply.tool_calls]
        stop = reply.stop_reason
        if len(set(ids)) != len(ids):
            return "error"
        if stop in ("error", "aborted"):
            return stop
        if stop == "length":
            return None if ids and self.m.config.continue_after_length else "length"
        if (stop == "tool_use") != bool(ids):
            return "error"
        return None

    def check_goes_on(self) -> None:
        """A request after the first follows a reply that does not end the run, and
        either has results for the model to answer or messages came since."""
        reply = self.last_reply
        if reply is None:
            return
        assert self.ends_the_run() is None
        has_results = (
            bool(reply.tool_calls)
            and not self.last_cut
            and not self.terminated
            and reply.stop_reason in ("tool_use", "length")
        )
        m = self.m
        came = [x for x in m.new_messages[self.answered :] if type(x) is UserMessage]
        assert has_results or came

    def check_state(self) -> None:
        m = self.m
        assert (m.acc is not None) == (m.phase == "streaming")
        assert (m.batch is not None) == (m.phase == "executing")
        assert m.interrupt != "cutting" or m.phase in ("streaming", "executing")
        assert m.steps <= self.max_steps
        order = ("running", "aborting", "ended", "aborted")
        if m.lifecycle != self.lifecycles[-1]:
            assert order.index(m.lifecycle) > order.index(self.lifecycles[-1])
            self.lifecycles.append(m.lifecycle)

    def closed(self, events: list[AgentEvent] | None) -> None:
        m = self.m
        assert events is not None
        assert [type(e) for e in events].count(AgentEnd) == 1
        assert type(events[-1]) is AgentEnd
        if self.listener.listening:
            self.events.extend(events)
        assert m.close("error") is None  # exactly one end
        assert m.next() == "end"

    def check_end(self) -> None:
        m = self.m
        result = m.result
        assert result is not None
        assert m.ended
        assert result.steps == self.requests <= self.max_steps
        note(f"ends {result.reason}")
        if not (self.abort_taken or m.timed_out) and self.ends_the_run() is not None:
            assert result.reason == self.ends_the_run()
        assert _violations(result.transcript) == []
        # An abort is always known (the closing is bounded by it); it decides the end
        # reason once a checkpoint took it. (An abort from the run's own task — a hook,
        # the sink — with no checkpoint before the loop reaches an end keeps that end's
        # reason.)
        assert (m.lifecycle == "aborted") == (self.abort_asked or m.timed_out)
        if self.abort_taken:
            assert result.reason == "aborted"
        elif m.timed_out:
            assert result.reason == "timeout"
        # Every message handed to the run went in once, or is reported undelivered.
        went_in = [m for m in result.messages if any(m is g for g in self.given)]
        assert len({id(m) for m in went_in}) == len(went_in)
        assert [id(g) for g in self.given] == [id(m) for m in [*went_in, *result.undelivered]]
        if not self.listener.listening:
            assert self.events == []
            return
        events = self.events
        assert [type(e) for e in events].count(AgentEnd) == 1
        assert type(events[-1]) is AgentEnd
        assert type(events[0]) is AgentStart
        assert [e.message for e in events if type(e) is MessageEnd] == list(result.messages)
        starts = [e for e in events if type(e) is TurnStart]
        ends = [e for e in events if type(e) is TurnEnd]
        assert len(starts) == len(ends) == len(result.turns)
        # Each call of each turn: one start, then one end; each result its call's.
        seen_start: dict[str, int] = {}
        seen_end: dict[str, int] = {}
        for i, event in enumerate(events):
            if type(event) is ToolExecutionStart:
                assert event.call_id not in seen_start
                seen_start[event.call_id] = i
            elif type(event) is ToolExecutionEnd:
                assert event.call_id not in seen_end
                assert seen_start[event.call_id] < i
                seen_end[event.call_id] = i
            elif type(event) is TurnEnd:
                if event.message is not None:
                    ids = list(dict.fromkeys(c.id for c in event.message.tool_calls))
                    assert [r.tool_call_id for r in event.tool_results] == ids
                # A turn's calls are done with once it ends (ids may be reused later).
                assert seen_start.keys() == seen_end.keys()
                seen_start.clear()
                seen_end.clear()


def _violations(messages: Sequence[Message]) -> list[str]:
    """The pairing breaches, except duplicate ids within one reply (those are refused
    by the reply table, each distinct id answered once)."""
    return [v for v in transcript_violations(messages) if "duplicate call id" not in v]


@given(data=st.data())
def test_the_invariants_hold_at_every_step(data: st.DataObject) -> None:
    sim = Sim(data)
    sim.run()
    sim.check_end()
