"""Cassettes: record a run through any model, replay it strictly or in sequence, on the
clock or not, with faults; the file format (version 1 fixture, refused future versions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from tests.kit.loop import Recorder, assert_consistent, call, make_tool, prompt, reply, tool_use
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
from trio_agent.cli import main
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
from trio_agent.replay._cassette import request_to_json
from trio_agent.testing import ScriptedModel
from trio_agent.testing import faults as strategy_faults
from trio_agent.tools import workspace

if TYPE_CHECKING:
    from trio.testing import MockClock

FIXTURE = Path(__file__).resolve().parent.parent / "data" / "cassette_v1.jsonl"


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


def test_the_cache_option_counts_in_the_digest_only_when_set() -> None:
    # A field added to ModelOptions after version 1 leaves old digests as they were.
    plain = ModelRequest(system_prompt="s", messages=(UserMessage.text("x"),))
    keyed = attrs.evolve(plain, options=ModelOptions(cache="k"))
    off = attrs.evolve(plain, options=ModelOptions(cache=False))
    assert len({request_digest(plain), request_digest(keyed), request_digest(off)}) == 3


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


GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" * 2  # 44 characters, a GitHub token's shape
CAMEL_SECRETS = {
    "accessToken": "at-1",
    "clientSecret": "cs-2",
    "xApiKey": "xk-3",
    "refreshToken": "rt-4",
    "sessionToken": "st-5",
    "privateKey": "pk-6",
    "XAPIKEY": "xk-7",
    "X-Goog-Api-Key": "gk-8",
    "DB_PASSWORD": "pw-9",
    "sessionId": "si-10",
}
TOKENS_IN_CLEAR = {
    "github": GHP,
    "fine_grained": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "openai": "sk-proj-Zx9Yw8Vu7Ts6Rq5Po4Nm",
    "anthropic": "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "google": "AIzaSyA1B2C3D4E5F6G7H8I9J0K1L2M3N4O5P6Q",
    "slack": "xoxb-123456789012-abcdefABCDEF",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "header": "Bearer abc123def456ghi789",
}


async def test_camel_case_names_and_tokens_in_clear_never_reach_the_cassette(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.jsonl"
    extra = {
        **CAMEL_SECRETS,
        "nested": [{"note": f"push with {GHP} please", **TOKENS_IN_CLEAR}],
        "max_tokens_hint": 7,
        "keyword": "keep me",
        "monkey": "keep me too",
        "author": "someone",
    }
    await _record(path, prompt("start"), model_options=ModelOptions(extra=extra))
    text = path.read_text()
    for leaked in (*CAMEL_SECRETS.values(), *TOKENS_IN_CLEAR.values(), "ghp_"):
        assert leaked not in text
    stored = load_cassette(path).records[0].request.options.extra
    assert stored == {
        **dict.fromkeys(CAMEL_SECRETS, "[redacted]"),
        "nested": [
            {"note": "push with [redacted] please", **dict.fromkeys(TOKENS_IN_CLEAR, "[redacted]")}
        ],
        "max_tokens_hint": 7,
        "keyword": "keep me",
        "monkey": "keep me too",
        "author": "someone",
    }


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


@pytest.mark.parametrize("timing", ["none", "clock"])
async def test_a_fault_past_the_last_record_still_gives_the_error_event(
    timing: Any, autojump_clock: MockClock
) -> None:
    fault = Fault(request=0, event=0, kind="raise")
    model = ReplayModel(_cassette(), timing=timing, faults=[fault])
    request = ModelRequest(system_prompt="", messages=(UserMessage.text("go"),))
    async with model.stream(request) as events:
        got = [e async for e in events]
    assert len(got) == 1
    assert isinstance(got[0], Error)
    assert got[0].message.error_message == (
        "ReplayModel has no record left for request 1 (the cassette has 0)"
    )
    assert model.open_streams == 0


async def test_a_faults_error_reply_names_the_model_of_the_records_last_event() -> None:
    # The record's last event is its first Done: what a malformed stream sent after it
    # does not count, here as everywhere.
    first = attrs.evolve(HELLO, model="first-model", provider="p1")
    late = attrs.evolve(HELLO, model="late-model", provider="p2")
    events = [Start(), TextStart(index=0), Done(message=first), Done(message=late)]
    record = _hand_record([(0.0, e) for e in events], StreamEnd(kind="done", at=0.0))
    fault = Fault(request=0, event=2, kind="error")
    model = ReplayModel(_cassette(record), timing="none", faults=[fault])
    async with model.stream(record.request) as events:
        got = [e async for e in events]
    assert isinstance(got[-1], Error)
    assert (got[-1].message.model, got[-1].message.provider) == ("first-model", "p1")


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

    # A record that cannot be written fails its own reply, and every later request:
    # no silent gap.
    path = tmp_path / "c.jsonl"

    async def sabotage(call: Any, args: Any, ctx: Any) -> str:
        if call.id == "c1":
            path.unlink()
            path.mkdir()
        return "probe ok"

    recorder = RecordingModel(_session_model(), path)
    context = Context(system_prompt="sys", tools=(make_tool("probe", sabotage),))
    result = await run_agent_loop(prompt("start"), context, recorder)
    assert len(recorder.records) == 1
    assert result.steps == 2
    assert result.reason == "error"
    (failed,) = [m for m in result.messages if isinstance(m, AssistantMessage)][-1:]
    # The reply is kept as far as it came, and ends as an error.
    assert failed.stop_reason == "error"
    assert (failed.error_message or "").startswith("the model stream failed: IsADirectoryError:")
    again = await run_agent_loop(prompt("more"), context, recorder)
    assert again.reason == "error"
    message = again.messages[-1].error_message or ""
    assert f"OSError: the cassette {path} cannot be written" in message


async def test_a_request_that_cannot_be_recorded_fails_and_leaves_no_gap(tmp_path: Path) -> None:
    # A value in the options that is not JSON data: its record cannot be written.
    path = tmp_path / "c.jsonl"
    recorder = RecordingModel(ScriptedModel([reply("a"), reply("b")]), path)
    config = LoopConfig(model_options=ModelOptions(extra={"when": object()}))
    result = await run_agent_loop(prompt("go"), Context(system_prompt=""), recorder, config)
    assert result.reason == "error"
    assert result.messages[-1].error_message == (
        "the model stream failed: TypeError: Object of type object is not JSON serializable"
    )
    # The next request fails too, rather than leave a cassette with a hole.
    result = await run_agent_loop(prompt("go"), Context(system_prompt=""), recorder)
    assert result.reason == "error"
    assert f"OSError: the cassette {path} cannot be written: Object of type object" in (
        result.messages[-1].error_message or ""
    )
    assert load_cassette(path).records == ()


# Records a tool round trip with a file-size limit that cuts the cassette in the middle
# of its last record: what a full disk does (a short write, then an error).
_FULL_DISK = """
import json, resource, signal, sys
import trio
sys.path.insert(0, sys.argv[3])
from tests.kit.loop import call, make_tool, prompt, reply, tool_use
from trio_agent import Context, run_agent_loop
from trio_agent.replay import RecordingModel
from trio_agent.testing import ScriptedModel

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
limit = int(sys.argv[2])
if limit:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
model = ScriptedModel([tool_use(call("c1", x=1)), reply("all done " * 40)], chunk_size=8)
result = trio.run(
    run_agent_loop,
    prompt("start"),
    Context(system_prompt="sys", tools=(make_tool(),)),
    RecordingModel(model, sys.argv[1]),
)
print(json.dumps([result.reason, result.messages[-1].error_message]))
"""


def _record_on_a_small_disk(path: Path, limit: int) -> tuple[str, str | None]:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _FULL_DISK,
            str(path),
            str(limit),
            str(Path(__file__).resolve().parent.parent.parent),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    reason, error = json.loads(done.stdout)
    return reason, error


def test_a_record_cut_by_a_full_disk_fails_the_run_and_leaves_whole_records(
    tmp_path: Path,
) -> None:
    whole = tmp_path / "whole.jsonl"
    assert _record_on_a_small_disk(whole, 0) == ("stop", None)
    header, first, second = whole.read_bytes().splitlines(keepends=True)
    # Room for the header, the first record and half of the second.
    path = tmp_path / "cut.jsonl"
    reason, error = _record_on_a_small_disk(path, len(header + first) + len(second) // 2)
    # The reply whose record could not be written fails the run: never a silent stop.
    assert reason == "error"
    assert error is not None
    assert error.startswith("the model stream failed: OSError: [Errno 27] File too large")
    # The cut record was taken back off: the cassette holds the whole records only.
    loaded = load_cassette(path)
    assert loaded.torn_line is None
    assert [r.index for r in loaded.records] == [0]
    data = path.read_bytes()
    assert data.startswith(header)
    assert data.endswith(b"\n")
    assert data.count(b"\n") == 2


def test_a_torn_last_record_is_reported_and_the_records_before_it_load(tmp_path: Path) -> None:
    lines = FIXTURE.read_bytes().splitlines(keepends=True)
    assert len(lines) >= 3
    whole = len(load_cassette(FIXTURE).records)
    # A last record missing only its newline is whole.
    path = tmp_path / "no-newline.jsonl"
    path.write_bytes(b"".join(lines)[:-1])
    assert load_cassette(path).records == load_cassette(FIXTURE).records
    for cut in (1, len(lines[-1]) // 2, len(lines[-1]) - 2):
        path = tmp_path / f"torn{cut}.jsonl"
        path.write_bytes(b"".join(lines[:-1]) + lines[-1][:cut])
        loaded = load_cassette(path)
        assert len(loaded.records) == whole - 1
        assert loaded.records == load_cassette(FIXTURE).records[:-1]
        assert loaded.torn_line == len(lines)
        assert (loaded.torn_reason or "").startswith("malformed JSON")
    # A bad line anywhere else still refuses the file, naming the line.
    path = tmp_path / "middle.jsonl"
    path.write_bytes(lines[0] + lines[1][:20] + b"\n" + b"".join(lines[2:]))
    with pytest.raises(CassetteFormatError) as info:
        load_cassette(path)
    assert info.value.line == 2
    assert str(info.value).startswith(f"{path}:2: malformed JSON")
    # Cut in the middle of a UTF-8 sequence: torn too.
    path = tmp_path / "utf8.jsonl"
    path.write_bytes(b"".join(lines[:-1]) + '{"index":9,"digest":"é'.encode()[:-1])
    assert load_cassette(path).torn_reason == (
        "not UTF-8 text (unexpected end of data: byte 0xc3 at column 22)"
    )


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


# --- the replay command: a cassette's bash calls wait for the user ----------------------


async def _record_bash_session(tmp_path: Path) -> tuple[Path, Path]:
    """A recorded session whose bash call touches a file next to the workspace, outside
    it; and a new workspace to replay it on."""
    recorded = tmp_path / "recorded" / "work"
    recorded.mkdir(parents=True)
    path = tmp_path / "bash.jsonl"
    model = ScriptedModel(
        [tool_use(call("c1", "bash", command="touch ../outside.txt")), reply("touched")]
    )
    result = await run_agent_loop(
        prompt("touch it"),
        Context(system_prompt="sys", tools=workspace(recorded)),
        RecordingModel(model, path),
    )
    assert result.reason == "stop"
    assert (recorded.parent / "outside.txt").exists()
    folder = tmp_path / "replay" / "work"
    folder.mkdir(parents=True)
    return path, folder


async def _replay_cli(*args: str, stdin: Any = b"") -> tuple[int, str, str]:
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "-m", "trio_agent.cli", "replay", *args],
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_replay_refuses_a_cassettes_bash_call_without_a_terminal(tmp_path: Path) -> None:
    path, folder = await _record_bash_session(tmp_path)
    code, out, err = await _replay_cli(str(path), "--folder", str(folder))
    assert not (folder.parent / "outside.txt").exists()
    assert code == 1, err
    assert "refused (no terminal to ask, no --yes): bash $ touch ../outside.txt" in out
    last = out.rstrip().splitlines()[-1]
    assert last.startswith(f"{path}: diverged: request 2 differs from the cassette: ")
    assert "got \"bash needs the user's approval, and there is no terminal" in last


async def test_replay_with_yes_runs_the_cassettes_bash_calls(tmp_path: Path) -> None:
    path, folder = await _record_bash_session(tmp_path)
    code, out, err = await _replay_cli(str(path), "--folder", str(folder), "--yes")
    assert code == 0, err
    assert (folder.parent / "outside.txt").exists()
    assert "[y/N]" not in out
    assert out.rstrip().splitlines()[-1] == f"{path}: 2 requests replayed, identical"


async def test_replay_with_no_bash_refuses_every_bash_call(tmp_path: Path) -> None:
    path, folder = await _record_bash_session(tmp_path)
    code, out, _ = await _replay_cli(str(path), "--folder", str(folder), "--no-bash")
    assert code == 1
    assert not (folder.parent / "outside.txt").exists()
    assert "refused (--no-bash): bash $ touch ../outside.txt" in out
    assert "bash is off in this replay (--no-bash)" in out.rstrip().splitlines()[-1]
    code, _, err = await _replay_cli(str(path), "--no-bash", "--yes")
    assert code == 2
    assert "not allowed with argument" in err


@pytest.mark.parametrize(("answer", "runs"), [("y\n", True), ("n\n", False), ("\x04", False)])
async def test_replay_asks_at_a_terminal_before_a_bash_call(
    tmp_path: Path, answer: str, runs: bool
) -> None:
    """y runs the call, anything else refuses it; so does the end of input (Ctrl-D),
    instead of waiting for an answer that cannot come."""
    path, folder = await _record_bash_session(tmp_path)
    main_fd, terminal = os.openpty()
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "trio_agent.cli", "replay", str(path), "--folder", str(folder)],
        stdin=terminal,
        stdout=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        out = b""
        with trio.fail_after(60):
            # The answer is typed once the question is shown.
            while b"[y/N]" not in out:
                chunk = await process.stdout.receive_some()
                assert chunk, out
                out += chunk
            assert not (folder.parent / "outside.txt").exists()
            os.write(main_fd, answer.encode())
            while chunk := await process.stdout.receive_some():
                out += chunk
            code = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
        os.close(main_fd)
        os.close(terminal)
    text = out.decode()
    assert "allow bash $ touch ../outside.txt? [y/N]" in text
    assert (folder.parent / "outside.txt").exists() is runs
    assert code == (0 if runs else 1)
    if not runs:
        why = "the user left before answering" if answer == "\x04" else "the user declined"
        assert why in text.rstrip().splitlines()[-1]


async def test_replay_refuses_at_once_a_session_that_had_mcp_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What chat --record writes for a session with --mcp: the MCP tools' specs, next to
    # the workspace tools, in every request.
    recorded = tmp_path / "recorded"
    recorded.mkdir()
    path = tmp_path / "mcp.jsonl"
    model = ScriptedModel(
        [
            tool_use(call("c1", "write", path="made.txt", content="x")),
            tool_use(call("c2", "git__log")),
            reply("done"),
        ]
    )
    tools = (*workspace(recorded), make_tool("git__log"), make_tool("status"))
    result = await run_agent_loop(
        prompt("go"), Context(system_prompt="sys", tools=tools), RecordingModel(model, path)
    )
    assert result.reason == "stop"
    folder = tmp_path / "work"
    folder.mkdir()
    code = await trio.to_thread.run_sync(main, ["replay", str(path), "--folder", str(folder)])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert err == (
        f"trio-agent replay: {path}: cannot be replayed: the session had tools that are not "
        "workspace tools (git__log, status) — an MCP server's, given to chat with --mcp or "
        "--mcp-url — and replay runs the workspace tools only\n"
    )
    # Nothing ran.
    assert list(folder.iterdir()) == []


async def test_replay_reports_a_torn_last_record_and_replays_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, folder = await _record_bash_session(tmp_path)
    data = path.read_bytes()
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(data[: data.rindex(b"\n", 0, -1) + 30])
    argv = ["replay", str(torn), "--folder", str(folder), "--yes"]
    code = await trio.to_thread.run_sync(main, argv)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        f"{torn}:3: torn last line dropped (a crash while it was written?): "
        "malformed JSON: Unterminated string starting at (column 21)"
    )
    # The first request replayed (its bash call ran); the second is not in the cassette.
    assert (folder.parent / "outside.txt").exists()
    assert code == 1
    assert lines[-1] == (
        f"{torn}: diverged: request 2: the replay asked the model again; the cassette "
        "ends after request 1"
    )


# --- redaction, for any name and any token of the known shapes ---------------------------

# Ordinary words, some of them close to the credential words; no digits, no "_".
ORDINARY_WORDS = [
    "the", "model", "answer", "bearer", "basic", "token", "tokens", "key", "keys",
    "secret", "github", "pat", "ask", "task", "slack", "aws", "google", "max", "monkey",
    "keyword", "author", "training", "bonds", "eye", "jay", "sky", "risk", "desk",
]  # fmt: skip
ordinary_text = st.lists(
    st.tuples(st.sampled_from(ORDINARY_WORDS), st.sampled_from([" ", ", ", ". ", "-", "/"])),
    max_size=12,
).map(lambda pairs: "".join(w + sep for w, sep in pairs) + "end")


def _chars(alphabet: str, low: int, high: int) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=low, max_size=high)


ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
B64URL = ALNUM + "-_"


@st.composite
def _http_credentials(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["Bearer", "bearer", "Basic", "BEARER"]))
    body = draw(_chars(B64URL + ".~+/", 7, 40))
    at = draw(st.integers(0, len(body)))
    digit = draw(st.sampled_from("0123456789"))
    return f"{scheme} {body[:at]}{digit}{body[at:]}"


TOKENS = st.one_of(
    st.builds("gh{}_{}".format, st.sampled_from("pousr"), _chars(ALNUM, 20, 40)),
    _chars(ALNUM + "_", 20, 60).map("github_pat_{}".format),
    st.builds(
        "{}{}".format, st.sampled_from(["sk-", "sk-ant-api03-", "sk-proj-"]), _chars(B64URL, 16, 60)
    ),
    st.builds(
        "{}{}".format, st.sampled_from(["AKIA", "ASIA"]), _chars(ALNUM[:26] + ALNUM[52:], 16, 16)
    ),
    _chars(B64URL, 35, 35).map("AIza{}".format),
    st.builds("xox{}-{}".format, st.sampled_from("abpr"), _chars(ALNUM + "-", 10, 40)),
    st.builds(
        "eyJ{}.eyJ{}.{}".format, _chars(B64URL, 8, 30), _chars(B64URL, 8, 60), _chars(B64URL, 0, 40)
    ),
    _http_credentials(),
)


@given(before=ordinary_text, token=TOKENS, after=ordinary_text)
def test_a_token_of_a_known_shape_is_redacted_wherever_it_stands(
    before: str, token: str, after: str
) -> None:
    text = f"{before} {token} {after}"
    hidden = request_to_json(_with_extra({"note": text, "list": [text]}))["options"]["extra"]
    for value in (hidden["note"], hidden["list"][0]):
        assert token not in value
        assert "[redacted]" in value
        # What stood around it stays (but a last word "bearer"/"basic" may go with it).
        assert value.endswith(f"[redacted] {after}")
        assert value.startswith(before.rsplit(" ", 1)[0] if " " in before else "")


@given(text=ordinary_text)
def test_ordinary_text_is_never_redacted(text: str) -> None:
    assert request_to_json(_with_extra({"note": text}))["options"]["extra"] == {"note": text}


SECRET_ENDS = [
    ["api", "key"], ["access", "token"], ["refresh", "token"], ["session", "token"],
    ["client", "secret"], ["private", "key"], ["password"], ["passwd"], ["passphrase"],
    ["authorization"], ["auth"], ["credentials"], ["cookie"], ["session", "id"],
    ["secret", "key"], ["pwd"], ["key"], ["token"], ["secret"], ["bearer"],
]  # fmt: skip
STYLES = {
    "snake": lambda ws: "_".join(ws),
    "kebab": lambda ws: "-".join(ws),
    "camel": lambda ws: ws[0] + "".join(w.title() for w in ws[1:]),
    "pascal": lambda ws: "".join(w.title() for w in ws),
    "upper": lambda ws: "_".join(w.upper() for w in ws),
    "header": lambda ws: "-".join(w.title() for w in ws),
    "spaced": lambda ws: " ".join(ws),
}


@given(
    lead=st.lists(
        st.sampled_from(["x", "my", "db", "github", "openai", "oauth", "user"]), max_size=2
    ),
    end=st.sampled_from(SECRET_ENDS),
    style=st.sampled_from(sorted(STYLES)),
)
def test_a_credential_name_is_matched_in_any_case_and_separator(
    lead: list[str], end: list[str], style: str
) -> None:
    name = STYLES[style]([*lead, *end])
    stored = request_to_json(_with_extra({name: "value-1", "outer": {name: [1]}}))
    assert stored["options"]["extra"] == {name: "[redacted]", "outer": {name: "[redacted]"}}


@pytest.mark.parametrize(
    "name",
    ["max_tokens", "maxTokens", "token_count", "keyword", "keys", "monkey", "author", "temperature",
     "top_p", "stop", "tokenizer", "hotkey", "secretary"],
)  # fmt: skip
def test_ordinary_names_are_kept(name: str) -> None:
    assert request_to_json(_with_extra({name: "x"}))["options"]["extra"] == {name: "x"}


def _with_extra(extra: dict[str, Any]) -> ModelRequest:
    return ModelRequest(
        system_prompt="", messages=(UserMessage.text("go", timestamp=0.0),),
        options=ModelOptions(extra=extra),
    )  # fmt: skip


async def test_a_cassettes_write_cannot_leave_the_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # write and edit run without asking: like every workspace tool, they are confined
    # to --folder, whatever the cassette asks.
    recorded = tmp_path / "recorded" / "work"
    recorded.mkdir(parents=True)
    path = tmp_path / "write.jsonl"
    model = ScriptedModel(
        [tool_use(call("c1", "write", path="../escaped.txt", content="x")), reply("tried")]
    )
    result = await run_agent_loop(
        prompt("write outside"),
        Context(system_prompt="sys", tools=workspace(recorded)),
        RecordingModel(model, path),
    )
    assert result.reason == "stop"
    assert not (recorded.parent / "escaped.txt").exists()
    folder = tmp_path / "replay" / "work"
    folder.mkdir(parents=True)
    code = await trio.to_thread.run_sync(main, ["replay", str(path), "--folder", str(folder)])
    assert not (folder.parent / "escaped.txt").exists()
    assert list(folder.iterdir()) == []
    assert "Refused: ../escaped.txt is outside the workspace" in capsys.readouterr().out
    # The refusal names the workspace, which is another one now: the replay diverges.
    assert code == 1


def test_long_texts_that_differ_late_are_shown_where_they_differ() -> None:
    def asking(text: str) -> ModelRequest:
        return ModelRequest(system_prompt="", messages=(UserMessage.text(text, timestamp=0.0),))

    head = "Refused: ../escaped.txt is outside the workspace "
    recorded, got = asking(head + "(/tmp/a/work)"), asking(head + "(/tmp/b/work)")
    assert request_differences(recorded, got) == [
        "messages[0].content[0].text: from character 36: recorded …'the workspace (/tmp/a/work)', "
        "got …'the workspace (/tmp/b/work)'"
    ]
