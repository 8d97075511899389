"""``trio-agent check FILE [--repair OUT]``: exit codes, line numbers, no tracebacks."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from tests.kit.loop import user
from trio_agent import (
    AssistantMessage,
    JsonlTranscript,
    Message,
    Text,
    ToolCall,
    ToolResultMessage,
    check_transcript,
    load_transcript,
    write_transcript,
)
from trio_agent._store._jsonl import HEADER_LINE
from trio_agent.cli import main
from trio_agent.cli.check import describe

if TYPE_CHECKING:
    from pathlib import Path


def calls(*ids: str) -> AssistantMessage:
    return AssistantMessage(
        content=tuple(ToolCall(id=i, name="probe", arguments={}) for i in ids),
        stop_reason="tool_use",
        timestamp=2.0,
    )


def result(call_id: str) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call_id, tool_name="probe", content=(Text(text="ok"),), timestamp=3.0
    )


PAIRED: list[Message] = [
    user(),
    calls("c1", "c2"),
    result("c1"),
    result("c2"),
    AssistantMessage(content=(Text(text="done"),), stop_reason="stop", timestamp=4.0),
]
CRASHED: list[Message] = [user(), calls("c1", "c2", "c3"), result("c1")]


def check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["check", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_a_whole_paired_transcript(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jsonl"
    write_transcript(path, PAIRED)
    assert check(capsys, str(path)) == (0, f"{path}: 5 messages, ok\n", "")


def test_a_torn_tail_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jsonl"
    write_transcript(path, PAIRED)
    with path.open("ab") as f:
        f.write(b'{"role":"us')
    code, out, _ = check(capsys, str(path))
    assert code == 1
    assert f"{path}:7: torn last line dropped" in out
    assert out.endswith(f"{path}: 5 messages, 1 problem\n")


def test_violations_are_reported_with_line_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.jsonl"
    write_transcript(path, CRASHED)
    code, out, _ = check(capsys, str(path))
    assert code == 1
    assert out.splitlines() == [
        f"{path}:3: call 'c2' has no result after it",
        f"{path}:3: call 'c3' has no result after it",
        f"{path}: 3 messages, 2 problems",
    ]


def test_repair_writes_a_paired_copy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jsonl"
    out_path = tmp_path / "fixed.jsonl"
    write_transcript(path, CRASHED)
    with path.open("ab") as f:
        f.write(b'{"role":"tool_result","tool_call_id":"c2"')  # torn as well
    before = path.read_bytes()
    code, out, _ = check(capsys, str(path), "--repair", str(out_path))
    assert code == 0
    assert f"{out_path}: wrote 5 messages (2 aborted results added, torn line dropped); " in out
    assert path.read_bytes() == before  # the original is left alone
    loaded = load_transcript(out_path)
    assert loaded.whole
    check_transcript(loaded.messages)
    assert loaded.messages[:3] == tuple(CRASHED)
    assert check(capsys, str(out_path))[0] == 0


def test_repair_in_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jsonl"
    write_transcript(path, CRASHED)
    assert check(capsys, str(path), "--repair", str(path))[0] == 0
    assert check(capsys, str(path))[0] == 0


def test_repair_cannot_fix_everything(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jsonl"
    out_path = tmp_path / "fixed.jsonl"
    write_transcript(path, [user(), result("ghost"), *CRASHED])
    code, out, _ = check(capsys, str(path), "--repair", str(out_path))
    assert code == 1
    assert f"{out_path}:3: result for no call (id 'ghost')" in out
    assert "1 problem(s) repair cannot fix" in out
    assert out_path.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", ":1: empty file"),
        (b'{"format":"trio-agent-transcript","version":9}\n', ":1: transcript format version 9"),
        (b"not json at all\n", ":1: no transcript header"),
        (HEADER_LINE + b"{oops\n" + HEADER_LINE, ":2: malformed JSON"),
        (HEADER_LINE + b"\xff\xfe\n" + HEADER_LINE, ":2: not UTF-8 text"),
        (HEADER_LINE + b'{"role":"user","content":[],"timestamp":"x"}\n', ":2: expected a number"),
    ],
)
@pytest.mark.parametrize("repair", [False, True])
def test_a_file_that_does_not_load(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: bytes,
    message: str,
    repair: bool,
) -> None:
    path = tmp_path / "t.jsonl"
    out_path = tmp_path / "fixed.jsonl"
    path.write_bytes(content)
    code, out, err = check(capsys, str(path), *(["--repair", str(out_path)] if repair else []))
    assert out == ""
    assert code == 1
    assert f"{path}{message}" in err
    assert err.endswith(f"{path}: does not load\n")
    assert not out_path.exists()  # nothing to repair from


def test_unreadable_and_unwritable_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check(capsys, str(tmp_path / "missing.jsonl")) == (
        1,
        "",
        f"{tmp_path / 'missing.jsonl'}: cannot read: No such file or directory\n",
    )
    code, _, err = check(capsys, str(tmp_path))
    assert code == 1
    assert "cannot read: Is a directory" in err
    path = tmp_path / "t.jsonl"
    write_transcript(path, CRASHED)
    code, _, err = check(capsys, str(path), "--repair", str(tmp_path / "no" / "such" / "dir"))
    assert code == 1
    assert "cannot write: No such file or directory" in err


def test_describe_turns_indexes_into_lines() -> None:
    assert describe("messages[0]: result for no call (id 'x')", "f") == (
        "f:2: result for no call (id 'x')"
    )
    assert describe("messages[5]: second result for call 'a' (first at messages[3])", "f") == (
        "f:7: second result for call 'a' (first at line 5)"
    )
    assert describe("messages[2..4]: results out of declaration order (got [])", "f") == (
        "f:4: lines 4-6: results out of declaration order (got [])"
    )


def test_the_installed_command(tmp_path: Path) -> None:
    """Through a real process: exit codes, and a clean message on stderr, no traceback."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(HEADER_LINE + b"{oops\n\n")
    cmd = [sys.executable, "-m", "trio_agent.cli", "check"]
    done = subprocess.run([*cmd, str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert f"{path}:2: malformed JSON" in done.stderr
    helped = subprocess.run([*cmd, "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0
    assert "--repair OUT" in helped.stdout


async def test_repair_over_a_file_a_run_still_writes_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.jsonl"
    write_transcript(path, CRASHED)
    async with JsonlTranscript(path) as transcript:
        code, _, err = check(capsys, str(path), "--repair", str(path))
        assert code == 1
        assert f"{path}: cannot write: {path} is already open for writing" in err
        await transcript.write_messages([result("c2")])
    assert load_transcript(path).messages == (*CRASHED, result("c2"))
