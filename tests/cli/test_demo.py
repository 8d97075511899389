"""``trio-agent demo``: end to end as a subprocess, and its parts in process."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
import trio

from trio_agent import (
    AssistantMessage,
    CallTiming,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolResultMessage,
    TurnEnd,
    TurnStats,
    check_transcript,
)
from trio_agent._store._jsonl import load_transcript
from trio_agent.cli import main
from trio_agent.cli._demo_script import pick_files
from trio_agent.cli._render import LiveView, Output, batch_line, describe_call
from trio_agent.cli.demo import default_transcript_path, run_demo

if TYPE_CHECKING:
    from pathlib import Path

    from trio_agent import Message

# Generous: a loaded CI machine may take a few seconds to import and start.
TIMEOUT = 60


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("# Widget\n\nA widget factory.\n")
    (root / "pyproject.toml").write_text('[project]\nname = "widget"\n')
    (root / "src" / "widget.py").write_text("def make():\n    pass  # TODO: make widgets\n")
    (root / "logo.png").write_bytes(b"\x89PNG\x00\x00")
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"<dir>"
        for p in sorted(root.rglob("*"))
    }


def demo(folder: Path, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(state), "PYTHONIOENCODING": "utf-8"}
    return subprocess.run(
        [sys.executable, "-m", "trio_agent.cli", "demo", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def transcript_of(stdout: str) -> Path:
    from pathlib import Path

    # The transcript's line, then the report's, last.
    line, last = stdout.rstrip("\n").split("\n")[-2:]
    assert last.startswith("report: "), last
    assert line.startswith("transcript: "), line
    return Path(line.removeprefix("transcript: "))


def loaded(path: Path) -> tuple[Message, ...]:
    transcript = load_transcript(path)
    assert transcript.whole
    check_transcript(transcript.messages)
    return transcript.messages


ROLES = [
    "user",
    "assistant",
    "tool_result",  # ls
    "assistant",
    "tool_result",  # read README.md
    "tool_result",  # read pyproject.toml
    "assistant",
    "tool_result",  # grep
    "tool_result",  # bash wc
    "assistant",
]


# --- end to end ------------------------------------------------------------------------


def test_demo_runs_on_the_current_folder(folder: Path, tmp_path: Path) -> None:
    before = snapshot(folder)
    proc = demo(folder, tmp_path / "state", "--pace", "0")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    out = proc.stdout
    path = transcript_of(out)
    assert path.parent == tmp_path / "state" / "trio-agent" / "demo"
    assert snapshot(folder) == before  # nothing written to the user's folder
    # The live display: streamed text, each call with its summary, batch statistics.
    assert "you › Give me a quick tour of this folder (project)" in out
    assert "✓ ls . — 1 folder, 3 files" in out
    assert "✓ read README.md (first 60 lines) — 3 lines" in out
    assert "✓ read pyproject.toml (first 60 lines) — 2 lines" in out
    assert "batch: 2 calls" in out
    assert "peak concurrency 2" in out
    assert "✓ bash $ wc -l -- README.md pyproject.toml — exit 0, 3 lines of output" in out
    assert "│ 5 total" in out  # bash output, streamed as progress
    assert "README.md has 3 lines, and opens with “# Widget”." in out
    assert "1 TODO/FIXME/XXX marker in 3 text files, the first at src/widget.py:2." in out
    assert "done · stop · 4 model requests · 10 messages" in out
    messages = loaded(path)
    assert [m.role for m in messages] == ROLES
    final = messages[-1]
    assert isinstance(final, AssistantMessage)
    assert "Together they have 5 lines, says wc." in final.text


def test_demo_json_and_transcript_option(folder: Path, tmp_path: Path) -> None:
    chosen = tmp_path / "elsewhere" / "run.jsonl"
    proc = demo(
        folder,
        tmp_path / "state",
        "--json",
        "--pace",
        "0",
        "--no-bash",
        "--transcript",
        str(chosen),
    )
    assert proc.returncode == 0, proc.stderr
    # Every line of stdout is JSON (`trio-agent demo --json | jq -c .type` works).
    lines = [json.loads(line) for line in proc.stdout.rstrip("\n").split("\n")]
    assert lines[-1] == {"type": "transcript", "path": str(chosen)}
    events = lines[:-1]
    assert events[0] == {"type": "agent_start"}
    # A message_update carries its stream event only, not the whole partial message.
    updates = [e for e in events if e["type"] == "message_update"]
    assert updates
    assert all(set(e) == {"type", "event"} for e in updates)
    deltas = "".join(e["event"]["delta"] for e in updates if e["event"]["type"] == "text_delta")
    final_texts = "".join(
        b["text"]
        for e in events
        if e["type"] == "message_end" and e["message"]["role"] == "assistant"
        for b in e["message"]["content"]
        if b["type"] == "text"
    )
    assert deltas == final_texts
    assert events[-1]["type"] == "agent_end"
    assert events[-1]["reason"] == "stop"
    kinds = {e["type"] for e in events}
    assert {"message_update", "tool_execution_start", "tool_execution_end", "turn_end"} <= kinds
    assert "bash" not in {e.get("tool_name") for e in events}
    messages = loaded(chosen)
    ended = [e["message"]["role"] for e in events if e["type"] == "message_end"]
    assert ended == [m.role for m in messages]
    assert not (tmp_path / "state").exists()


def test_an_existing_transcript_is_refused(folder: Path, tmp_path: Path) -> None:
    # A second demo appended to the same file would mix two sessions (and their call
    # ids): the second one is refused, the file left as it was.
    chosen = tmp_path / "run.jsonl"
    first = demo(folder, tmp_path / "state", "--pace", "0", "--transcript", str(chosen))
    assert first.returncode == 0, first.stderr
    before = chosen.read_bytes()
    again = demo(folder, tmp_path / "state", "--pace", "0", "--transcript", str(chosen))
    assert again.returncode == 2
    assert again.stdout == ""
    assert again.stderr == (
        f"trio-agent demo: the transcript {chosen} exists already: give --transcript a "
        "new path (or leave it out)\n"
    )
    assert chosen.read_bytes() == before
    loaded(chosen)  # still one whole, paired session


def test_ctrl_c_aborts_with_130_and_a_paired_transcript(folder: Path, tmp_path: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "PYTHONIOENCODING": "utf-8"}
    with subprocess.Popen(
        [sys.executable, "-m", "trio_agent.cli", "demo", "--pace", "0.05"],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        # Interrupt mid-run: after the first batch, while the second reply streams.
        for line in proc.stdout:
            if "batch:" in line:
                break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 130
    assert "Traceback" not in err
    assert err == "interrupted: the run was aborted; its transcript is kept\n"
    assert "done · aborted" in out
    messages = loaded(transcript_of(out))
    assert messages[-1].role in ("assistant", "tool_result")
    assert len(messages) < len(ROLES)


def test_a_closed_pipe_ends_quietly(folder: Path, tmp_path: Path) -> None:
    chosen = tmp_path / "t.jsonl"
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trio_agent.cli",
            "demo",
            "--json",
            "--pace",
            "0.01",
            "--transcript",
            str(chosen),
        ],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(b'{"type":"agent_start"')
        proc.stdout.close()  # like `| head -1`
        proc.stdout = None  # so that communicate() reads stderr only
        _, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0
    assert err == b""
    assert len(loaded(chosen)) < len(ROLES)  # the run was aborted, its transcript paired


def test_help_documents_the_options_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["demo", "--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for option in ("--json", "--transcript PATH", "--no-bash", "--pace SECONDS"):
        assert option in text
    assert "130 interrupted by Ctrl-C" in text


# --- in process ------------------------------------------------------------------------


async def test_an_empty_folder(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    (tmp_path / "empty").mkdir()
    out = io.StringIO()
    code = await run_demo(str(tmp_path / "empty"), out, transcript=tmp_path / "t.jsonl", bash=False)
    assert code == 0
    text = out.getvalue()
    assert "There is no file at the top level" in text
    assert "✓ find * — 0 paths" in text
    assert "- The folder is empty." in text
    assert "- No TODO, FIXME or XXX in 0 text files: tidy." in text
    line, last = text.rstrip("\n").split("\n")[-2:]
    assert line == f"transcript: {tmp_path / 't.jsonl'}"
    assert last.startswith("report: open file://")
    loaded(tmp_path / "t.jsonl")


async def test_an_unreadable_pick_is_reported(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    (tmp_path / "only").mkdir()
    (tmp_path / "only" / "data.bin").write_bytes(b"\x00\x01")
    out = io.StringIO()
    code = await run_demo(str(tmp_path / "only"), out, transcript=tmp_path / "t.jsonl", bash=False)
    assert code == 0
    text = out.getvalue()
    assert "✗ read data.bin (first 60 lines) — error: data.bin looks like a binary file" in text
    assert "- data.bin could not be read: data.bin looks like a binary file" in text
    messages = loaded(tmp_path / "t.jsonl")
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert [r.is_error for r in results] == [False, True, False]


class _ClosingPipe(io.StringIO):
    """A stream whose reader goes away after a few writes."""

    def __init__(self, writes: int) -> None:
        super().__init__()
        self.left = writes

    def write(self, text: str) -> int:
        if self.left == 0:
            raise BrokenPipeError(32, "Broken pipe")
        self.left -= 1
        return super().write(text)


async def test_a_closed_output_aborts_the_run_and_keeps_the_transcript_paired(
    folder: Path, tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    out = _ClosingPipe(writes=12)
    code = await run_demo(
        str(folder), out, transcript=tmp_path / "t.jsonl", as_json=True, bash=False
    )
    assert code == 0
    assert out.getvalue().count("\n") == 12
    messages = loaded(tmp_path / "t.jsonl")
    assert 1 < len(messages) < len(ROLES)


def test_default_transcript_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    path = default_transcript_path()
    assert path.parent == tmp_path / "trio-agent" / "demo"
    assert path.suffix == ".jsonl"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_transcript_path().parent == tmp_path / "home/.local/state/trio-agent/demo"


def test_pick_files_prefers_telling_text_files() -> None:
    assert pick_files(["z.bin", "setup.py", "notes.txt", "README.md", "Cargo.toml"]) == [
        "README.md",
        "Cargo.toml",
    ]
    assert pick_files(["a.bin", ".env", "b.md"]) == ["b.md", "a.bin"]
    assert pick_files([".env", ".secrets.toml"]) == []
    assert pick_files([]) == []


def test_describe_call() -> None:
    assert describe_call("read", {"path": "a", "offset": 3, "limit": 2}) == "read a (lines 3-4)"
    assert describe_call("read", {"path": "a", "offset": 3}) == "read a (from line 3)"
    assert describe_call("grep", {"pattern": "x"}) == "grep /x/ in ."
    assert describe_call("bash", {"command": "echo  hi\nthere"}) == "bash $ echo hi there"
    assert describe_call("other", {"k": 1}) == 'other {"k": 1}'


def test_batch_line() -> None:
    stats = TurnStats(
        wall_time=0.010,
        critical_path=0.009,
        total_call_time=0.018,
        peak_concurrency=2,
        calls=(
            CallTiming(call_id="a", tool_name="read", start=0, end=0.009),
            CallTiming(call_id="b", tool_name="read", start=0, end=0.009),
        ),
    )
    assert batch_line(stats) == (
        "batch: 2 calls · wall 10.0 ms · critical path 9.0 ms · sum of calls 18.0 ms · "
        "peak concurrency 2 · 1.8× faster than one by one"
    )


async def test_live_view_lines(autojump_clock: trio.abc.Clock) -> None:
    stream = io.StringIO()
    view = LiveView(Output(stream), live=False, color=False)
    view.show(ToolExecutionStart(call_id="c", tool_name="bash", args={"command": "make"}))
    for i in range(10):
        view.show(ToolExecutionUpdate(call_id="c", tool_name="bash", partial=f"step {i}"))
    result = ToolResultMessage(
        tool_call_id="c", tool_name="bash", content=(), details={"exit_code": 0, "lines": 10}
    )
    view.show(
        ToolExecutionEnd(call_id="c", tool_name="bash", result=result, is_error=False, outcome="ok")
    )
    view.show(TurnEnd(message=None, tool_results=(result,)))
    assert stream.getvalue().split("\n") == [
        "  … bash $ make",
        *(f"    │ step {i}" for i in range(8)),
        "    │ … and 2 more lines",
        "  ✓ bash $ make — exit 0, 10 lines of output · 0.0 ms",
        "  batch: 0 calls · wall 0.0 ms · critical path 0.0 ms · sum of calls 0.0 ms · "
        "peak concurrency 0",
        "",
    ]


async def test_live_view_spinner(autojump_clock: trio.abc.Clock) -> None:
    stream = io.StringIO()
    view = LiveView(Output(stream), live=True, color=False)
    view.show(ToolExecutionStart(call_id="c", tool_name="ls", args={"path": "src"}))
    assert stream.getvalue() == "\r\x1b[K  ⠋ ls src  0.0s"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(view.spin)
        await trio.sleep(0.2)
        nursery.cancel_scope.cancel()
    assert stream.getvalue().endswith("\r\x1b[K  ⠙ ls src  0.1s\r\x1b[K  ⠹ ls src  0.2s")
    result = ToolResultMessage(tool_call_id="c", tool_name="ls", content=(), details=None)
    view.show(
        ToolExecutionEnd(call_id="c", tool_name="ls", result=result, is_error=False, outcome="ok")
    )
    # The status line is cleared, the call's line printed, and nothing redrawn after it.
    assert stream.getvalue().endswith("0.2s\r\x1b[K  ✓ ls src —  · 200.0 ms\n")


def test_json_is_unpaced_unless_asked() -> None:
    from trio_agent.cli import build_parser
    from trio_agent.cli.demo import DEFAULT_PACE, pace_of

    def pace(*argv: str) -> float:
        return pace_of(build_parser().parse_args(["demo", *argv]))

    assert pace() == DEFAULT_PACE
    assert pace("--json") == 0.0
    assert pace("--json", "--pace", "0.5") == 0.5
    assert pace("--pace", "-1") == 0.0


async def test_live_view_draws_no_status_under_a_question(autojump_clock: trio.abc.Clock) -> None:
    # While the user is asked to allow a call, the answer typed is echoed on the line
    # below the question: a spinner drawn there would be left on screen with the
    # answer glued to its end.
    stream = io.StringIO()
    view = LiveView(Output(stream), live=True, color=False)
    view.show(ToolExecutionStart(call_id="c", tool_name="ls", args={"path": "src"}))
    view.asking = True
    view.line("  allow ls src? [y/N]")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(view.spin)
        await trio.sleep(0.2)
        nursery.cancel_scope.cancel()
    assert stream.getvalue().endswith("\r\x1b[K  allow ls src? [y/N]\n")
    view.asking = False
    view.line("  answered")
    assert stream.getvalue().endswith("  answered\n\r\x1b[K  ⠹ ls src  0.2s")
