"""One versioned-JSONL format under transcripts, cassettes and fleet results: the same
header rule, the same torn tail, the same cut-back of a failed write, for all three."""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest

from trio_agent import UserMessage, load_transcript, write_transcript
from trio_agent._store import NO_HEADER, AppendFile, HeaderError, JsonLines, LineFormat
from trio_agent._store._jsonl import TRANSCRIPT
from trio_agent.fleet import demo_factory, demo_tasks, run_fleet
from trio_agent.replay import load_cassette
from trio_agent.replay._cassette import CASSETTE, write_records

FIXTURE_CASSETTE = Path(__file__).resolve().parent.parent / "data" / "cassette_v1.jsonl"

FORMATS = [
    pytest.param(TRANSCRIPT, id="transcript"),
    pytest.param(CASSETTE, id="cassette"),
    pytest.param(NO_HEADER, id="no header"),
]


def _lines(*values: object) -> bytes:
    return b"".join(json.dumps(v).encode() + b"\n" for v in values)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_torn_tail_is_cut_when_the_file_is_opened_to_append(
    tmp_path: Path, fmt: LineFormat
) -> None:
    path = tmp_path / "f.jsonl"
    whole = fmt.header_line + _lines({"a": 1}, {"b": 2})
    path.write_bytes(whole + b'{"c": 3, "d"')  # a write cut short by a crash
    file, last = AppendFile.open(path, fmt)
    try:
        assert (last, file.size, file.dropped_bytes) == (None, len(whole), 12)
        file.append(_lines({"e": 5}), sync=True)
    finally:
        file.close()
    assert path.read_bytes() == whole + _lines({"e": 5})


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_whole_last_line_that_lost_its_newline_is_kept_and_ended(
    tmp_path: Path, fmt: LineFormat
) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(fmt.header_line + b'{"a": 1}')
    file, last = AppendFile.open(path, fmt)
    file.append(_lines({"b": 2}), sync=False)
    file.close()
    assert last == {"a": 1}
    assert path.read_bytes() == fmt.header_line + _lines({"a": 1}, {"b": 2})
    with path.open("rb") as f:
        fmt.read_first_line(f)
        first = 2 if fmt.name else 1
        assert list(JsonLines(f, "f", first_line=first)) == [
            (first, {"a": 1}),
            (first + 1, {"b": 2}),
        ]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_failed_write_is_cut_back_and_the_file_takes_no_more(
    tmp_path: Path, fmt: LineFormat, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f.jsonl"
    file, _ = AppendFile.open(path, fmt)
    file.append(_lines({"a": 1}), sync=False)
    before = path.read_bytes()
    real_write = os.write

    def half_then_full(fd: int, data: bytes | memoryview) -> int:
        if len(data) > 4:
            return real_write(fd, bytes(data)[:4])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(OSError, match="No space left"):
        file.append(_lines({"b": 2}), sync=False)
    monkeypatch.undo()
    file.close()
    assert isinstance(file.broken, OSError)
    assert path.read_bytes() == before


def test_a_header_cut_short_is_started_over_and_a_foreign_one_refused(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(CASSETTE.header_line[:10])
    file, last = AppendFile.open(path, CASSETTE)
    file.close()
    assert (last, path.read_bytes()) == (None, CASSETTE.header_line)
    path.write_bytes(TRANSCRIPT.header_line)
    with pytest.raises(HeaderError) as info:
        AppendFile.open(path, CASSETTE)
    assert info.value.kind == "foreign"
    assert path.read_bytes() == TRANSCRIPT.header_line  # left as it was


def test_a_cassette_appended_to_after_a_crash_loads(tmp_path: Path) -> None:
    # A record torn by a crash, then more records appended: the torn one is cut off
    # first, so each record stays on a line of its own.
    path = tmp_path / "c.jsonl"
    shutil.copy(FIXTURE_CASSETTE, path)
    records = load_cassette(path).records
    whole = path.read_bytes()
    path.write_bytes(whole + whole.splitlines(keepends=True)[1][:40])
    write_records(path, records[:1], truncate=False)
    loaded = load_cassette(path)
    assert loaded.torn_line is None
    assert loaded.records == tuple(sorted((*records, records[0]), key=lambda r: r.index))


def test_a_transcript_reopened_after_a_crash_keeps_a_whole_last_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_transcript(path, [UserMessage.text("a"), UserMessage.text("b")])
    path.write_bytes(path.read_bytes().removesuffix(b"\n"))
    file, last = AppendFile.open(path, TRANSCRIPT)
    file.close()
    assert last["role"] == "user"
    assert load_transcript(path).messages == tuple(
        UserMessage.text(t, timestamp=m.timestamp)
        for t, m in zip("ab", load_transcript(path).messages, strict=True)
    )


async def test_a_results_line_that_lost_only_its_newline_counts(tmp_path: Path) -> None:
    # The fleet reads results.jsonl by the rule every versioned JSONL file follows: a
    # whole line is kept, with or without its newline, so its task is not run again.
    await run_fleet(demo_tasks(3, sleep=0), demo_factory, out=tmp_path, fsync=False)
    results = tmp_path / "results.jsonl"
    results.write_bytes(results.read_bytes().removesuffix(b"\n"))
    summary = await run_fleet(demo_tasks(3, sleep=0), demo_factory, out=tmp_path, fsync=False)
    assert (summary.skipped, summary.done) == (3, 0)
    assert results.read_bytes().endswith(b"}\n")
    assert len(results.read_bytes().splitlines()) == 3


async def test_a_last_results_line_that_is_json_but_no_result_is_an_error(tmp_path: Path) -> None:
    # A crash cannot write whole JSON that is not a result: such a line is refused where
    # it stands, last or not, and the file is left as it is.
    await run_fleet(demo_tasks(2, sleep=0), demo_factory, out=tmp_path, fsync=False)
    results = tmp_path / "results.jsonl"
    results.write_bytes(results.read_bytes() + b'{"what": "not a result"}\n')
    before = results.read_bytes()
    with pytest.raises(ValueError, match=r"results.jsonl:3: not a result line \(KeyError"):
        await run_fleet(demo_tasks(2, sleep=0), demo_factory, out=tmp_path, fsync=False)
    assert results.read_bytes() == before
