"""The event delivery's exactly-once rule, with any number of targets of either kind.

Theory of operation
-------------------
One :class:`EventDelivery` gets a random set of targets — ``on_event`` sinks (plain,
async with a delay, or raising at their k-th call) and memory channels (buffered or not,
read slowly, dropping updates or not) — then a random sequence of emits, each under a
random deadline, on trio's autojump clock. A last ``flush`` with no deadline delivers
what the deadlines left owed. Every event is a distinct object; each target records
what it got: a sink when it is called (as a sink writing a line before awaiting does), a
channel when its reader takes the event.

What must hold for every target, whatever the deadlines cut:

- it got each event at most once, in the order emitted;
- it got every event that is not an update (a sink that raised: every one up to the call
  that raised, and nothing after it);
- an update whose emit no deadline cut reached every target that does not drop updates
  (updates are never owed: only a cut emit may lose them).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import attrs
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_agent import AgentEvent, ToolExecutionUpdate, TurnStart
from trio_agent._run._delivery import Channel, EventDelivery, Sink, SinkFailure

if TYPE_CHECKING:
    from trio.testing import MockClock


@attrs.frozen
class SinkSpec:
    delay: float | None  # None: a synchronous sink
    fail_at: int | None  # raises at this call (0-based), recording it first


@attrs.frozen
class ChannelSpec:
    buffer: int
    delay: float  # before each receive
    drop_updates: bool


@attrs.frozen
class Emit:
    updates: tuple[bool, ...]  # per event: an update (droppable) or not
    deadline: float | None
    gap: float  # sleep before the emit


delays = st.sampled_from([0.0, 0.5, 1.0, 2.5])
targets = st.lists(
    st.one_of(
        st.builds(
            SinkSpec,
            st.one_of(st.none(), delays),
            st.one_of(st.none(), st.integers(0, 12)),
        ),
        st.builds(ChannelSpec, st.integers(0, 2), delays, st.booleans()),
    ),
    min_size=1,
    max_size=4,
)
emits = st.lists(
    st.builds(
        Emit,
        st.lists(st.booleans(), min_size=0, max_size=4).map(tuple),
        st.one_of(st.none(), st.sampled_from([0.0, 0.3, 1.0, 2.0, 4.0])),
        st.sampled_from([0.0, 0.0, 0.7]),
    ),
    min_size=1,
    max_size=8,
)


@attrs.define
class Got:
    """What one target received, and whether it raised."""

    events: list[AgentEvent] = attrs.Factory(list)
    failed: bool = False


def make_sink(spec: SinkSpec, got: Got) -> Any:
    calls = 0

    def record(event: AgentEvent) -> None:
        nonlocal calls
        got.events.append(event)
        calls += 1
        if spec.fail_at is not None and calls - 1 == spec.fail_at:
            got.failed = True
            raise ValueError("the sink fails")

    if spec.delay is None:
        return record

    delay = spec.delay

    async def slow(event: AgentEvent) -> None:
        record(event)
        await trio.sleep(delay)

    return slow


async def read(receive: trio.MemoryReceiveChannel[AgentEvent], delay: float, got: Got) -> None:
    while True:
        await trio.sleep(delay)
        try:
            event = await receive.receive()
        except trio.EndOfChannel:
            return
        got.events.append(event)


async def flush(delivery: EventDelivery, targets: int) -> None:
    """Deliver what is owed, past any sink that raises (it is gone; the rest stays owed)."""
    for _ in range(targets + 1):  # each sink raises once at the most
        try:
            await delivery.flush()
        except SinkFailure:
            continue
        return
    raise AssertionError("a sink raised twice")


# pytest-trio's clock fixture is shared by the examples; every example measures time from
# its own start.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs=targets, plan=emits)
async def test_every_target_gets_each_event_exactly_once_in_order(
    autojump_clock: MockClock, specs: list[SinkSpec | ChannelSpec], plan: list[Emit]
) -> None:
    delivery = EventDelivery()
    gots = [Got() for _ in specs]
    emitted: list[AgentEvent] = []
    kept_updates: list[AgentEvent] = []  # updates of emits no deadline cut
    with trio.fail_after(10_000):
        async with trio.open_nursery() as nursery:
            for spec, got in zip(specs, gots, strict=True):
                if isinstance(spec, SinkSpec):
                    delivery.add(Sink(make_sink(spec, got)))
                else:
                    send, receive = trio.open_memory_channel[AgentEvent](spec.buffer)
                    delivery.add(Channel(send, spec.drop_updates))
                    nursery.start_soon(read, receive, spec.delay, got)
            for emit in plan:
                await trio.sleep(emit.gap)
                events = [
                    ToolExecutionUpdate(call_id="c", tool_name="t", partial=len(emitted) + k)
                    if update
                    else TurnStart(index=len(emitted) + k)
                    for k, update in enumerate(emit.updates)
                ]
                emitted.extend(events)
                deadline = math.inf if emit.deadline is None else emit.deadline
                try:
                    with trio.move_on_after(deadline) as scope:
                        await delivery.emit(*events)
                    cut = scope.cancelled_caught
                except SinkFailure:
                    cut = True
                if not cut:
                    kept_updates.extend(e for e in events if type(e) is ToolExecutionUpdate)
            await flush(delivery, len(specs))
            delivery.end()
    order = {id(e): k for k, e in enumerate(emitted)}
    for spec, got in zip(specs, gots, strict=True):
        positions = [order[id(e)] for e in got.events]
        assert positions == sorted(set(positions)), "out of order or twice"
        wanted = [e for e in emitted if type(e) is not ToolExecutionUpdate]
        if got.failed:
            last = got.events[-1]
            wanted = [e for e in wanted if order[id(e)] <= order[id(last)]]
        ids = {id(e) for e in got.events}
        assert all(id(e) in ids for e in wanted), "an event that is not an update was lost"
        if got.failed:
            assert all(order[id(e)] <= order[id(got.events[-1])] for e in got.events)
        elif not (isinstance(spec, ChannelSpec) and spec.drop_updates):
            assert all(id(e) in ids for e in kept_updates), "an update of an uncut emit lost"
