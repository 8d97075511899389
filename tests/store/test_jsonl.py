"""``JsonlTranscript``, ``load_transcript``, ``write_transcript`` and ``repair``.

The file is real (``tmp_path``) and writes go through real worker threads, so these tests
use the real clock. The crash model is checked exhaustively: a file cut at every byte
offset (what a crash can leave) loads as a prefix of the transcript, and reopening it for
appending always gives a file that loads whole.
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kit.loop import Recorder, call, ctx, make_tool, prompt, reply, sleeper, tool_use, user
from trio_agent import (
    AgentEvent,
    AgentRunError,
    AgentUsageError,
    AssistantMessage,
    Context,
    CustomMessage,
    JsonlTranscript,
    LoadedTranscript,
    Marker,
    Message,
    MessageEnd,
    Start,
    Text,
    TextDelta,
    TextStart,
    Thinking,
    ToolCall,
    ToolExecutionStart,
    ToolResultMessage,
    TranscriptFormatError,
    TurnEnd,
    check_transcript,
    dumps,
    load_transcript,
    loads,
    open_agent,
    open_agent_loop,
    repair,
    run_agent_loop,
    write_transcript,
)
from trio_agent._core._pairing import transcript_violations
from trio_agent._core._serde import MAX_JSON_DEPTH, JsonTooDeep, message_to_json, parse_json
from trio_agent._store import _locked_file, carry_markers
from trio_agent._store._jsonl import HEADER_LINE
from trio_agent.testing import ScriptedModel, messages

if TYPE_CHECKING:
    from pathlib import Path

GUARD = 10


def assistant(*calls: ToolCall, text: str = "", t: float = 2.0) -> AssistantMessage:
    content: tuple[Any, ...] = ((Text(text=text),) if text else ()) + calls
    return AssistantMessage(
        content=content, stop_reason="tool_use" if calls else "stop", timestamp=t
    )


def result(call_id: str, text: str = "ok", t: float = 3.0) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call_id, tool_name="probe", content=(Text(text=text),), timestamp=t
    )


def sample() -> list[Message]:
    """A small transcript with every message kind and some non-ASCII text."""
    return [
        user("héllo — 你好 \u2028 🐍"),
        AssistantMessage(
            content=(
                Thinking(thinking="hmm", signature="sig"),
                Text(text="looking"),
                call("c1", path="a.txt"),
                call("c2", n=[1, 2, {"x": None}]),
            ),
            stop_reason="tool_use",
            timestamp=2.0,
        ),
        result("c1", "contents ✓"),
        ToolResultMessage(
            tool_call_id="c2",
            tool_name="probe",
            content=(Text(text="boom"),),
            details={"k": [1, 2.5, "x"]},
            is_error=True,
            timestamp=3.5,
        ),
        CustomMessage(kind="note", content={"a": 1}, details=[True, None], timestamp=4.0),
        assistant(text="done", t=5.0),
    ]


def file_text(messages: list[Message]) -> bytes:
    return HEADER_LINE + "".join(message_to_json(m) + "\n" for m in messages).encode()


# --- the sink -----------------------------------------------------------------------


async def test_sink_of_run_agent_loop_writes_every_message_end(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    model = ScriptedModel(
        [tool_use(call("c1", s=0), call("c2", s=0), text="two"), reply("done")], chunk_size=3
    )
    with trio.fail_after(GUARD):
        async with JsonlTranscript(path) as transcript:
            res = await run_agent_loop(
                prompt(), ctx(sleeper("probe", 0)), model, on_event=transcript
            )
    raw = path.read_bytes()
    assert raw.startswith(b'{"format":"trio-agent-transcript","version":1}\n')
    assert raw.endswith(b"\n")
    assert raw.count(b"\n") == 1 + len(res.messages)
    loaded = load_transcript(path)
    assert loaded == LoadedTranscript(messages=res.messages, version=1)
    assert loaded.whole
    assert [m.role for m in loaded.messages] == [
        "user",
        "assistant",
        "tool_result",
        "tool_result",
        "assistant",
    ]


async def test_consumer_helper_with_open_agent_loop(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    model = ScriptedModel([tool_use(call("c1")), reply("done")])
    seen = Recorder()
    with trio.fail_after(GUARD):
        async with (
            JsonlTranscript(path) as transcript,
            open_agent_loop(prompt(), ctx(sleeper("probe", 0)), model) as run,
        ):
            async for event in run.events:
                await transcript.write_event(event)
                seen(event)
                if isinstance(event, MessageEnd):
                    # The line is in the file as soon as write_event returns.
                    assert load_transcript(path).messages[-1] == event.message
    assert run.result is not None
    assert load_transcript(path).messages == run.result.messages == run.messages


async def test_an_aborted_run_leaves_a_paired_file(tmp_path: Path) -> None:
    """Abort mid-batch: the clean-up's MessageEnds (aborted results) are written too."""
    path = tmp_path / "run.jsonl"
    model = ScriptedModel([tool_use(call("c1", s=0), call("c2", s=3600), call("c3", s=3600))])
    with trio.fail_after(GUARD):
        async with (
            JsonlTranscript(path) as transcript,
            open_agent_loop(prompt(), ctx(sleeper("probe", 0)), model) as run,
        ):
            async for event in run.events:
                await transcript(event)
                if isinstance(event, ToolExecutionStart) and event.call_id == "c3":
                    run.abort()
    assert run.result is not None
    assert run.result.reason == "aborted"
    loaded = load_transcript(path)
    assert loaded.messages == run.result.messages
    check_transcript(loaded.messages)


async def test_an_outer_cancel_leaves_a_paired_file(tmp_path: Path) -> None:
    """The caller's cancel scope fires mid-batch; the shielded clean-up still writes."""
    path = tmp_path / "run.jsonl"
    model = ScriptedModel([tool_use(call("c1", s=3600), call("c2", s=3600))])
    with trio.fail_after(GUARD):
        async with JsonlTranscript(path) as transcript:
            with trio.CancelScope() as scope:

                async def sink(event: AgentEvent) -> None:
                    await transcript(event)
                    if isinstance(event, ToolExecutionStart) and event.call_id == "c2":
                        scope.cancel()  # the caller's scope, not the run's abort

                await run_agent_loop(prompt(), ctx(sleeper("probe", 0)), model, on_event=sink)
    assert scope.cancelled_caught
    loaded = load_transcript(path)
    assert [m.role for m in loaded.messages] == ["user", "assistant", "tool_result", "tool_result"]
    check_transcript(loaded.messages)


async def test_events_that_are_not_message_ends_write_nothing(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    async with JsonlTranscript(path) as transcript:
        await transcript(TurnEnd(message=None))
        await transcript(ToolExecutionStart(call_id="c", tool_name="t", args={}))
    assert path.read_bytes() == HEADER_LINE


async def test_write_messages_and_append_to_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    first, second = sample()[:3], sample()[3:]
    async with JsonlTranscript(path) as transcript:
        await transcript.write_messages(first)
        await transcript.write_messages([])
    async with JsonlTranscript(path, fsync=False) as transcript:
        assert transcript.dropped_bytes == 0
        await transcript.write_messages(second)
    assert path.read_bytes() == file_text(sample())  # the header is not repeated
    assert load_transcript(path).messages == tuple(sample())


async def test_concurrent_writers_are_written_in_call_order(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    called: list[int] = []
    async with JsonlTranscript(path, fsync=False) as transcript:

        async def writer(i: int) -> None:
            await trio.lowlevel.checkpoint()  # let the scheduler pick any order
            called.append(i)
            await transcript.write_event(MessageEnd(message=user(f"m{i}")))

        async with trio.open_nursery() as nursery:
            for i in range(30):
                nursery.start_soon(writer, i)
    texts = [m.content[0].text for m in load_transcript(path).messages]  # type: ignore[union-attr]
    assert texts == [f"m{i}" for i in called]


async def test_lifecycle_errors(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    transcript = JsonlTranscript(path)
    with pytest.raises(trio.ClosedResourceError, match="not open"):
        await transcript.write_event(MessageEnd(message=user("x")))
    assert not path.exists()  # constructing does no I/O
    async with transcript:
        pass
    with pytest.raises(trio.ClosedResourceError, match="closed"):
        await transcript.write_messages([user("x")])
    with pytest.raises(trio.ClosedResourceError, match="closed"):
        await transcript(TurnEnd(message=None))
    await transcript.aclose()  # twice: nothing happens
    with pytest.raises(RuntimeError, match="only once"):
        await transcript.__aenter__()
    with pytest.raises(ValueError, match="fsync must be"):
        JsonlTranscript(path, fsync="sometimes")  # type: ignore[arg-type]


async def test_aclose_when_cancelled_still_closes(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    transcript = JsonlTranscript(path)
    await transcript.__aenter__()
    with trio.CancelScope() as scope:
        scope.cancel()
        await transcript.aclose()
    assert scope.cancelled_caught
    async with JsonlTranscript(path):  # the lock was released: it was closed
        pass


async def test_one_writer_per_file(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    async with JsonlTranscript(path):
        with pytest.raises(AgentUsageError, match="already open for writing"):
            async with JsonlTranscript(path):
                pass  # pragma: no cover
    async with JsonlTranscript(path):
        pass


@pytest.mark.parametrize(
    ("mode", "expected"),
    [(True, 1 + 5 + 1), ("turn", 1 + 2 + 1), (False, 0)],
)
async def test_fsync_modes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: Any, expected: int
) -> None:
    """True: header, each of the 5 lines, and the directory entry of the new file;
    "turn": header, one per turn (2 turns; AgentEnd finds nothing new), directory;
    False: never."""
    syncs: list[int] = []
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)

        def counting(fd: int, real: Any = real) -> None:
            syncs.append(fd)
            real(fd)

        monkeypatch.setattr(os, name, counting)
    model = ScriptedModel([tool_use(call("c1"), call("c2")), reply("done")])
    with trio.fail_after(GUARD):
        async with JsonlTranscript(tmp_path / "run.jsonl", fsync=mode) as transcript:
            await run_agent_loop(prompt(), ctx(sleeper("probe", 0)), model, on_event=transcript)
    assert len(syncs) == expected


async def test_a_failed_write_is_cut_back_and_breaks_the_transcript(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.jsonl"
    real_write = os.write

    def half_then_full(fd: int, data: Any) -> int:
        if len(data) > 40:  # the message line, not the header
            real_write(fd, bytes(data[: len(data) // 2]))
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    async with JsonlTranscript(path) as transcript:
        await transcript.write_messages([user("ok")])
        monkeypatch.setattr(os, "write", half_then_full)
        with pytest.raises(OSError, match="No space left"):
            await transcript.write_messages([user("x" * 100)])
        monkeypatch.undo()
        with pytest.raises(trio.BrokenResourceError, match="No space left"):
            await transcript.write_messages([user("later")])
    loaded = load_transcript(path)
    assert loaded.whole
    assert loaded.messages == (user("ok"),)


async def test_a_failing_sink_ends_the_run_with_agent_run_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_space(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    model = ScriptedModel([reply("done")])
    async with JsonlTranscript(tmp_path / "run.jsonl") as transcript:
        assert transcript.write_error is None
        monkeypatch.setattr(os, "write", no_space)
        with pytest.raises(AgentRunError) as info:
            await run_agent_loop(prompt(), ctx(), model, on_event=transcript)
        monkeypatch.undo()
    assert isinstance(info.value.__cause__, OSError)
    # The sink's own failure, told apart from a hook's: the run's cause is its error.
    assert transcript.write_error is info.value.__cause__


async def test_a_new_file_whose_header_cannot_be_written_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_space(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    path = tmp_path / "run.jsonl"
    monkeypatch.setattr(os, "write", no_space)
    with pytest.raises(OSError, match="No space left"):
        async with JsonlTranscript(path):
            pass
    assert not path.exists()  # no empty file left that would not load
    path.write_bytes(b"")  # a file that was there before is not entering's to remove
    with pytest.raises(OSError, match="No space left"):
        async with JsonlTranscript(path):
            pass
    monkeypatch.undo()
    assert path.read_bytes() == b""


async def test_a_message_that_is_not_json_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    bad = ToolResultMessage(
        tool_call_id="c", tool_name="t", content=(), details=object(), timestamp=1.0
    )
    async with JsonlTranscript(path) as transcript:
        with pytest.raises(TypeError):
            await transcript.write_messages([user("a"), bad])
        await transcript.write_messages([user("b")])  # still usable
    assert load_transcript(path).messages == (user("b"),)


async def test_a_slow_disk_does_not_block_the_trio_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write runs in a worker thread: other tasks keep running meanwhile."""
    path = tmp_path / "run.jsonl"
    ticks = 0
    real_write = os.write

    def slow_write(fd: int, data: Any) -> int:
        time.sleep(0.2)
        return real_write(fd, data)

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.sleep(0.005)

    async with JsonlTranscript(path, fsync=False) as transcript, trio.open_nursery() as n:
        n.start_soon(ticker)
        monkeypatch.setattr(os, "write", slow_write)
        await transcript.write_messages([user("slow")])
        monkeypatch.undo()
        n.cancel_scope.cancel()
    assert ticks >= 5
    assert load_transcript(path).messages == (user("slow"),)


# --- reopening a file a crash left behind ---------------------------------------------


async def test_reopen_cuts_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    whole = file_text(sample()[:2])
    path.write_bytes(whole + b'{"role":"tool_res')
    async with JsonlTranscript(path) as transcript:
        assert transcript.dropped_bytes == len(b'{"role":"tool_res')
        await transcript.write_messages(sample()[2:3])
    assert path.read_bytes() == file_text(sample()[:3])


async def test_reopen_completes_a_last_line_without_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_bytes(file_text(sample()[:2])[:-1])
    async with JsonlTranscript(path) as transcript:
        assert transcript.dropped_bytes == 0
        await transcript.write_messages(sample()[2:3])
    assert path.read_bytes() == file_text(sample()[:3])


@pytest.mark.parametrize("size", [0, 1, 10, len(HEADER_LINE) - 1])
async def test_reopen_a_torn_or_missing_header(tmp_path: Path, size: int) -> None:
    path = tmp_path / "run.jsonl"
    path.write_bytes(HEADER_LINE[:size])
    async with JsonlTranscript(path) as transcript:
        await transcript.write_messages([user("a")])
    assert path.read_bytes() == file_text([user("a")])


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"hello world\n", "no transcript header"),
        (b'{"format":"trio-agent-transcript","version":2}\n', "version 2 is not supported"),
        (b"\xff\xfe\n", "not UTF-8"),
        (HEADER_LINE + b'{"role":"nobody"}\n', r"last line: unknown role 'nobody'"),
    ],
)
async def test_reopen_refuses_a_file_that_is_not_a_transcript(
    tmp_path: Path, content: bytes, match: str
) -> None:
    path = tmp_path / "run.jsonl"
    path.write_bytes(content)
    with pytest.raises(TranscriptFormatError, match=match):
        async with JsonlTranscript(path):
            pass  # pragma: no cover
    assert path.read_bytes() == content  # untouched


def test_every_cut_of_a_file_loads_as_a_prefix(tmp_path: Path) -> None:
    """What a crash can leave: the file cut at any byte. Never an error past the header;
    the messages are a prefix; a torn last line is reported."""
    messages = sample()
    full = file_text(messages)
    ends = [len(HEADER_LINE)]
    for m in messages:
        ends.append(ends[-1] + len((message_to_json(m) + "\n").encode()))
    path = tmp_path / "cut.jsonl"
    for cut in range(len(full) + 1):
        path.write_bytes(full[:cut])
        if cut < len(HEADER_LINE) - 1:
            with pytest.raises(TranscriptFormatError) as info:
                load_transcript(path)
            assert info.value.line == 1
            continue
        loaded = load_transcript(path)
        whole = sum(end <= cut + 1 for end in ends[1:])  # a line may lack its newline
        assert loaded.messages == tuple(messages[:whole]), cut
        assert loaded.whole == (cut + 1 in ends or cut in ends), cut
        if not loaded.whole:
            assert loaded.torn_line == whole + 2


async def test_appending_after_any_cut_gives_a_whole_file(  # noqa: ASYNC910
    tmp_path: Path,
) -> None:
    messages = sample()
    full = file_text(messages)
    path = tmp_path / "cut.jsonl"
    extra = user("after the crash", t=9.0)
    for cut in range(0, len(full) + 1, 3):
        path.write_bytes(full[:cut])
        async with JsonlTranscript(path, fsync=False) as transcript:
            await transcript.write_messages([extra])
        loaded = load_transcript(path)
        assert loaded.whole, cut
        assert loaded.messages[-1] == extra
        assert loaded.messages[:-1] == tuple(messages[: len(loaded.messages) - 1])


# --- load_transcript: bad files -------------------------------------------------------


def write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    return path


def test_load_torn_last_line(tmp_path: Path) -> None:
    path = write(tmp_path, file_text(sample()[:3]) + b'{"role":"tool_result","tool_ca')
    loaded = load_transcript(path)
    assert loaded.messages == tuple(sample()[:3])
    assert loaded.torn_line == 5
    assert loaded.torn_reason is not None
    assert "malformed JSON" in loaded.torn_reason


def test_load_torn_last_line_of_zero_bytes_with_newline(tmp_path: Path) -> None:
    """After a power loss a file can end in a block of NUL bytes."""
    path = write(tmp_path, file_text(sample()[:2]) + b"\x00" * 50 + b"\n")
    loaded = load_transcript(path)
    assert (loaded.messages, loaded.torn_line) == (tuple(sample()[:2]), 4)


def test_load_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    path = write(tmp_path, file_text(sample())[:-1])
    assert load_transcript(path) == LoadedTranscript(messages=tuple(sample()))


def test_load_header_only(tmp_path: Path) -> None:
    assert load_transcript(write(tmp_path, HEADER_LINE)).messages == ()


def test_load_non_utf8_last_line_is_torn(tmp_path: Path) -> None:
    # A crash can cut a line inside a multi-byte character.
    cut = (message_to_json(user("你好")) + "\n").encode()
    cut = cut[: cut.index("你".encode()) + 1]
    loaded = load_transcript(write(tmp_path, file_text(sample()[:1]) + cut))
    assert (loaded.messages, loaded.torn_line) == (tuple(sample()[:1]), 3)
    assert loaded.torn_reason is not None
    assert "not UTF-8" in loaded.torn_reason


def _load_error(path: Path) -> TranscriptFormatError:
    with pytest.raises(TranscriptFormatError) as info:
        load_transcript(path)
    err = info.value
    # A clear error of ours, never a chained traceback from inside cattrs or json.
    assert err.__cause__ is None
    assert err.__context__ is None or err.__suppress_context__
    return err


def test_load_corrupt_middle_line(tmp_path: Path) -> None:
    lines = file_text(sample()).split(b"\n")
    lines[2] = lines[2][:30]  # message 2 (line 3) cut short, in the middle of the file
    err = _load_error(write(tmp_path, b"\n".join(lines)))
    assert err.line == 3
    assert str(err).startswith(f"{tmp_path / 't.jsonl'}:3: malformed JSON")


def test_load_bad_field_names_the_line_and_the_path(tmp_path: Path) -> None:
    data = json.loads(message_to_json(sample()[1]))
    data["content"][2]["type"] = "tool_kall"
    lines = file_text(sample()).split(b"\n")
    lines[2] = json.dumps(data).encode()
    err = _load_error(write(tmp_path, b"\n".join(lines)))
    assert (err.line, err.path) == (3, "$.content[2].type")
    assert ":3: unknown type 'tool_kall'" in str(err)


def test_load_bad_value_type(tmp_path: Path) -> None:
    data = json.loads(message_to_json(sample()[2]))
    data["is_error"] = "false"
    err = _load_error(write(tmp_path, file_text(sample()[:2]) + json.dumps(data).encode()))
    # Also on the last line: well-formed JSON that is not a message is not a torn line.
    assert (err.line, err.path) == (4, "$.is_error")
    assert "expected true or false" in str(err)


def test_load_non_utf8_middle_line(tmp_path: Path) -> None:
    lines = file_text(sample()).split(b"\n")
    lines[3] = lines[3].replace(b"contents", b"cont\xffents")
    err = _load_error(write(tmp_path, b"\n".join(lines)))
    assert err.line == 4
    assert "not UTF-8 text" in str(err)
    assert "0xff" in str(err)


def test_load_blank_middle_line(tmp_path: Path) -> None:
    lines = file_text(sample()).split(b"\n")
    lines.insert(2, b"")
    err = _load_error(write(tmp_path, b"\n".join(lines)))
    assert err.line == 3
    assert "blank line" in str(err)


@pytest.mark.parametrize(
    ("header", "match"),
    [
        (b'{"format":"trio-agent-transcript","version":2}', "version 2 is not supported"),
        (b'{"format":"trio-agent-transcript","version":"1"}', "no integer version"),
        (b'{"format":"trio-agent-transcript"}', "no integer version"),
        (b'{"format":"other-tool","version":1}', "not a trio-agent transcript"),
        (b"[1,2,3]", "not a trio-agent transcript"),
        (message_to_json(user("no header")).encode(), "not a trio-agent transcript"),
        (b"\xff\xfe{}", "not UTF-8"),
    ],
)
def test_load_bad_header(tmp_path: Path, header: bytes, match: str) -> None:
    err = _load_error(write(tmp_path, header + b"\n" + file_text(sample())[len(HEADER_LINE) :]))
    assert err.line == 1
    assert match in str(err)


def test_load_unknown_version_says_which(tmp_path: Path) -> None:
    err = _load_error(write(tmp_path, b'{"format":"trio-agent-transcript","version":7}\n'))
    assert err.path == "$.version"
    assert "this trio-agent reads version 1" in str(err)


def test_load_empty_file(tmp_path: Path) -> None:
    err = _load_error(write(tmp_path, b""))
    assert err.line == 1
    assert "empty file" in str(err)


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_transcript(tmp_path / "nope.jsonl")


def test_loaded_line_numbers() -> None:
    assert LoadedTranscript(messages=()).line_of(0) == 2
    with_markers = LoadedTranscript(
        messages=(), markers=(Marker(kind="a", data={}, at=0), Marker(kind="b", data={}, at=1))
    )
    assert [with_markers.line_of(i) for i in range(3)] == [3, 5, 6]


# --- marker lines ------------------------------------------------------------------------


async def test_marker_lines_are_kept_apart_from_the_messages(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    msgs = sample()
    async with JsonlTranscript(path) as transcript:
        await transcript.write_marker("first", {"n": 0})
        await transcript.write_messages(msgs[:2])
        await transcript.write_marker("compaction", {"before": 10, "ids": ["c1"]})
        await transcript.write_marker("timings", {"t": [0.5, 1.25]})
        await transcript.write_messages(msgs[2:])
    loaded = load_transcript(path)
    assert loaded.messages == tuple(msgs)
    assert loaded.markers == (
        Marker(kind="first", data={"n": 0}, at=0),
        Marker(kind="compaction", data={"before": 10, "ids": ["c1"]}, at=2),
        Marker(kind="timings", data={"t": [0.5, 1.25]}, at=2),
    )
    assert loaded.markers_of("timings") == (loaded.markers[2],)
    lines = path.read_bytes().splitlines()
    assert json.loads(lines[5]) == {"marker": "timings", "data": {"t": [0.5, 1.25]}}
    assert loaded.line_of(2) == 7  # after the header, a marker, two messages, two markers
    # The file keeps growing after a marker: it is reopened and appended to.
    async with JsonlTranscript(path) as transcript:
        await transcript.write_marker("last", {})
    assert load_transcript(path).markers[-1] == Marker(kind="last", data={}, at=len(msgs))


async def test_a_torn_marker_line_is_dropped_like_a_torn_message(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    async with JsonlTranscript(path) as transcript:
        await transcript.write_messages(sample()[:1])
        await transcript.write_marker("m", {"x": "y" * 100})
    whole = path.read_bytes()
    path.write_bytes(whole[:-20])
    loaded = load_transcript(path)
    assert (loaded.markers, loaded.torn_line) == ((), 3)
    async with JsonlTranscript(path) as transcript:  # reopening cuts it off
        assert transcript.dropped_bytes > 0
    assert load_transcript(path).whole


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ('{"marker":"","data":{}}', r"t.jsonl:2: \$.marker: expected a non-empty string"),
        ('{"marker":3,"data":{}}', r"\$.marker"),
        ('{"marker":"m","data":[1]}', r"t.jsonl:2: \$.data: expected a JSON object"),
        ('{"marker":"m","data":{},"x":1}', r"unexpected keys \['x'\]"),
    ],
)
def test_a_malformed_marker_line_is_a_format_error(tmp_path: Path, line: str, match: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(HEADER_LINE + line.encode() + b"\n" + file_text(sample())[len(HEADER_LINE) :])
    with pytest.raises(TranscriptFormatError, match=match) as info:
        load_transcript(path)
    assert info.value.line == 2


async def test_write_marker_refuses_what_is_not_json_and_writes_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.jsonl"
    async with JsonlTranscript(path) as transcript:
        with pytest.raises(TypeError, match="marker data is not JSON"):
            await transcript.write_marker("m", {"x": object()})
        with pytest.raises(TypeError, match="marker kind"):
            await transcript.write_marker("", {})
        with pytest.raises(TypeError, match="a mapping"):
            await transcript.write_marker("m", [1])  # type: ignore[arg-type]
    assert path.read_bytes() == HEADER_LINE


def test_carry_markers_keeps_each_after_the_message_it_followed() -> None:
    c1, c2 = call("c1"), call("c2")
    reply = assistant(c1, c2)
    old = [user("go"), reply, result("c1"), assistant(text="late")]
    new = list(repair(old))  # c2's aborted result inserted after c1's
    assert len(new) == 5
    markers = [Marker(kind=k, data={}, at=at) for k, at in (("s", 0), ("a", 2), ("b", 3), ("e", 4))]
    carried = carry_markers(old, new, markers)
    assert [(m.kind, m.at) for m in carried] == [("s", 0), ("a", 2), ("b", 3), ("e", 5)]
    assert carry_markers(old, old, markers) == tuple(markers)
    with pytest.raises(ValueError, match="every old message in order"):
        carry_markers(old, list(reversed(new)), markers)


def test_write_transcript_keeps_markers_in_place(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    msgs = sample()
    markers = (
        Marker(kind="end", data={}, at=len(msgs)),
        Marker(kind="a", data={"i": 1}, at=1),
        Marker(kind="b", data={"i": 2}, at=1),
        Marker(kind="start", data={}, at=0),
    )
    write_transcript(path, msgs, markers=markers)
    loaded = load_transcript(path)
    assert loaded.messages == tuple(msgs)
    assert loaded.markers == (markers[3], markers[1], markers[2], markers[0])
    write_transcript(path, loaded.messages, markers=loaded.markers)  # a round trip
    assert load_transcript(path) == loaded
    with pytest.raises(ValueError, match="outside the 6 messages"):
        write_transcript(path, msgs, markers=[Marker(kind="x", data={}, at=7)])
    assert load_transcript(path) == loaded  # nothing written


# --- write_transcript and the long round trip ------------------------------------------


def test_write_transcript_replaces_atomically(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"old content that is not a transcript")
    write_transcript(path, sample())
    assert path.read_bytes() == file_text(sample())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]  # no temporary left
    with pytest.raises(TypeError):
        write_transcript(
            path, [ToolResultMessage(tool_call_id="c", tool_name="t", content=(), details=object())]
        )
    assert path.read_bytes() == file_text(sample())  # unchanged
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]


def long_transcript(n: int) -> list[Message]:
    out: list[Message] = [user("start", t=0.0)]
    i = 0
    while len(out) < n:
        ids = [f"call-{i}-{k}" for k in range(3)]
        out.append(
            AssistantMessage(
                content=(Text(text=f"step {i}: " + "x" * 40), *(call(c, n=i) for c in ids)),
                stop_reason="tool_use",
                timestamp=float(i),
            )
        )
        out.extend(result(c, f"result of {c} " + "y" * 60, t=float(i)) for c in ids)
        i += 1
    out = out[:n]
    while type(out[-1]) is not ToolResultMessage or out[-1].tool_call_id[-1] != "2":
        out.pop()
    return out


async def test_round_trip_of_ten_thousand_messages(tmp_path: Path) -> None:
    messages = long_transcript(10_001)
    assert len(messages) == 10_001
    path = tmp_path / "long.jsonl"
    async with JsonlTranscript(path) as transcript:
        await transcript.write_messages(messages[:5000])
        for m in messages[5000:5100]:
            await transcript.write_event(MessageEnd(message=m))
        await transcript.write_messages(messages[5100:])
    loaded = await trio.to_thread.run_sync(load_transcript, path)
    assert loaded.whole
    assert loaded.messages == tuple(messages)
    check_transcript(loaded.messages)


# --- repair -----------------------------------------------------------------------------

C = [call(f"c{i}") for i in range(1, 4)]


def recovered(m: Message) -> bool:
    return (
        type(m) is ToolResultMessage
        and isinstance(m.details, Mapping)
        and m.details.get("recovered") is True
    )


def test_repair_the_tail_of_a_crashed_batch() -> None:
    messages = [user("go"), assistant(*C), result("c1")]
    repaired = repair(messages, timestamp=42.0)
    check_transcript(repaired)
    assert repaired[:3] == tuple(messages)
    added = repaired[3:]
    assert [m.tool_call_id for m in added] == ["c2", "c3"]  # type: ignore[union-attr]
    for m in added:
        assert type(m) is ToolResultMessage
        assert recovered(m)
        assert m.is_error
        assert m.tool_name == "probe"
        assert m.timestamp == 42.0
        assert "aborted" in m.text
        assert m.details["outcome"] == "aborted"
        assert "added on recovery" in m.details["note"]


def test_repair_merges_by_declaration_order() -> None:
    messages = [user("go"), assistant(*C), result("c2"), user("next")]
    repaired = repair(messages)
    check_transcript(repaired)
    ids = [m.tool_call_id for m in repaired if type(m) is ToolResultMessage]
    assert ids == ["c1", "c2", "c3"]
    assert repaired[-1] == user("next")


def test_repair_in_the_middle_and_at_the_end() -> None:
    messages = [user("go"), assistant(C[0]), user("again"), assistant(C[1], C[2], t=3.0)]
    repaired = repair(messages)
    check_transcript(repaired)
    assert [m.role for m in repaired] == [
        "user",
        "assistant",
        "tool_result",
        "user",
        "assistant",
        "tool_result",
        "tool_result",
    ]


def test_repair_leaves_a_paired_transcript_alone() -> None:
    messages = [user("go"), assistant(*C), *(result(c.id) for c in C), assistant(text="ok")]
    assert repair(messages) == tuple(messages)
    assert repair([]) == ()


def test_repair_adds_only_missing_results() -> None:
    """A misplaced result is not missing: repair adds nothing for it, and the checker
    still reports it; duplicate ids get one result per distinct id."""
    misplaced = [user("go"), assistant(C[0]), user("x"), result("c1")]
    assert repair(misplaced) == tuple(misplaced)
    assert transcript_violations(repair(misplaced))

    dup = [user("go"), assistant(C[0], C[0])]
    repaired = repair(dup)
    assert len(repaired) == 3
    assert [v for v in transcript_violations(repaired) if "duplicate" not in v] == []

    redeclared = [user("go"), assistant(C[0]), user("x"), assistant(C[0], t=4.0)]
    assert sum(recovered(m) for m in repair(redeclared)) == 1


async def test_a_repaired_transcript_resumes() -> None:
    messages = [user("go"), assistant(*C)]
    repaired = repair(messages)
    model = ScriptedModel([reply("resumed")])
    with trio.fail_after(GUARD):
        res = await run_agent_loop(
            [], Context(messages=repaired, tools=(sleeper("probe", 0),)), model
        )
    assert res.reason == "stop"
    check_transcript(res.transcript)
    # The model saw the recovered results.
    sent = model.requests[0].messages
    assert [m.role for m in sent][-3:] == ["tool_result"] * 3


async def test_agent_subscription_records_and_continue_resumes(tmp_path: Path) -> None:
    """The Agent: a subscriber writes the transcript; after a crash mid-batch, load,
    repair and rewrite it, and ``continue_()`` finishes the run into the same file."""
    path = tmp_path / "run.jsonl"
    write_transcript(path, [user("go"), assistant(*C)])  # what a kill mid-batch leaves
    repaired = repair(load_transcript(path).messages)
    write_transcript(path, repaired)
    model = ScriptedModel([reply("resumed")])
    with trio.fail_after(GUARD):
        async with (
            JsonlTranscript(path) as transcript,
            open_agent(model, tools=(sleeper("probe", 0),), messages=repaired) as agent,
            trio.open_nursery() as nursery,
        ):
            subscribed = trio.Event()

            async def record() -> None:
                async with agent.subscribe() as events:
                    subscribed.set()
                    async for event in events:
                        await transcript(event)

            nursery.start_soon(record)
            await subscribed.wait()
            res = await agent.continue_()
            # Every MessageEnd was written before AgentEnd was taken.
            nursery.cancel_scope.cancel()
    assert res.reason == "stop"
    loaded = load_transcript(path)
    assert loaded.messages == repaired + res.messages
    check_transcript(loaded.messages)


@st.composite
def crashed_transcripts(draw: st.DrawFn) -> tuple[list[Message], list[Message]]:
    """A paired transcript, and a copy with some results removed."""
    full: list[Message] = [user("go")]
    n = 0
    for turn in range(draw(st.integers(0, 5))):
        ids = [f"t{turn}c{k}" for k in range(draw(st.integers(0, 4)))]
        n += 1
        full.append(assistant(*(call(i) for i in ids), text="t", t=float(n)))
        full.extend(result(i) for i in ids)
        if draw(st.booleans()):
            full.append(user(f"u{turn}"))
    keep = [type(m) is not ToolResultMessage or draw(st.booleans()) for m in full]
    return full, [m for m, k in zip(full, keep, strict=True) if k]


@given(crashed_transcripts())
def test_repair_restores_pairing(case: tuple[list[Message], list[Message]]) -> None:
    full, damaged = case
    repaired = repair(damaged)
    assert transcript_violations(repaired) == []
    assert [m for m in repaired if not recovered(m)] == damaged  # only additions

    # Each result sits where the original had one.
    def key(m: Message) -> Any:
        return m.tool_call_id if type(m) is ToolResultMessage else m

    assert [key(m) for m in repaired] == [key(m) for m in full]


# --- any string the loop can emit is written and read back ---------------------------

# os.fsdecode of a Latin-1 file name, a lone high and a lone low half of a UTF-16 pair,
# and a whole emoji: what tools and streams can put into a message.
ODD = os.fsdecode(b"caf\xe9.txt") + " \ud83d high alone, \ude00 low alone, 😀 whole"


def odd_messages() -> list[Message]:
    return [
        user(ODD),
        AssistantMessage(
            content=(Thinking(thinking=ODD), Text(text=ODD), call("c\udce9", path=ODD)),
            stop_reason="tool_use",
            model="m\udce9",
            timestamp=2.0,
        ),
        ToolResultMessage(
            tool_call_id="c\udce9",
            tool_name="probe",
            content=(Text(text=ODD),),
            details={ODD: [ODD]},
            timestamp=3.0,
        ),
        CustomMessage(kind="note", content=ODD, timestamp=4.0),
    ]


def test_lone_surrogates_are_written_as_escapes_and_read_back(tmp_path: Path) -> None:
    assert ODD.startswith("caf\udce9.txt")
    messages = odd_messages()
    path = tmp_path / "odd.jsonl"
    write_transcript(path, messages)
    raw = path.read_bytes()
    text = raw.decode("utf-8")  # valid UTF-8 throughout
    # Visible and lossless: the undecodable byte shows as its escape, other text as is.
    assert "caf\\udce9.txt" in text
    assert "\\ud83d high alone, \\ude00 low alone, 😀 whole" in text
    assert load_transcript(path).messages == tuple(messages)
    assert loads(dumps(messages).encode("utf-8")) == tuple(messages)


async def test_a_sink_writes_a_result_holding_an_undecodable_file_name(tmp_path: Path) -> None:
    """A tool listing a file whose name is not UTF-8: the run ends normally and the
    whole transcript is on disk (it used to die in the sink, the result never written)."""

    async def listing(call: ToolCall, args: Mapping[str, Any], ctx: Any) -> str:
        await trio.lowlevel.checkpoint()
        return os.fsdecode(b"caf\xe9.txt")

    path = tmp_path / "run.jsonl"
    model = ScriptedModel([tool_use(call("c1")), reply("saw caf\udce9.txt")])
    with trio.fail_after(GUARD):
        async with JsonlTranscript(path) as transcript:
            res = await run_agent_loop(
                prompt(), ctx(make_tool("probe", listing)), model, on_event=transcript
            )
    assert res.reason == "stop"
    assert res.messages[2].content == (Text(text="caf\udce9.txt"),)  # type: ignore[union-attr]
    assert load_transcript(path).messages == res.messages


async def test_a_pair_split_across_deltas_is_joined_in_a_partial_reply(tmp_path: Path) -> None:
    """A model sends an emoji's two UTF-16 halves as separate deltas, then the stream
    dies: the partial reply kept by the loop holds the real emoji, and it is written."""
    events = [
        Start(),
        TextStart(index=0),
        TextDelta(index=0, delta="smile \ud83d"),
        TextDelta(index=0, delta="\ude00!"),
    ]
    path = tmp_path / "run.jsonl"
    with trio.fail_after(GUARD):
        async with JsonlTranscript(path) as transcript:
            res = await run_agent_loop(
                prompt(), ctx(), ScriptedModel([events]), on_event=transcript
            )
    reply_message = res.messages[-1]
    assert isinstance(reply_message, AssistantMessage)
    assert reply_message.stop_reason == "error"
    assert reply_message.content == (Text(text="smile 😀!"),)
    assert load_transcript(path).messages == res.messages


@settings(deadline=None)
@given(batch=st.lists(messages(), max_size=6))
async def test_any_generated_message_is_written_and_read_back(batch: list[Message]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "t.jsonl")
        async with JsonlTranscript(path, fsync=False) as transcript:
            await transcript.write_messages(batch[:2])
            for message in batch[2:]:
                await transcript.write_event(MessageEnd(message=message))
        assert load_transcript(path).messages == tuple(batch)
        write_transcript(path, batch, fsync=False)
        assert load_transcript(path).messages == tuple(batch)
    assert loads(dumps(batch).encode("utf-8")) == tuple(batch)


# --- write_transcript and an open writer ------------------------------------------------


def names_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


async def test_write_transcript_is_refused_while_a_writer_has_the_file(tmp_path: Path) -> None:
    """Rewriting a file a JsonlTranscript still appends to would send its later lines to
    the replaced file: refused, naming the path, and nothing is lost."""
    path = tmp_path / "run.jsonl"
    first, later = user("first"), user("later")
    async with JsonlTranscript(path) as transcript:
        await transcript.write_messages([first])
        with pytest.raises(AgentUsageError, match=re.escape(str(path))) as info:
            await trio.to_thread.run_sync(write_transcript, path, [user("replacement")])
        assert "close that one first" in str(info.value)
        await transcript.write_messages([later])
    assert load_transcript(path).messages == (first, later)
    assert names_in(tmp_path) == ["run.jsonl"]  # no temporary left
    # Once the writer is closed, the rewrite goes ahead.
    write_transcript(path, [user("replacement")])
    assert load_transcript(path).messages == (user("replacement"),)


async def test_write_transcript_creates_a_missing_file_under_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "new.jsonl"
    with pytest.raises(TypeError):
        write_transcript(path, [CustomMessage(kind="x", content=object(), timestamp=1.0)])
    assert not path.exists()  # nothing written, nothing created
    write_transcript(path, [user("a")])
    async with JsonlTranscript(path) as transcript:
        await transcript.write_messages([user("b")])
    assert load_transcript(path).messages == (user("a"), user("b"))


def test_a_writer_opening_a_replaced_file_opens_the_new_one(tmp_path: Path) -> None:
    """Between opening and locking, the file was renamed over: the writer must not
    append to the old, unlinked file."""
    path = tmp_path / "run.jsonl"
    write_transcript(path, [user("old")])
    real_lock = _locked_file._lock_file
    replaced = False

    def lock_after_a_rewrite(fd: int, where: Path) -> None:
        nonlocal replaced
        if not replaced:
            replaced = True
            write_transcript(path, [user("new")])
        real_lock(fd, where)

    async def append() -> None:
        async with JsonlTranscript(path) as transcript:
            await transcript.write_messages([user("appended")])

    _locked_file._lock_file = lock_after_a_rewrite  # type: ignore[assignment]
    try:
        trio.run(append)
    finally:
        _locked_file._lock_file = real_lock  # type: ignore[assignment]
    assert replaced
    assert load_transcript(path).messages == (user("new"), user("appended"))


# --- memory -------------------------------------------------------------------------------

_PEAK_CHILD = """
import json, resource, sys
from trio_agent import load_transcript
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
loaded = load_transcript(sys.argv[1])
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"messages": len(loaded.messages), "growth_kib": after - before}))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss is in KiB on Linux")
def test_load_transcript_peak_memory_stays_near_the_messages(tmp_path: Path) -> None:
    """Reading ~57 MB of transcript: the peak grows by about the messages themselves
    (they hold the text), not by copies of the whole file (it used to be 3-4x)."""
    path = tmp_path / "big.jsonl"
    line = (message_to_json(user("x" * 20_000)) + "\n").encode()
    count = 3000
    with open(path, "wb") as f:
        f.write(HEADER_LINE)
        for _ in range(count):
            f.write(line)
    size = path.stat().st_size
    out = subprocess.run(
        [sys.executable, "-c", _PEAK_CHILD, str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    report = json.loads(out.stdout)
    assert report["messages"] == count
    ratio = report["growth_kib"] * 1024 / size
    assert ratio < 2.0, f"peak grew by {ratio:.2f}x the file size"


# --- JSON nested too deeply: a format error naming the line, in every reader -----------


def nested(depth: int) -> str:
    """An object holding arrays nested so that the whole value is ``depth`` deep."""
    return '{"a":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def test_parse_json_refuses_what_nests_deeper_than_the_limit() -> None:
    assert parse_json(nested(MAX_JSON_DEPTH)) == json.loads(nested(MAX_JSON_DEPTH))
    assert parse_json(nested(MAX_JSON_DEPTH).encode()) == json.loads(nested(MAX_JSON_DEPTH))
    for text in (nested(MAX_JSON_DEPTH + 1), "[" * 100_000, "[" * 100_000 + "]" * 100_000):
        with pytest.raises(JsonTooDeep, match=f"nested deeper than {MAX_JSON_DEPTH} levels"):
            parse_json(text)
        with pytest.raises(JsonTooDeep):
            parse_json(text.encode())
    # Many brackets side by side are not deep.
    wide = "[" + ",".join(["[]"] * 10_000) + "]"
    assert len(parse_json(wide)) == 10_000


HEADERS = {
    "check": HEADER_LINE.decode(),
    "replay": '{"format":"trio-agent-cassette","version":1}\n',
    "fleet": "",
}


@pytest.mark.parametrize("line", ["[" * 100_000, nested(MAX_JSON_DEPTH + 1)])
@pytest.mark.parametrize("command", ["check", "replay", "fleet"])
def test_deeply_nested_json_is_a_one_line_error_in_every_command(
    tmp_path: Path, command: str, line: str
) -> None:
    """Before, the parser's RecursionError ended each command in a traceback. As the
    last line too: a crash never leaves such a line, so it is not a torn tail."""
    path = tmp_path / f"{command}.jsonl"
    path.write_text(HEADERS[command] + line + "\n")
    argv = [sys.executable, "-m", "trio_agent.cli", command, str(path)]
    if command == "fleet":
        argv += ["--factory", "trio_agent.fleet:demo_factory", "--out", str(tmp_path / "out")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    number = 1 if command == "fleet" else 2
    too_deep = f"arrays and objects nested deeper than {MAX_JSON_DEPTH} levels"
    if command == "fleet":
        assert done.returncode == 2
        assert done.stderr == (
            f"trio-agent fleet: cannot read the tasks: {path}:{number}: not JSON ({too_deep})\n"
        )
    else:
        assert done.returncode == 1
        assert done.stderr == (
            f"{path}:{number}: malformed JSON: {too_deep}\n{path}: does not load\n"
        )
    assert done.stdout == ""
    assert not (tmp_path / "out").exists()


def test_a_too_deep_last_line_is_not_cut_off_as_torn(tmp_path: Path) -> None:
    path = write(tmp_path, file_text(sample()) + b"[" * 5000)
    with pytest.raises(TranscriptFormatError, match=f":{len(sample()) + 2}: malformed JSON: arr"):
        load_transcript(path)

    async def reopen() -> None:
        async with JsonlTranscript(path):
            pass

    with pytest.raises(TranscriptFormatError, match="last line: malformed JSON: arrays"):
        trio.run(reopen)
    assert path.read_bytes().endswith(b"[" * 5000)
