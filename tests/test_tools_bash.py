"""The workspace's bash tool: output, progress, exit codes, and no process left behind.

These tests start real processes, so they use the real clock; each stays well under 2 s.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
from typing import TYPE_CHECKING, Any

import pytest
import trio

from trio_agent import (
    AssistantMessage,
    Context,
    LoopConfig,
    Text,
    ToolCall,
    ToolContext,
    ToolExecutionEnd,
    ToolExecutionUpdate,
    ToolOutput,
    UserMessage,
    check_transcript,
    open_agent_loop,
    run_agent_loop,
)
from trio_agent.testing import ScriptedModel
from trio_agent.tools import WorkspaceError, workspace
from trio_agent.tools._bash import DRAIN_TIMEOUT, MAX_OUTPUT_LINES

if TYPE_CHECKING:
    from pathlib import Path

    from trio_agent import AgentEvent, Tool

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="inspects process groups through /proc"
)

# The shell prints its process group (its own pid: it leads a new session) and a
# background child's pid, then waits: killing only the shell would leave the child.
SPAWN = "echo pg=$$; sleep 30 & echo bg=$!; echo ready; wait"


def live_members(pgid: int) -> list[int]:
    """Pids of processes in group ``pgid`` that are not zombies."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state != "Z":
            alive.append(int(entry))
    return alive


async def group_is_gone(pgid: int) -> bool:
    """SIGKILL is delivered asynchronously: give the kernel up to a second."""
    for _ in range(100):  # polling /proc: there is nothing to wait on
        if not live_members(pgid):
            return True
        await trio.sleep(0.01)
    return False


def pids(lines: list[str]) -> tuple[int, int]:
    text = "\n".join(lines)
    pg = re.search(r"pg=(\d+)", text)
    bg = re.search(r"bg=(\d+)", text)
    assert pg is not None
    assert bg is not None
    return int(pg.group(1)), int(bg.group(1))


@pytest.fixture
def bash(tmp_path: Path) -> Tool:
    (bash_tool,) = (t for t in workspace(tmp_path) if t.name == "bash")
    return bash_tool


async def run(bash: Tool, progress: list[Any] | None = None, **args: Any) -> ToolOutput:
    call = ToolCall(id="b1", name="bash", arguments=args)
    seen = progress if progress is not None else []

    async def report(partial: object) -> None:
        seen.append(partial)

    out = await bash.execute(call, args, ToolContext(call=call, report=report))
    assert isinstance(out, ToolOutput)
    return out


@pytest.fixture
def real_tmp(tmp_path: Path) -> str:
    return os.path.realpath(tmp_path)


async def test_output_progress_and_exit_code(bash: Tool, real_tmp: str) -> None:
    progress: list[Any] = []
    with trio.fail_after(2):
        out = await run(bash, progress, command="echo one; echo two >&2; printf 'no newline'")
    assert progress == ["one", "two", "no newline"]
    assert out.content == "one\ntwo\nno newline\n\n[exit code 0]"
    assert out.details["exit_code"] == 0
    assert out.details["lines"] == 3
    with trio.fail_after(2):
        out = await run(bash, command="pwd; cat")  # stdin is empty: cat ends at once
    assert out.content == f"{real_tmp}\n\n[exit code 0]"
    with trio.fail_after(2):
        out = await run(bash, command="true")
    assert out.content == "(no output)\n\n[exit code 0]"


async def test_non_zero_exit_is_an_error_with_output_and_code(bash: Tool) -> None:
    with trio.fail_after(2), pytest.raises(WorkspaceError) as info:
        await run(bash, command="echo oops; echo bad >&2; exit 3")
    assert str(info.value) == "oops\nbad\n\nCommand exited with code 3."
    with trio.fail_after(2), pytest.raises(WorkspaceError) as info:
        await run(bash, command="kill -TERM $$")
    assert str(info.value) == "(no output)\n\nCommand was killed by SIGTERM."


async def test_long_output_keeps_the_tail(bash: Tool) -> None:
    progress: list[Any] = []
    with trio.fail_after(2):
        out = await run(bash, progress, command="seq 1 3000")
    assert isinstance(out.content, str)
    first, _, rest = out.content.partition("\n")
    assert first == f"[output cut: showing the last {MAX_OUTPUT_LINES} of 3000 lines]"
    assert rest.startswith("1001\n")
    assert rest.endswith("3000\n\n[exit code 0]")
    assert len(progress) == 3000
    assert out.details["truncated"] is True


async def test_a_background_child_is_killed_when_the_shell_exits(bash: Tool) -> None:
    progress: list[Any] = []
    with trio.fail_after(2):
        # Without the group kill, the child would also hold the output pipe open for 30 s.
        out = await run(bash, progress, command="echo pg=$$; sleep 30 & echo bg=$!")
    assert isinstance(out.content, str)
    assert out.content.endswith("[exit code 0]")
    pg, bg = pids(progress)
    assert await group_is_gone(pg)
    assert bg not in live_members(pg)


async def test_timeout_kills_the_whole_group(bash: Tool) -> None:
    progress: list[Any] = []
    start = trio.current_time()
    with trio.fail_after(2), pytest.raises(WorkspaceError) as info:
        await run(bash, progress, command=SPAWN, timeout=0.3)
    assert trio.current_time() - start < 1.5
    pg, _ = pids(progress)
    assert str(info.value).endswith(
        "ready\n\nCommand timed out after 0.3s; its process group was killed."
    )
    assert await group_is_gone(pg)


async def test_cancel_kills_the_whole_group(bash: Tool) -> None:
    progress: list[Any] = []
    with trio.fail_after(2):
        with trio.CancelScope() as scope:

            async def report(partial: object) -> None:
                progress.append(partial)
                if partial == "ready":
                    scope.cancel()

            call = ToolCall(id="b1", name="bash", arguments={"command": SPAWN})
            await bash.execute(call, call.arguments, ToolContext(call=call, report=report))
        assert scope.cancelled_caught
    pg, bg = pids(progress)
    assert await group_is_gone(pg)
    assert bg not in live_members(pg)


async def test_timeout_through_the_loop_is_a_timed_out_result(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            AssistantMessage(
                content=(ToolCall(id="b1", name="bash", arguments={"command": SPAWN}),),
                stop_reason="tool_use",
            ),
            AssistantMessage(content=(Text(text="ok"),), stop_reason="stop"),
        ]
    )
    progress: list[str] = []
    ends: list[ToolExecutionEnd] = []

    def on_event(event: AgentEvent) -> None:
        if isinstance(event, ToolExecutionUpdate):
            progress.append(event.partial)
        elif isinstance(event, ToolExecutionEnd):
            ends.append(event)

    with trio.fail_after(2):
        result = await run_agent_loop(
            [UserMessage.text("go")],
            Context(tools=workspace(tmp_path)),
            model,
            LoopConfig(tool_timeout=0.3),
            on_event=on_event,
        )
    check_transcript(result.transcript)
    assert [e.outcome for e in ends] == ["timed_out"]
    assert ends[0].result.text == "Tool bash timed out after 0.3s"
    pg, _ = pids(progress)
    assert await group_is_gone(pg)


async def test_abort_through_the_loop_kills_the_group(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            AssistantMessage(
                content=(ToolCall(id="b1", name="bash", arguments={"command": SPAWN}),),
                stop_reason="tool_use",
            ),
        ]
    )
    progress: list[str] = []
    with trio.fail_after(2):
        async with open_agent_loop(
            [UserMessage.text("go")], Context(tools=workspace(tmp_path)), model
        ) as run_:
            async for event in run_.events:
                if isinstance(event, ToolExecutionUpdate):
                    progress.append(event.partial)
                    if event.partial == "ready":
                        run_.abort()
    assert run_.result is not None
    assert run_.result.reason == "aborted"
    check_transcript(run_.result.transcript)
    pg, _ = pids(progress)
    assert await group_is_gone(pg)


async def test_bad_timeout_and_no_bash(tmp_path: Path, bash: Tool) -> None:
    with pytest.raises(WorkspaceError, match="timeout must be more than 0 seconds, got 0"):
        await run(bash, command="true", timeout=0)
    assert "bash" not in {t.name for t in workspace(tmp_path, allow_bash=False)}


async def test_a_process_that_left_the_group_does_not_hold_the_call(bash: Tool) -> None:
    # `setsid` puts the child in a session of its own, out of reach of the group kill; it
    # keeps the output pipe open, so reading stops after the drain bound instead.
    progress: list[Any] = []
    start = trio.current_time()
    try:
        with trio.fail_after(2 + DRAIN_TIMEOUT):
            # The pause lets the child call setsid() before the shell exits.
            out = await run(bash, progress, command="setsid sleep 5 & echo pid=$!; sleep 0.3")
        took = trio.current_time() - start
        assert DRAIN_TIMEOUT <= took < 1 + DRAIN_TIMEOUT
        assert out.content == f"{progress[0]}\n\n[exit code 0]"
    finally:
        if progress:  # the escaped sleep is ours: end it
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(progress[0].removeprefix("pid=")), signal.SIGKILL)
