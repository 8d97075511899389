"""Cassettes: record a run through any model, replay it strictly or in sequence, on the
clock or not, with faults; the file format (version 1 fixture, refused future versions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
from hypothesis import given

from loopkit import Recorder, assert_consistent, call, make_tool, prompt, reply, tool_use
from trio_agent import (
    AgentEnd,
    AssistantMessage,
    Context,
    Done,
    Error,
    LoopConfig,
    MessageUpdate,
    ModelOptions,
    ModelRequest,
    Start,
    Text,
    TextDelta,
    TextStart,
    UserMessage,
    open_agent_loop,
    run_agent_loop,
)
from trio_agent.replay import (
    Cassette,
    CassetteFormatError,
    CassetteMismatch,
    CassetteRecord,
    Fault,
    InjectedFault,
    RecordedError,
    RecordedEvent,
    RecordingModel,
    ReplayModel,
    StreamEnd,
    load_cassette,
    message_differences,
    replay_session,
    request_differences,
    request_digest,
)
from trio_agent.testing import ScriptedModel
from trio_agent.testing import faults as strategy_faults

if TYPE_CHECKING:
    from trio.testing import MockClock

FIXTURE = Path(__file__).parent / "data" / "cassette_v1.jsonl"


def _session_model() -> ScriptedModel:
    return ScriptedModel(
        [
            tool_use(call("c1", x=1), call("c2", x=2), text="two calls"),
            tool_use(call("c3", x=3)),
            reply("all done"),
        ],
        chunk_size=3,
    )


async def _record(path: Path, prompts: list[UserMessage], **config: Any) -> Any:
    recorder = RecordingModel(_session_model(), path)
    events = Recorder()
    result = await run_agent_loop(
        prompts,
        Context(system_prompt="sys", tools=(make_tool(),)),
        recorder,
        LoopConfig(**config),
        on_event=events,
    )
    return result, events, recorder


async def test_a_replay_gives_the_recorded_transcript(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    p = prompt("start")
    recorded, recorded_events, recorder = await _record(path, p)
    assert recorded.reason == "stop"
    assert len(recorder.records) == 3
    model = ReplayModel(path, timing="none")
    events = Recorder()
    replayed = await run_agent_loop(
        p, Context(system_prompt="sys", tools=(make_tool(),)), model, on_event=events
    )
    assert model.mismatches == []
    assert message_differences(recorded.transcript, replayed.transcript) == []
    assert events.types() == recorded_events.types()
    assert_consistent(replayed, events.events, model.requests)
    assert model.open_streams == 0


async def test_a_changed_prompt_fails_strict_mode_with_a_diff(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    await _record(path, prompt("start"))
    model = ReplayModel(path)
    result = await run_agent_loop(
        prompt("begin"), Context(system_prompt="sys", tools=(make_tool(),)), model
    )
    expected = (
        "request 1 differs from the cassette: messages[0].content[0].text: "
        "recorded 'start', got 'begin'"
    )
    (mismatch,) = model.mismatches
    assert str(mismatch) == expected
    assert mismatch.request_index == 0
    assert result.reason == "error"
    assert result.messages[-1].error_message == (
        f"the model stream failed: CassetteMismatch: {expected}"
    )


async def test_a_changed_tool_result_is_named_by_message_and_field(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    p = prompt("start")
    await _record(path, p)

    async def other(call: Any, args: Any, ctx: Any) -> str:
        return "changed" if call.id == "c2" else "probe ok"

    model = ReplayModel(path)
    result = await run_agent_loop(
        p, Context(system_prompt="sys", tools=(make_tool("probe", other),)), model
    )
    (mismatch,) = model.mismatches
    # user, assistant, result c1, result c2: the second result's text changed.
    assert str(mismatch) == (
        "request 2 differs from the cassette: messages[3].content[0].text: "
        "recorded 'probe ok', got 'changed'"
    )
    assert result.steps == 2
    assert result.reason == "error"


async def test_sequence_mode_replays_whatever_is_asked(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    recorded, _, _ = await _record(path, prompt("start"))
    model = ReplayModel(path, match="sequence", timing="none")
    result = await run_agent_loop(
        prompt("something else"), Context(system_prompt="sys", tools=(make_tool(),)), model
    )
    assert model.mismatches == []
    assert result.reason == "stop"
    assert result.messages[-1] == recorded.messages[-1]


def test_differences_cover_every_field_and_ignore_timestamps() -> None:
    a = ModelRequest(
        system_prompt="s",
        messages=(UserMessage.text("x", timestamp=1.0),),
        options=ModelOptions(temperature=0.5),
    )
    same = ModelRequest(
        system_prompt="s",
        messages=(UserMessage.text("x", timestamp=99.0),),
        options=ModelOptions(temperature=0.5),
    )
    assert request_digest(a) == request_digest(same)
    assert request_differences(a, same) == []
    b = ModelRequest(
        system_prompt="t",
        messages=(UserMessage.text("x"), UserMessage.text("y")),
        options=ModelOptions(temperature=0.7),
    )
    assert request_digest(a) != request_digest(b)
    assert request_differences(a, b) == [
        "messages[1]: recorded nothing, got "
        '{"content":[{"signature":null,"text":"y","type":"text"}],"r… (1 vs 2 items)',
        "options.temperature: recorded 0.5, got 0.7",
        "system_prompt: recorded 's', got 't'",
    ]


async def test_key_like_options_never_reach_the_cassette(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    secret = "sk-live-0123456789abcdef"
    extra = {
        "api_key": secret,
        "headers": {"Authorization": "Bearer tok-123", "X-Trace": "keep me"},
        "access_token": "tok-456",
        "anything": secret,
        "max_tokens_hint": 7,
    }
    await _record(path, prompt("start"), model_options=ModelOptions(extra=extra))
    text = path.read_text()
    for leaked in (secret, "tok-123", "tok-456"):
        assert leaked not in text
    stored = load_cassette(path).records[0].request.options.extra
    assert stored == {
        "api_key": "[redacted]",
        "headers": {"Authorization": "[redacted]", "X-Trace": "keep me"},
        "access_token": "[redacted]",
        "anything": "[redacted]",
        "max_tokens_hint": 7,
    }
    # The live request carries the secret, the cassette does not: strict mode still matches.
    model = ReplayModel(path, timing="none")
    result = await run_agent_loop(
        prompt("start"),
        Context(system_prompt="sys", tools=(make_tool(),)),
        model,
        LoopConfig(model_options=ModelOptions(extra=extra)),
    )
    assert model.mismatches == []
    assert result.reason == "stop"


def _cassette(*records: CassetteRecord) -> Cassette:
    return Cassette(records=records)


def _hand_record(events: list[tuple[float, Any]], end: StreamEnd, index: int = 0) -> CassetteRecord:
    request = ModelRequest(system_prompt="", messages=(UserMessage.text("go", timestamp=0.0),))
    return CassetteRecord(
        index=index,
        digest=request_digest(request),
        request=request,
        events=tuple(RecordedEvent(at=at, event=e) for at, e in events),
        end=end,
    )


HELLO = AssistantMessage(content=(Text(text="hello"),), stop_reason="stop", timestamp=5.0)
TIMED = [
    (0.5, Start()),
    (1.0, TextStart(index=0)),
    (3.0, TextDelta(index=0, delta="hello")),
    (3.5, Done(message=HELLO)),
]


async def _arrivals(model: ReplayModel) -> list[float]:
    start = trio.current_time()
    out = []
    request = ModelRequest(system_prompt="", messages=(UserMessage.text("go"),))
    async with model.stream(request) as events:
        async for _ in events:
            out.append(trio.current_time() - start)
    return out


async def test_timing_is_replayed_on_trios_clock(autojump_clock: MockClock) -> None:
    cassette = _cassette(_hand_record(TIMED, StreamEnd(kind="done", at=3.5)))
    assert await _arrivals(ReplayModel(cassette)) == [0.5, 1.0, 3.0, 3.5]
    assert await _arrivals(ReplayModel(cassette, timing="none")) == [0.0, 0.0, 0.0, 0.0]


async def test_each_recorded_ending_replays(autojump_clock: MockClock) -> None:
    raised = _hand_record(
        TIMED[:3],
        StreamEnd(kind="raised", at=4.0, error_type="ReadError", error_message="peer left"),
    )
    with pytest.raises(RecordedError, match="peer left") as info:
        await _arrivals(ReplayModel(_cassette(raised)))
    assert type(info.value).__name__ == "ReadError"

    ended = _hand_record(TIMED[:3], StreamEnd(kind="ended", at=4.0))
    assert await _arrivals(ReplayModel(_cassette(ended))) == [0.5, 1.0, 3.0]

    # A stream its consumer cancelled while recording waits on replay until cancelled.
    cancelled = _hand_record(TIMED[:3], StreamEnd(kind="cancelled", at=9.0))
    points: list[int] = []
    model = ReplayModel(_cassette(cancelled), on_cancel_point=points.append)
    with trio.move_on_after(100) as scope:
        await _arrivals(model)
    assert scope.cancelled_caught
    assert points == [0]
    assert model.open_streams == 0


async def test_running_out_of_records_is_an_error_event() -> None:
    model = ReplayModel(_cassette(), timing="none")
    request = ModelRequest(system_prompt="", messages=(UserMessage.text("go"),))
    async with model.stream(request) as events:
        got = [e async for e in events]
    assert len(got) == 1
    assert isinstance(got[0], Error)
    assert got[0].message.error_message == (
        "ReplayModel has no record left for request 1 (the cassette has 0)"
    )


async def _faulted(path: Path, fault: Fault, **config: Any) -> Any:
    model = ReplayModel(path, faults=[fault])
    events = Recorder()
    result = await run_agent_loop(
        prompt("start"),
        Context(system_prompt="sys", tools=(make_tool(),)),
        model,
        LoopConfig(**config),
        on_event=events,
    )
    assert_consistent(result, events.events, model.requests)
    assert model.mismatches == []
    return result


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        (
            "raise",
            "the model stream failed: InjectedFault: injected fault: raise at event 4 of request 1",
        ),
        ("error", "injected fault: error at event 4 of request 1"),
        ("stall", "the model stream was silent for 5s (stream_idle_timeout)"),
        ("cut", "the model stream ended without a Done or Error event"),
    ],
)
async def test_faults_break_the_chosen_stream(
    tmp_path: Path, autojump_clock: MockClock, kind: Any, message: str
) -> None:
    path = tmp_path / "c.jsonl"
    # Record at "start" so the replay's strict checks pass up to the fault.
    await _record(path, prompt("start"))
    result = await _faulted(path, Fault(request=1, event=4, kind=kind), stream_idle_timeout=5.0)
    assert result.steps == 2
    assert result.reason == "error"
    last = [m for m in result.messages if isinstance(m, AssistantMessage)][-1]
    assert last.stop_reason == "error"
    assert last.error_message is not None
    assert last.error_message.startswith(message)
    # The call finished before the fault keeps its place: a skipped result answers it.
    assert result.messages[-1].role == "tool_result"


def test_the_version_1_fixture_is_read() -> None:
    cassette = load_cassette(FIXTURE)
    assert cassette.version == 1
    assert [r.index for r in cassette.records] == [0, 1, 2]
    assert [r.end.kind for r in cassette.records] == ["done", "done", "done"]
    # Digests are stable: what this code computes is what version 1 wrote.
    assert [request_digest(r.request) for r in cassette.records] == [
        r.digest for r in cassette.records
    ]
    final = cassette.records[-1].events[-1].event
    assert isinstance(final, Done)
    assert final.message.text == "Done: hello world, 5."


def _rewrite_header(tmp_path: Path, header: dict[str, Any] | str) -> Path:
    lines = FIXTURE.read_text().splitlines(keepends=True)
    lines[0] = (header if isinstance(header, str) else json.dumps(header)) + "\n"
    path = tmp_path / "c.jsonl"
    path.write_text("".join(lines))
    return path


def test_an_unknown_future_version_is_refused(tmp_path: Path) -> None:
    path = _rewrite_header(tmp_path, {"format": "trio-agent-cassette", "version": 2})
    with pytest.raises(CassetteFormatError) as info:
        load_cassette(path)
    assert str(info.value) == (
        f"{path}:1: cassette format version 2 is not supported (this trio-agent reads "
        "version 1; upgrade trio-agent to replay it)"
    )
    assert info.value.line == 1
    with pytest.raises(CassetteFormatError):
        ReplayModel(path)


def test_files_that_are_not_cassettes_are_refused(tmp_path: Path) -> None:
    path = _rewrite_header(tmp_path, {"format": "trio-agent-transcript", "version": 1})
    with pytest.raises(CassetteFormatError, match=":1: not a trio-agent cassette"):
        load_cassette(path)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(CassetteFormatError, match="empty file"):
        load_cassette(empty)
    bad = tmp_path / "bad.jsonl"
    lines = FIXTURE.read_text().splitlines(keepends=True)
    bad.write_text(lines[0] + lines[1].replace('"type":"start"', '"type":"begin"'))
    with pytest.raises(CassetteFormatError) as info:
        load_cassette(bad)
    assert info.value.line == 2
    assert "unknown type 'begin'" in str(info.value)
    assert info.value.path.startswith("$.events[0].event")


async def test_a_recorded_exception_and_its_record(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    inner = ScriptedModel([reply("partial answer")])
    inner.fail_at(0, 2, ConnectionResetError("peer reset"))
    recorded = await run_agent_loop(
        prompt("start"), Context(system_prompt="sys"), RecordingModel(inner, path)
    )
    (record,) = load_cassette(path).records
    assert record.end.kind == "raised"
    assert (record.end.error_type, record.end.error_message) == (
        "ConnectionResetError",
        "peer reset",
    )
    assert len(record.events) == 2
    replayed = await run_agent_loop(
        prompt("start"), Context(system_prompt="sys"), ReplayModel(path)
    )
    assert replayed.messages[-1].error_message == recorded.messages[-1].error_message
    assert "ConnectionResetError: peer reset" in replayed.messages[-1].error_message


def test_injected_fault_is_an_exception() -> None:
    assert issubclass(InjectedFault, Exception)
    assert issubclass(CassetteMismatch, Exception)


async def test_a_session_with_an_abort_and_a_second_prompt_replays(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    path = tmp_path / "c.jsonl"
    inner = ScriptedModel(
        [reply("a long answer that is cut short"), tool_use(call("c1")), reply("fine")],
        chunk_size=4,
    )
    recorder = RecordingModel(inner, path)
    context = Context(system_prompt="sys", tools=(make_tool(),))
    # Run 1: aborted on its third text delta.
    async with open_agent_loop(prompt("first"), context, recorder) as run:
        deltas = 0
        async for event in run.events:
            if isinstance(event, MessageUpdate) and isinstance(event.event, TextDelta):
                deltas += 1
                if deltas == 3:
                    run.abort("stopped by the user")
    assert run.result is not None
    first = run.result
    assert first.reason == "aborted"
    # Run 2: a new prompt on the transcript, a tool round trip.
    second = await run_agent_loop(
        prompt("second"), attrs.evolve(context, messages=first.transcript), recorder
    )
    assert second.reason == "stop"
    kinds = [r.end.kind for r in load_cassette(path).records]
    assert kinds == ["cancelled", "done", "done"]

    events = Recorder()
    report = await replay_session(load_cassette(path), (make_tool(),), on_event=events)
    assert report.divergence is None
    assert report.identical
    assert (report.requests, report.recorded) == (3, 3)
    assert message_differences(second.transcript, report.transcript) == []
    aborted = report.transcript[1]
    assert isinstance(aborted, AssistantMessage)
    assert aborted.stop_reason == "aborted"
    assert aborted.error_message == "stopped by the user"
    assert [e.reason for e in events.of(AgentEnd)] == ["aborted", "stop"]

    # A tool that now answers differently: the replay stops at the request it changes.
    async def other(call: Any, args: Any, ctx: Any) -> str:
        return "other"

    report = await replay_session(load_cassette(path), (make_tool("probe", other),))
    assert report.divergence == (
        "request 3 differs from the cassette: messages[4].content[0].text: "
        "recorded 'probe ok', got 'other'"
    )
    assert not report.identical


async def test_a_cassette_that_cannot_be_written_is_reported(tmp_path: Path) -> None:
    missing = tmp_path / "missing" / "c.jsonl"
    result = await run_agent_loop(
        prompt("start"), Context(system_prompt="sys"), RecordingModel(_session_model(), missing)
    )
    assert result.reason == "error"
    assert "FileNotFoundError" in (result.messages[-1].error_message or "")

    # A record lost when its stream ended fails the next request: no silent gap.
    path = tmp_path / "c.jsonl"

    async def sabotage(call: Any, args: Any, ctx: Any) -> str:
        if call.id == "c1":
            path.unlink()
            path.mkdir()
        return "probe ok"

    recorder = RecordingModel(_session_model(), path)
    result = await run_agent_loop(
        prompt("start"),
        Context(system_prompt="sys", tools=(make_tool("probe", sabotage),)),
        recorder,
    )
    assert len(recorder.records) == 1
    assert result.steps == 3
    assert result.reason == "error"
    message = result.messages[-1].error_message or ""
    assert f"OSError: the cassette {path} cannot be written" in message


@given(fault=strategy_faults(FIXTURE, kinds=("stall", "cut")))
def test_the_faults_strategy_stays_inside_the_cassette(fault: Fault) -> None:
    records = load_cassette(FIXTURE).records
    assert 0 <= fault.request < len(records)
    assert 0 <= fault.event < len(records[fault.request].events)
    assert fault.kind in ("stall", "cut")


def test_bad_faults_are_refused() -> None:
    with pytest.raises(ValueError, match="'request' must be >= 0"):
        Fault(request=-1, event=0, kind="cut")
    with pytest.raises(
        ValueError,
        match=r"Fault\.kind must be one of 'raise', 'error', 'stall', 'cut'; not 'explode'",
    ):
        Fault(request=0, event=0, kind="explode")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kinds must be a non-empty subset"):
        strategy_faults(FIXTURE, kinds=())
    with pytest.raises(ValueError, match="at least one record"):
        strategy_faults(Cassette(records=()))


def test_the_loop_never_imports_the_replay_package() -> None:
    # An edge module: importing the library (the loop, the agent, the providers, the
    # test kit without its strategies) does not load it.
    code = (
        "import sys, trio_agent, trio_agent.providers, trio_agent.tools, trio_agent.testing; "
        "print(sorted(m for m in sys.modules if m.startswith('trio_agent.replay')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
