"""The loop's invariants (docs/guarantees.md, "Every run keeps eight invariants"), on
generated scripts driving real runs.

Each example is one real run of ``run_agent_loop``/``open_agent_loop`` against a
``ScriptedModel`` and the scripted tools, under pytest-trio's autojump clock (latencies,
timeouts and deadlines are virtual seconds, so a run takes milliseconds).
``ScriptRun.check()`` asserts all eight invariants:

1. pairing before every request (each ``ScriptedModel.requests[i].messages``) and at the end;
2. exactly one ``AgentEnd``, last; the ``MessageEnd`` events are ``result.messages``;
3. the caller's context is unchanged;
4. ``steps`` = requests made ≤ ``max_steps``; no request after an abort or the deadline;
5. per call: start, then updates, then end; nothing after the end;
6. every queued steering/follow-up message delivered exactly once, FIFO, or still queued;
7. no task alive after the run; every tool's ``finally`` block ran; no stream left open;
8. the transcript round-trips through JSON text (``dumps``/``loads``).

A failing example prints as a scenario (``Script.describe()``), and the assertion lists
each broken invariant by number.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import attrs
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_agent import Message, check_transcript, dumps, loads
from trio_agent.testing import (
    AbortScript,
    Arrival,
    InterruptScript,
    Script,
    ScriptRun,
    messages,
    scripts,
    transcripts,
)

if TYPE_CHECKING:
    from trio.testing import MockClock

# pytest-trio's clock fixture is function-scoped and shared by the examples of a test;
# that is fine here: every example measures time from its own start.
with_clock = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])

# Far beyond any script's virtual duration: with the autojump clock a hung run fails
# this guard at once instead of hanging the suite.
GUARD = 10_000


async def run_checked(script: Script) -> ScriptRun:
    with trio.fail_after(GUARD):
        run = await script.run()
    run.check()
    return run


@with_clock
@given(script=scripts())
async def test_every_invariant_holds(autojump_clock: MockClock, script: Script) -> None:
    await run_checked(script)


@with_clock
@given(
    script=scripts(aborts=False, interrupt=False, deadlines=False, drivers=("channel",)),
    data=st.data(),
)
async def test_abort_or_interrupt_at_any_event(
    autojump_clock: MockClock, script: Script, data: st.DataObject
) -> None:
    # First run the script to the end to learn its events, then abort (or interrupt) a
    # second run of it when the consumer receives one of them: every delivery point
    # gets its turn.
    full = await run_checked(script)
    k = data.draw(st.integers(0, len(full.events) - 1), label="after event")
    if data.draw(st.booleans(), label="interrupt instead"):
        await run_checked(attrs.evolve(script, interrupts=(InterruptScript(after_event=k),)))
        return
    grace = data.draw(st.none() | st.sampled_from([0.1, 0.5]), label="grace")
    aborted = await run_checked(attrs.evolve(script, abort=AbortScript(after_event=k, grace=grace)))
    # The second run's schedule may differ (tools finishing at the same instant), but
    # the abort fired if event k came, and then no request followed it.
    assert aborted.requests_at_abort is not None or len(aborted.events) <= k
    if aborted.requests_at_abort is not None:
        assert len(aborted.requests) == aborted.requests_at_abort


@with_clock
@given(
    script=scripts(aborts=False, interrupt=False, deadlines=False, drivers=("channel",)),
    data=st.data(),
)
async def test_abort_interrupt_or_deadline_at_any_instant(
    autojump_clock: MockClock, script: Script, data: st.DataObject
) -> None:
    # The instants at which something happened in a full run, and the gaps between
    # them: an abort, an interrupt or a deadline there lands on a tool's sleep, a
    # stream's stall, a batch in flight, or between turns.
    full = await run_checked(script)
    instants = sorted({0.0, *full.event_times, *full.request_times})
    instants += [(a + b) / 2 for a, b in itertools.pairwise(instants)]
    at = data.draw(st.sampled_from(sorted(instants)), label="at")
    how = data.draw(
        st.sampled_from(["deadline", "abort", "abort with grace", "interrupt"]), label="how"
    )
    if how == "deadline":
        changed = attrs.evolve(script, deadline=at)
    elif how == "interrupt":
        changed = attrs.evolve(script, interrupts=(InterruptScript(at_time=at),))
    else:
        grace = 0.25 if how == "abort with grace" else None
        changed = attrs.evolve(script, abort=AbortScript(at_time=at, grace=grace))
    run = await run_checked(changed)
    if how == "deadline" and at > 0 and run.outer_cancelled:
        assert all(t < at for t in run.request_times)


@with_clock
@given(
    script=scripts(
        max_replies=6,
        stream_faults=False,
        duplicate_ids=False,
        aborts=False,
        deadlines=False,
    ),
    data=st.data(),
)
async def test_queued_messages_arrive_in_order(
    autojump_clock: MockClock, script: Script, data: st.DataObject
) -> None:
    # Invariant 6 with many arrivals: each message polled is delivered once, in FIFO
    # order, or left queued; nothing is lost when the run ends between poll and request.
    times = st.sampled_from([0.0, 0.05, 0.1, 0.25, 0.5, 1.0])
    kinds = data.draw(st.lists(st.sampled_from(["steer", "follow_up"]), max_size=6))
    arrivals = tuple(
        Arrival(at=data.draw(times), queue=kind, text=f"{kind} {i}")  # type: ignore[arg-type]
        for i, kind in enumerate(kinds)
    )
    run = await run_checked(attrs.evolve(script, arrivals=arrivals))
    arrived = len(run.arrived["steer"]) + len(run.arrived["follow_up"])
    queued = len(run.still_queued["steer"]) + len(run.still_queued["follow_up"])
    assert len(run.polled) + queued == arrived


@given(message=messages())
def test_any_message_round_trips_through_json(message: Message) -> None:
    text = dumps([message])
    assert loads(text) == (message,)
    # Written as UTF-8 and read back: lone surrogates in the message included.
    assert loads(text.encode("utf-8")) == (message,)


@given(transcript=transcripts())
def test_paired_transcripts_round_trip_and_check(transcript: tuple[Message, ...]) -> None:
    check_transcript(transcript)
    assert loads(dumps(transcript)) == transcript


@given(message=st.from_type(Message))  # type: ignore[arg-type]
def test_registered_type_strategies_are_json_safe(message: Message) -> None:
    # The Hypothesis entry point registered our message types: from_type draws values
    # that survive JSON, not arbitrary attrs instances.
    assert loads(dumps([message])) == (message,)
