"""A run killed with SIGKILL loses no finished message, and resumes from its transcript.

Each test starts ``crash_child.py`` (a real run writing a ``JsonlTranscript``) in a
subprocess, kills it at a chosen point, then checks: every message whose ``MessageEnd``
the child reported (after the sink returned) is in the file, in order; ``load_transcript``
+ ``repair`` give a paired transcript; and a resumed run over the same file completes,
leaving a file that loads whole and is paired. Real processes, so the real clock.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio

from tests.kit.programs.crash_child import PROMPT, script, survey_tool
from trio_agent import (
    AssistantMessage,
    Context,
    JsonlTranscript,
    Message,
    ToolResultMessage,
    UserMessage,
    check_transcript,
    load_transcript,
    repair,
    run_agent_loop,
    write_transcript,
)
from trio_agent._core._serde import from_jsonable
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from collections.abc import Callable

CHILD = Path(__file__).resolve().parent.parent / "kit" / "programs" / "crash_child.py"
GUARD = 30  # seconds; a child normally reaches its kill point in well under one


class _Lines:
    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buf = b""

    async def readline(self) -> str | None:
        """The next line without its newline; None at end of stream."""
        while b"\n" not in self._buf:
            chunk = await self._stream.receive_some()
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode()  # noqa: ASYNC910 - a buffered line needs no I/O


async def run_and_kill(
    path: Path, scenario: str, stop: Callable[[str, list[Message]], bool]
) -> list[Message]:
    """Run the child until ``stop(line, reported)`` is true, SIGKILL it, and return every
    message it reported as written (also those reported after the decision to kill)."""
    proc = await trio.lowlevel.open_process(
        [sys.executable, str(CHILD), str(path), scenario],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    reported: list[Message] = []
    lines = _Lines(proc.stdout)
    finished = False

    def take(line: str) -> None:
        nonlocal finished
        if line.startswith("END "):
            reported.append(from_jsonable(json.loads(line[4:]), Message))
        finished = finished or line.startswith("DONE")

    try:
        with trio.fail_after(GUARD):
            while True:
                line = await lines.readline()
                if line is None:
                    err = (await proc.stderr.receive_some()).decode(errors="replace")
                    pytest.fail(f"the child exited before the kill point:\n{err}")
                take(line)
                assert not finished, "the child finished before the kill point"
                if stop(line, reported):
                    break
            proc.send_signal(signal.SIGKILL)
            code = await proc.wait()
            while (line := await lines.readline()) is not None:
                take(line)
            # A free-running child may finish before the kill lands (or exit under it).
            assert code == -signal.SIGKILL or (finished and code == 0)
    finally:
        with trio.CancelScope(shield=True):
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            await proc.stdout.aclose()
            await proc.stderr.aclose()
    return reported


def remaining_script(messages: tuple[Message, ...]) -> list[AssistantMessage]:
    done = sum(type(m) is AssistantMessage for m in messages)
    return script()[done:]


async def check_and_resume(path: Path, reported: list[Message]) -> tuple[Message, ...]:
    """The post-crash checks; returns the transcript as loaded (before repair)."""
    loaded = await trio.to_thread.run_sync(load_transcript, path)
    # Every message reported as written is in the file, in order (the child may have
    # written a few more between the decision to kill and the kill).
    assert loaded.messages[: len(reported)] == tuple(reported)
    assert loaded.messages[0] == UserMessage.text(PROMPT, timestamp=0.5)

    repaired = repair(loaded.messages)
    check_transcript(repaired)
    added = [m for m in repaired if type(m) is ToolResultMessage and m not in loaded.messages]
    assert all(m.is_error and m.details["recovered"] for m in added)
    assert [m for m in repaired if m not in added] == list(loaded.messages)  # only additions

    last = repaired[-1]
    if type(last) is AssistantMessage:  # killed after the final reply: nothing to resume
        assert last == script()[-1]
        return loaded.messages

    await trio.to_thread.run_sync(write_transcript, path, repaired)
    model = ScriptedModel(remaining_script(repaired))
    with trio.fail_after(GUARD):
        async with JsonlTranscript(path) as transcript:
            result = await run_agent_loop(
                [], Context(messages=repaired, tools=(survey_tool(),)), model, on_event=transcript
            )
    assert result.reason == "stop"
    assert result.messages[-1] == script()[-1]
    final = await trio.to_thread.run_sync(load_transcript, path)
    assert final.whole
    assert final.messages == repaired + result.messages
    check_transcript(final.messages)
    return loaded.messages


async def test_kill_mid_stream(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    reported = await run_and_kill(path, "mid_stream", lambda line, _: line == "READY")
    # The second reply never reached MessageEnd: the file holds the first turn, whole.
    assert [m.role for m in reported] == ["user", "assistant"] + ["tool_result"] * 3
    loaded = await check_and_resume(path, reported)
    assert loaded == tuple(reported)


async def test_kill_mid_batch(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    reported = await run_and_kill(path, "mid_batch", lambda line, _: line == "READY")
    # Results enter the transcript once the batch is done: none of them did.
    assert [m.role for m in reported] == ["user", "assistant"]
    loaded = await check_and_resume(path, reported)
    assert loaded == tuple(reported)
    repaired = repair(loaded)
    assert [m.tool_call_id for m in repaired[2:]] == ["c1", "c2", "c3"]  # type: ignore[union-attr]


async def test_kill_mid_sequential_batch(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    reported = await run_and_kill(path, "mid_sequential_batch", lambda line, _: line == "READY")
    # Sequential: c1's result entered the transcript (and the file) before c2 started.
    assert [m.role for m in reported] == ["user", "assistant", "tool_result"]
    assert reported[2].tool_call_id == "c1"  # type: ignore[union-attr]
    assert not reported[2].is_error  # type: ignore[union-attr]
    loaded = await check_and_resume(path, reported)
    assert loaded == tuple(reported)
    repaired = repair(loaded)
    assert [m.tool_call_id for m in repaired[2:]] == ["c1", "c2", "c3"]  # type: ignore[union-attr]
    assert repaired[2] == reported[2]  # the finished result kept, only c2 and c3 added


async def test_kill_between_turns(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    reported = await run_and_kill(path, "between_turns", lambda line, _: line == "READY")
    roles = ["user", "assistant", *["tool_result"] * 3, "assistant", *["tool_result"] * 2]
    assert [m.role for m in reported] == roles
    loaded = await check_and_resume(path, reported)
    assert loaded == tuple(reported)
    assert repair(loaded) == loaded  # nothing to add


# The free-running child writes 9 messages; kill it after each of a few of them, while
# it keeps going (the kill lands a little later, wherever the run has got to).
@pytest.mark.parametrize("after", [1, 2, 4, 6, 8, 9])
async def test_kill_anywhere(tmp_path: Path, after: int) -> None:
    path = tmp_path / "run.jsonl"
    reported = await run_and_kill(path, "free", lambda _, reported: len(reported) >= after)
    assert len(reported) >= after
    await check_and_resume(path, reported)
