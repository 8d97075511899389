"""The workspace's bash tool: output, progress, exit codes, and no process left behind.

These tests start real processes, so they use the real clock; each stays well under 2 s.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
import trio

from tests.kit.processes import alive, live_members
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
from trio_agent._core._arguments import InvalidArguments
from trio_agent.testing import ScriptedModel
from trio_agent.tools import WorkspaceError, workspace
from trio_agent.tools._bash import (
    MAX_OUTPUT_LINES,
    PROGRESS_INTERVAL,
    USES_RUNNER,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from trio_agent import AgentEvent, Tool

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="inspects process groups through /proc"
)

# The shell prints its process group (its own pid: it leads a new session) and a
# background child's pid, then waits: killing only the shell would leave the child.
SPAWN = "echo pg=$$; sleep 30 & echo bg=$!; echo ready; wait"


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
    # Lines that arrive between two reports are merged into one (joined with newlines).
    assert "\n".join(progress) == "one\ntwo\nno newline"
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
    start = trio.current_time()
    with trio.fail_after(2):
        out = await run(bash, progress, command="seq 1 3000")
    took = trio.current_time() - start
    assert isinstance(out.content, str)
    first, _, rest = out.content.partition("\n")
    assert first == f"[output cut: showing the last {MAX_OUTPUT_LINES} of 3000 lines]"
    assert rest.startswith("1001\n")
    assert rest.endswith("3000\n\n[exit code 0]")
    # Every line is reported, merged: at most one report per PROGRESS_INTERVAL.
    assert "\n".join(progress).split("\n") == [str(i) for i in range(1, 3001)]
    assert len(progress) <= took / PROGRESS_INTERVAL + 2
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
        "ready\n\nCommand timed out after 0.3s; every process it started was killed."
    )
    assert await group_is_gone(pg)


async def test_cancel_kills_the_whole_group(bash: Tool) -> None:
    progress: list[Any] = []
    with trio.fail_after(2):
        with trio.CancelScope() as scope:

            async def report(partial: object) -> None:
                progress.append(partial)
                if "ready" in str(partial).split("\n"):
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
                    if "ready" in event.partial.split("\n"):
                        run_.abort()
    assert run_.result is not None
    assert run_.result.reason == "aborted"
    check_transcript(run_.result.transcript)
    pg, _ = pids(progress)
    assert await group_is_gone(pg)


async def test_bad_timeout_and_no_bash(tmp_path: Path, bash: Tool) -> None:
    # The schema refuses it, even when execute is called directly (no batch before it).
    with pytest.raises(InvalidArguments, match="timeout: 0 is less than or equal to the minimum"):
        await run(bash, command="true", timeout=0)
    assert "bash" not in {t.name for t in workspace(tmp_path, allow_bash=False)}


# A daemon the textbook way: fork, setsid, fork again; the grandchild prints its pid and
# becomes `sleep`, with stdio on /dev/null so it holds no pipe open.
DAEMON = """
import os, sys
if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
os.write(1, f"daemon={os.getpid()}\\n".encode())  # one write: lines cannot interleave
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
os.execv("/bin/sleep", ["sleep", "1000"])
"""


def escapers(tmp_path: Path, then: str) -> str:
    """A command starting a `setsid` child, a double-forked daemon and a `nohup`
    child (each prints its pid), then running ``then``."""
    (tmp_path / "daemon.py").write_text(DAEMON)
    return (
        "setsid sleep 1000 & echo setsid=$!; "
        f"{sys.executable} daemon.py; "
        "nohup sleep 1000 >/dev/null 2>&1 & echo nohup=$!; "
        "sleep 0.2; "  # lets setsid() and the forks happen before the shell goes on
        f"{then}"
    )


def escaped_pids(progress: list[Any]) -> dict[str, int]:
    found = dict(re.findall(r"^(setsid|daemon|nohup)=(\d+)$", "\n".join(progress), re.M))
    assert set(found) == {"setsid", "daemon", "nohup"}, progress
    return {k: int(v) for k, v in found.items()}


@pytest.fixture
def reap_escapers() -> Iterator[list[int]]:
    """Pids to SIGKILL after the test, so a failing test leaves no sleeper behind."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not USES_RUNNER, reason="the subreaper runner is Linux-only")
async def test_processes_that_left_the_group_die_when_the_shell_exits(
    tmp_path: Path, bash: Tool, reap_escapers: list[int]
) -> None:
    progress: list[Any] = []
    with trio.fail_after(5):
        out = await run(bash, progress, command=escapers(tmp_path, "echo done"))
    pids = escaped_pids(progress)
    reap_escapers.extend(pids.values())
    assert isinstance(out.content, str)
    assert out.content.endswith("done\n\n[exit code 0]")
    # Gone when the call returns: no polling, no drain wait.
    assert {name: alive(pid) for name, pid in pids.items()} == dict.fromkeys(pids, False)


@pytest.mark.skipif(not USES_RUNNER, reason="the subreaper runner is Linux-only")
async def test_processes_that_left_the_group_die_on_timeout(
    tmp_path: Path, bash: Tool, reap_escapers: list[int]
) -> None:
    progress: list[Any] = []
    with trio.fail_after(5), pytest.raises(WorkspaceError) as info:
        await run(bash, progress, command=escapers(tmp_path, "echo ready; sleep 30"), timeout=1)
    pids = escaped_pids(progress)
    reap_escapers.extend(pids.values())
    assert str(info.value).endswith(
        "Command timed out after 1s; every process it started was killed."
    )
    assert {name: alive(pid) for name, pid in pids.items()} == dict.fromkeys(pids, False)


@pytest.mark.skipif(not USES_RUNNER, reason="the subreaper runner is Linux-only")
async def test_processes_that_left_the_group_die_on_cancel(
    tmp_path: Path, bash: Tool, reap_escapers: list[int]
) -> None:
    progress: list[Any] = []
    command = escapers(tmp_path, "echo ready; sleep 30")
    with trio.fail_after(5):
        with trio.CancelScope() as scope:

            async def report(partial: object) -> None:
                progress.append(partial)
                if "ready" in str(partial).split("\n"):
                    scope.cancel()

            call = ToolCall(id="b1", name="bash", arguments={"command": command})
            await bash.execute(call, call.arguments, ToolContext(call=call, report=report))
        assert scope.cancelled_caught
    pids = escaped_pids(progress)
    reap_escapers.extend(pids.values())
    assert {name: alive(pid) for name, pid in pids.items()} == dict.fromkeys(pids, False)


async def test_a_flood_of_output_gives_a_bounded_number_of_reports(bash: Tool) -> None:
    # 20 MB of "y\n": ten million lines. Reports come at most once per PROGRESS_INTERVAL,
    # each merging the lines since the last, and reading never waits for a report.
    progress: list[Any] = []
    start = trio.current_time()
    with trio.fail_after(60):
        out = await run(bash, progress, command="yes | head -c 20000000")
    took = trio.current_time() - start
    assert len(progress) <= took / PROGRESS_INTERVAL + 2
    assert out.details["lines"] == 10_000_000
    assert isinstance(out.content, str)
    assert out.content.startswith(
        f"[output cut: showing the last {MAX_OUTPUT_LINES} of 10000000 lines]\ny\ny\n"
    )
    # What could not wait for a report is dropped from progress, and a note says how
    # much: the lines reported and the lines announced as dropped add up.
    lines = [ln for p in progress for ln in str(p).split("\n")]
    notes = [re.fullmatch(r"\[… (\d+) lines not shown\]", ln) for ln in lines]
    dropped = sum(int(m.group(1)) for m in notes if m)
    assert set(lines) - {ln for ln, m in zip(lines, notes, strict=True) if m} == {"y"}
    assert len(lines) - sum(1 for m in notes if m) + dropped == 10_000_000


async def test_a_slow_consumer_does_not_hold_the_command(bash: Tool) -> None:
    # Each report takes 0.2 s to be taken; the command still runs at full speed, and
    # the reports stay few.
    progress: list[Any] = []
    call = ToolCall(id="b1", name="bash", arguments={"command": "seq 1 200000"})

    async def report(partial: object) -> None:
        progress.append(partial)
        await trio.sleep(0.2)

    start = trio.current_time()
    with trio.fail_after(20):
        out = await bash.execute(call, call.arguments, ToolContext(call=call, report=report))
    took = trio.current_time() - start
    assert isinstance(out, ToolOutput)
    assert out.details["lines"] == 200_000
    assert len(progress) <= took / 0.2 + 2
    assert str(progress[-1]).endswith("200000")


HOLDER = """
import sys, trio
from trio_agent import ToolCall, ToolContext
from trio_agent.tools import workspace

(bash,) = (t for t in workspace(sys.argv[1]) if t.name == "bash")
args = {"command": sys.argv[2]}
call = ToolCall(id="b1", name="bash", arguments=args)

async def report(partial):
    print(partial, flush=True)

async def main():
    await bash.execute(call, args, ToolContext(call=call, report=report))

trio.run(main)
"""


@pytest.mark.skipif(not USES_RUNNER, reason="the subreaper runner is Linux-only")
async def test_everything_dies_when_the_agent_process_is_killed(
    tmp_path: Path, reap_escapers: list[int]
) -> None:
    # The agent's process is SIGKILLed mid-command (no cleanup runs in it): the runner
    # notices its parent is gone and kills every process the command started.
    command = escapers(tmp_path, "echo ready; sleep 30")
    seen = ""
    with trio.fail_after(10):
        holder = await trio.lowlevel.open_process(
            [sys.executable, "-c", HOLDER, str(tmp_path), command], stdout=subprocess.PIPE
        )
        assert holder.stdout is not None
        try:
            while "ready\n" not in seen:
                chunk = await holder.stdout.receive_some()
                assert chunk, seen
                seen += chunk.decode()
            pids = escaped_pids(seen.split("\n"))
            reap_escapers.extend(pids.values())
        finally:
            holder.kill()
            with trio.move_on_after(5, shield=True):
                await holder.wait()
                await holder.stdout.aclose()
        for _ in range(300):  # polling /proc: there is nothing to wait on
            if not any(alive(pid) for pid in pids.values()):
                break
            await trio.sleep(0.01)
    assert {name: alive(pid) for name, pid in pids.items()} == dict.fromkeys(pids, False)
