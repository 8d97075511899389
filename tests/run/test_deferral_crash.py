"""A deferred run survives SIGKILL: killed between the deferral and the decision, and
killed while the approved call runs, a resume from the transcript file alone loses
nothing and runs no call twice. Real processes (``deferral_child.py``), the real clock."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import trio

from tests.kit.programs.deferral_child import FINAL, tools
from trio_agent import (
    Approve,
    JsonlTranscript,
    ToolResultMessage,
    check_transcript,
    load_transcript,
    resume,
)
from trio_agent.testing import ScriptedModel

CHILD = Path(__file__).resolve().parent.parent / "kit" / "programs" / "deferral_child.py"
GUARD = 30  # seconds; a child reaches its kill point in well under one


async def run_and_kill(path: Path, ledger: Path, phase: str, until: str) -> None:
    """Run the child until it prints ``until``, then SIGKILL it."""
    proc = await trio.lowlevel.open_process(
        [sys.executable, str(CHILD), str(path), str(ledger), phase],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    seen = b""
    try:
        with trio.fail_after(GUARD):
            while until.encode() not in seen:
                chunk = await proc.stdout.receive_some()
                if not chunk:
                    err = (await proc.stderr.receive_some()).decode(errors="replace")
                    raise AssertionError(f"the child exited before {until}:\n{err}")
                seen += chunk
            proc.send_signal(signal.SIGKILL)
            assert await proc.wait() == -signal.SIGKILL
    finally:
        with trio.CancelScope(shield=True):
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            await proc.stdout.aclose()
            await proc.stderr.aclose()


def ledger_lines(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


def results(messages: tuple[object, ...]) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolResultMessage)}


async def test_killed_between_deferral_and_decision_then_resumed_from_the_file(
    tmp_path: Path,
) -> None:
    path, ledger = tmp_path / "run.jsonl", tmp_path / "ledger"
    await run_and_kill(path, ledger, "defer", "DEFERRED")
    assert sorted(ledger_lines(ledger)) == ["lookup l1", "lookup l2"]

    loaded = await trio.to_thread.run_sync(load_transcript, path)
    assert loaded.waiting == {"s1", "l2"}
    check_transcript(loaded.messages, waiting=loaded.waiting)
    with trio.fail_after(GUARD):
        async with JsonlTranscript(path) as transcript:
            result = await resume(
                loaded,
                {"s1": Approve()},
                model=ScriptedModel([FINAL]),
                tools=tools(str(ledger)),
                on_event=transcript,
            )
    assert result.reason == "stop"
    final = await trio.to_thread.run_sync(load_transcript, path)
    check_transcript(final.messages)
    assert list(results(final.messages)) == ["l1", "s1", "l2"]
    # l2's result, held in the deferral marker, is the one its run produced: not re-run.
    assert sorted(ledger_lines(ledger)) == ["lookup l1", "lookup l2", "send s1"]


async def test_killed_while_the_approved_call_runs_it_is_never_run_again(
    tmp_path: Path,
) -> None:
    path, ledger = tmp_path / "run.jsonl", tmp_path / "ledger"
    await run_and_kill(path, ledger, "defer", "DEFERRED")
    await run_and_kill(path, ledger, "resume", "RUNNING")
    assert ledger_lines(ledger).count("send s1") == 1

    loaded = await trio.to_thread.run_sync(load_transcript, path)
    assert [m.kind for m in loaded.markers] == ["deferral", "decisions"]
    assert loaded.waiting == {"s1", "l2"}  # no result was written before the kill
    with trio.fail_after(GUARD):
        async with JsonlTranscript(path) as transcript:
            result = await resume(
                loaded,
                {},  # decided already, by the killed resume
                model=ScriptedModel([FINAL]),
                tools=tools(str(ledger)),
                on_event=transcript,
            )
    assert result.reason == "stop"
    final = await trio.to_thread.run_sync(load_transcript, path)
    check_transcript(final.messages)
    sent = results(final.messages)["s1"]
    assert sent.is_error
    assert "not run again" in sent.content[0].text  # type: ignore[union-attr]
    assert ledger_lines(ledger).count("send s1") == 1
    assert sorted(ledger_lines(ledger)) == ["lookup l1", "lookup l2", "send s1"]
