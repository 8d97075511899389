"""Timing marker lines: ``JsonlTranscript(..., timings=True)`` records when each request
and each call happened, and the markers load, round-trip, and leave the messages alone.

The runs use trio's autojump clock: the tools sleep whole virtual seconds, so the
recorded times are exact.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import pytest
import trio

from tests.kit.loop import call, ctx, make_tool, prompt, reply, sleeper, tool_use
from trio_agent import (
    JsonlTranscript,
    LoopConfig,
    check_transcript,
    load_transcript,
    open_agent_loop,
    run_agent_loop,
    write_transcript,
)
from trio_agent.cli._demo_script import PacedModel
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from pathlib import Path

    from trio_agent import Model, Tool


async def _run(
    path: Path,
    model: Model,
    tools: tuple[Tool, ...],
    *,
    timings: bool = True,
    config: LoopConfig | None = None,
) -> None:
    # No fail_after: the autojump clock would jump to its deadline while a worker
    # thread writes (pytest-timeout guards against a hang).
    async with JsonlTranscript(path, fsync=False, timings=timings) as transcript:
        await run_agent_loop(
            prompt(), ctx(*tools), model, config or LoopConfig(), on_event=transcript
        )


def _two_sleepers_then_one() -> ScriptedModel:
    return ScriptedModel(
        [
            tool_use(call("a", "slow", s=2), call("b", "fast", s=1)),
            tool_use(call("c", "fast", s=1)),
            reply("done"),
        ]
    )


SLEEPERS = (sleeper("slow", 2), sleeper("fast", 1))


async def test_a_run_records_its_requests_and_calls(tmp_path: Path, autojump_clock: Any) -> None:
    path = tmp_path / "t.jsonl"
    before = time.time()
    await _run(path, _two_sleepers_then_one(), SLEEPERS)
    loaded = load_transcript(path)
    check_transcript(loaded.messages)
    timings = loaded.markers_of("timings")
    requests = [m for m in timings if "request" in m.data]
    batches = [m for m in timings if "calls" in m.data]
    # One request line per reply, right after it.
    replies = [i for i, m in enumerate(loaded.messages) if m.role == "assistant"]
    assert [m.at - 1 for m in requests] == replies
    assert [m.data["turn"] for m in requests] == [0, 1, 2]
    for marker in requests:
        r = marker.data["request"]
        assert 0 <= r["start"] <= r["end"]
    # One batch line per turn that ran calls, after its results.
    assert [m.data["turn"] for m in batches] == [0, 1]
    first, second = batches
    assert first.at == replies[1]  # after the two results, before the next reply
    a, b = first.data["calls"]
    assert (a["id"], a["name"], a["outcome"], a["is_error"]) == ("a", "slow", "ok", False)
    assert (b["id"], b["name"]) == ("b", "fast")
    assert a["start"] == b["start"]
    assert a["end"] - a["start"] == pytest.approx(2)
    assert b["end"] - b["start"] == pytest.approx(1)
    assert first.data["stats"]["peak_concurrency"] == 2
    assert first.data["stats"]["critical_path"] == pytest.approx(2)
    assert first.data["stats"]["total_call_time"] == pytest.approx(3)
    (c,) = second.data["calls"]
    assert c["start"] >= a["end"]
    assert second.data["stats"]["peak_concurrency"] == 1
    # One run, one anchor: the wall clock of its start.
    assert {m.data["run"] for m in timings} == {requests[0].data["run"]}
    assert before <= requests[0].data["run"] <= time.time()


async def test_without_timings_no_marker_is_written(tmp_path: Path, autojump_clock: Any) -> None:
    with_timings, without = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    await _run(with_timings, _two_sleepers_then_one(), SLEEPERS)
    await _run(without, _two_sleepers_then_one(), SLEEPERS, timings=False)
    assert load_transcript(without).markers == ()
    assert [json.loads(x).get("marker") for x in without.read_text().splitlines()[1:]] == [
        None
    ] * len(load_transcript(with_timings).messages)
    assert [m.role for m in load_transcript(with_timings).messages] == [
        m.role for m in load_transcript(without).messages
    ]


async def test_the_first_token_is_timed(tmp_path: Path, autojump_clock: Any) -> None:
    # Paced: the model takes 1.5 s to start, then 0.1 s per delta.
    path = tmp_path / "t.jsonl"
    model = PacedModel(ScriptedModel([reply("abcdef")], chunk_size=2), 0.1)
    await _run(path, model, ())
    (marker,) = load_transcript(path).markers_of("timings")
    r = marker.data["request"]
    assert r["first_token"] - r["start"] == pytest.approx(1.6)
    assert r["end"] - r["first_token"] == pytest.approx(0.2)


async def test_a_stopped_call_has_its_outcome_and_event_times(
    tmp_path: Path, autojump_clock: Any
) -> None:
    # One call times out after 1 s; one is refused (no such tool) and never runs.
    path = tmp_path / "t.jsonl"
    model = ScriptedModel([tool_use(call("t", "slow", s=5), call("x", "missing")), reply()])
    slow = make_tool("slow", sleeper("slow", 5).execute, timeout=1)
    await _run(path, model, (slow,))
    (batch,) = [m for m in load_transcript(path).markers_of("timings") if "calls" in m.data]
    timed_out, refused = batch.data["calls"]
    assert (timed_out["outcome"], timed_out["is_error"]) == ("timed_out", True)
    assert timed_out["end"] - timed_out["start"] == pytest.approx(1)
    assert (refused["outcome"], refused["is_error"]) == ("not_found", True)
    assert refused["end"] == pytest.approx(refused["start"])


async def test_an_aborted_batch_still_gets_its_line(tmp_path: Path) -> None:
    # The real clock: under the autojump clock the closing events' cleanup_timeout
    # would pass while a worker thread writes, and the last events would be dropped.
    path = tmp_path / "t.jsonl"
    model = ScriptedModel([tool_use(call("a", "slow", s=10)), reply()])
    with trio.fail_after(30):
        async with (
            JsonlTranscript(path, fsync="turn", timings=True) as transcript,
            open_agent_loop(prompt(), ctx(sleeper("slow", 10)), model) as run,
        ):
            async for event in run.events:
                await transcript.write_event(event)
                if event.type == "tool_execution_start":
                    await trio.sleep(0.05)
                    run.abort("stop")
    loaded = load_transcript(path)
    check_transcript(loaded.messages)
    (batch,) = [m for m in loaded.markers_of("timings") if "calls" in m.data]
    (a,) = batch.data["calls"]
    assert a["outcome"] == "aborted"
    assert a["end"] >= a["start"]


async def test_timings_round_trip_through_write_transcript(
    tmp_path: Path, autojump_clock: Any
) -> None:
    path = tmp_path / "t.jsonl"
    await _run(path, _two_sleepers_then_one(), SLEEPERS)
    loaded = load_transcript(path)
    copy = tmp_path / "copy.jsonl"
    write_transcript(copy, loaded.messages, markers=loaded.markers, fsync=False)
    assert copy.read_bytes() == path.read_bytes()
    again = load_transcript(copy)
    assert again.messages == loaded.messages
    assert again.markers == loaded.markers


async def test_a_call_waiting_for_a_slot_is_timed_from_when_it_ran(
    tmp_path: Path, autojump_clock: Any
) -> None:
    # One slot: both calls enter the batch at once, the second runs once the first is
    # done; its bar must start there (the batch's own timing), not when it entered.
    path = tmp_path / "t.jsonl"
    model = ScriptedModel([tool_use(call("a", "fast", s=1), call("b", "fast", s=1)), reply()])
    await _run(path, model, (sleeper("fast", 1),), config=LoopConfig(max_concurrency=1))
    (batch,) = [m for m in load_transcript(path).markers_of("timings") if "calls" in m.data]
    first, second = sorted(batch.data["calls"], key=lambda c: c["start"])
    assert second["start"] == pytest.approx(first["end"])
    assert second["waited"] == pytest.approx(1)
    assert batch.data["stats"]["peak_concurrency"] == 1
    assert batch.data["stats"]["waited_on_limit"] == pytest.approx(1)
