"""Fleets on one machine: tasks in, results and transcripts out, resumable.

The big runs use the demo fleet (``trio_agent.fleet.demo_tasks``/``demo_factory``):
each task's scripted model calls a ``lookup`` tool once (it sleeps), then answers. The
SIGKILL test runs ``trio-agent fleet`` in a subprocess, so it uses the real clock.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from trio.testing import MockClock

from tests.kit.fleet import (
    assert_fleet_complete,
    fleet_cli,
    result_lines,
    results_reach,
    transcripts_load_and_pair,
)
from tests.kit.processes import child_process, wait_until
from trio_agent import (
    AssistantMessage,
    BeforeToolCallContext,
    CustomMessage,
    JsonlTranscript,
    LoopConfig,
    Marker,
    Start,
    Text,
    TextDelta,
    TextStart,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    check_transcript,
    load_transcript,
    write_transcript,
)
from trio_agent.fleet import (
    FleetError,
    FleetTask,
    FleetWorker,
    Job,
    StorageError,
    TaskSetup,
    demo_factory,
    demo_tasks,
    load_tasks,
    run_fleet,
)
from trio_agent.fleet._task import transcript_relpath
from trio_agent.fleet._worker import RESUME_KIND
from trio_agent.testing import ScriptedModel


async def test_a_thousand_scripted_tasks(tmp_path: Path, autojump_clock: Any) -> None:
    out = tmp_path / "fleet"
    ids = [t.id for t in demo_tasks(1000)]
    # No fail_after: the autojump clock also jumps while file writes wait on threads
    # (the test's timeout guards against a hang).
    summary = await run_fleet(demo_tasks(1000), demo_factory, out=out, fsync=False)
    assert (summary.total, summary.done, summary.skipped, summary.failed) == (1000, 1000, 0, 0)
    assert summary.usage.input_tokens == 1000 * 110
    assert summary.usage.output_tokens == 1000 * 21
    lines = assert_fleet_complete(out, ids)
    assert all(line["steps"] == 2 and not line["resumed"] for line in lines)
    assert len(list((out / "transcripts").iterdir())) == 1000

    before = (out / "results.jsonl").read_bytes()
    again = await run_fleet(demo_tasks(1000), demo_factory, out=out, fsync=False)
    assert (again.done, again.skipped) == (0, 1000)
    assert (out / "results.jsonl").read_bytes() == before


async def test_concurrency_is_bounded(tmp_path: Path) -> None:
    # The real clock: the autojump clock would jump while tasks wait on file threads.
    peak = 0
    running = 0

    async def factory(task: FleetTask) -> TaskSetup:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await trio.sleep(0.2)
        running -= 1
        return demo_factory(task)

    with trio.fail_after(60):
        summary = await run_fleet(
            demo_tasks(14, sleep=0), factory, out=tmp_path, concurrency=7, fsync=False
        )
    assert summary.done == 14
    assert peak == 7


def _snapshot(out: Path) -> dict[str, Any]:
    snap: dict[str, Any] = {}
    for path in (out / "transcripts").iterdir():
        raw = path.read_bytes()
        # A file cut before its header's end holds no message (killed as it was created).
        snap[path.name] = (raw, load_transcript(path).messages if b"\n" in raw else ())
    return snap


def test_sigkill_mid_fleet_then_rerun(tmp_path: Path) -> None:
    out = tmp_path / "fleet"
    demo = ("--demo", "--demo-sleep", "0.05", "--concurrency", "32", "--fsync", "never")
    log = tmp_path / "child.log"
    with child_process(fleet_cli(*demo, "--no-progress", "--out", str(out)), log) as child:
        wait_until(child, log, results_reach(out, 150), within=120, what="no progress")
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    # The killed fleet's lock file stays, with its pid; its lock went with the process.
    assert (out / "fleet.lock").read_text() == f"{child.pid}\n"
    recorded_before = result_lines(out)
    assert 150 <= len(recorded_before) < 1000
    snapshot = _snapshot(out)

    summary = trio.run(
        lambda: run_fleet(demo_tasks(1000, sleep=0.001), demo_factory, out=out, fsync=False)
    )
    assert summary.skipped == len(recorded_before)
    assert summary.done == 1000 - len(recorded_before)
    assert summary.resumed >= 1  # tasks caught mid-run continued from their transcripts

    ids = [t.id for t in demo_tasks(1000)]
    lines = assert_fleet_complete(out, ids)
    # What was recorded before the kill stays, first, unchanged; those tasks never ran again.
    assert lines[: len(recorded_before)] == recorded_before
    done_before = {line["id"] for line in recorded_before}
    for name, (raw, messages) in snapshot.items():
        path = out / "transcripts" / name
        if name.removesuffix(".jsonl") in done_before:
            assert path.read_bytes() == raw
        # No finished message lost: what was on disk is the start of the final transcript.
        final = load_transcript(path).messages
        assert final[: len(messages)] == messages
    for line in lines:
        if line["resumed"]:
            kinds = [
                m.kind
                for m in load_transcript(out / line["transcript"]).messages
                if type(m) is CustomMessage
            ]
            assert RESUME_KIND in kinds


def test_ctrl_c_exits_130_with_paired_transcripts_and_the_rerun_resumes(tmp_path: Path) -> None:
    out = tmp_path / "fleet"
    demo = ("--demo", "--demo-tasks", "300", "--demo-sleep", "0.3", "--concurrency", "40")
    log = tmp_path / "child.log"
    cmd = fleet_cli(*demo, "--fsync", "never", "--no-progress", "--out", str(out))
    with child_process(cmd, log) as child:
        wait_until(child, log, results_reach(out, 40), within=120, what="no progress")
        child.send_signal(signal.SIGINT)
        child.wait(timeout=60)
    assert child.returncode == 130, log.read_text()
    assert "interrupted" in log.read_text()
    recorded = result_lines(out)
    assert 40 <= len(recorded) < 300
    for path in (out / "transcripts").iterdir():
        if path.stat().st_size:
            # Cancelled runs paired their transcripts on the way out: no repair needed.
            check_transcript(load_transcript(path).messages)

    summary = trio.run(
        lambda: run_fleet(demo_tasks(300, sleep=0), demo_factory, out=out, fsync=False)
    )
    assert summary.skipped == len(recorded)
    assert summary.resumed >= 1
    lines = assert_fleet_complete(out, [t.id for t in demo_tasks(300)])
    assert lines[: len(recorded)] == recorded


async def test_cancelled_fleet_resumes_with_paired_transcripts(tmp_path: Path) -> None:
    in_tool = 0
    all_in_tool = trio.Event()

    def count(ctx: BeforeToolCallContext) -> None:
        nonlocal in_tool
        in_tool += 1
        if in_tool == 20:
            all_in_tool.set()

    def factory(task: FleetTask) -> TaskSetup:
        return attrs.evolve(demo_factory(task), config=LoopConfig(before_tool_call=count))

    # Every tool sleeps 60 s: the fleet is cancelled once all 20 are inside one.
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:

            async def fleet() -> None:
                await run_fleet(demo_tasks(20, sleep=60), factory, out=tmp_path, fsync=False)

            nursery.start_soon(fleet)
            await all_in_tool.wait()
            nursery.cancel_scope.cancel()
    assert result_lines(tmp_path) == []
    for path in (tmp_path / "transcripts").iterdir():
        messages = load_transcript(path).messages
        check_transcript(messages)  # the cancelled runs paired their calls on the way out
        last = messages[-1]
        assert type(last) is ToolResultMessage
        assert last.is_error

    with trio.fail_after(30):
        summary = await run_fleet(demo_tasks(20, sleep=0), demo_factory, out=tmp_path, fsync=False)
    assert (summary.done, summary.resumed) == (20, 20)
    lines = assert_fleet_complete(tmp_path, [t.id for t in demo_tasks(20)])
    for line in lines:
        messages = load_transcript(tmp_path / line["transcript"]).messages
        roles = [type(m).__name__ for m in messages]
        # prompt, call, aborted result, resume marker, the call again, its result, answer
        assert roles == [
            "UserMessage",
            "AssistantMessage",
            "ToolResultMessage",
            "CustomMessage",
            "AssistantMessage",
            "ToolResultMessage",
            "AssistantMessage",
        ]
        assert line["steps"] == 3


async def test_a_resumed_task_keeps_its_marker_lines_after_the_messages_they_followed(
    tmp_path: Path,
) -> None:
    (task,) = demo_tasks(1, sleep=0)
    assert task.prompt is not None
    path = tmp_path / transcript_relpath(task.id)
    path.parent.mkdir(parents=True)
    call = ToolCall(id="c1", name="lookup", arguments={"q": "x"})
    prompt = UserMessage.text(task.prompt)
    reply = AssistantMessage(content=(call,), stop_reason="tool_use")
    # A crash in the middle of the batch: the call has no result, a marker follows it.
    first, second = Marker(kind="note", data={"i": 1}, at=1), Marker(kind="note", data={}, at=2)
    write_transcript(path, [prompt, reply], markers=[first, second])

    with trio.fail_after(30):
        summary = await run_fleet([task], demo_factory, out=tmp_path, fsync=False)
    assert (summary.done, summary.resumed) == (1, 1)
    loaded = load_transcript(path)
    check_transcript(loaded.messages)
    assert type(loaded.messages[2]) is ToolResultMessage  # the aborted result, added
    # Both markers stay where they were: before the added result, not after it.
    assert loaded.markers_of("note") == (first, second)


def _ended_transcript(n: int) -> list[Any]:
    return [
        UserMessage.text(f"What is {n} squared?"),
        AssistantMessage(
            content=(ToolCall(id="c1", name="lookup", arguments={"n": n}),),
            stop_reason="tool_use",
        ),
        ToolResultMessage(tool_call_id="c1", tool_name="lookup", content=(Text(text="ok"),)),
        AssistantMessage(content=(Text(text="done"),), stop_reason="stop"),
    ]


async def test_a_run_that_ended_before_its_line_was_written_is_not_run_again(
    tmp_path: Path,
) -> None:
    (tmp_path / "transcripts").mkdir()
    task = FleetTask(id="t1", prompt="What is 3 squared?")
    path = tmp_path / transcript_relpath("t1")
    write_transcript(path, _ended_transcript(3))
    before = path.read_bytes()

    def factory(task: FleetTask) -> TaskSetup:
        return TaskSetup(model=ScriptedModel([]))  # a request would end in an error

    summary = await run_fleet([task], factory, out=tmp_path)
    assert (summary.done, summary.failed, summary.resumed) == (1, 0, 0)
    (line,) = result_lines(tmp_path)
    assert (line["reason"], line["steps"]) == ("stop", 2)
    assert path.read_bytes() == before


async def test_a_crash_mid_batch_is_repaired_and_continued(tmp_path: Path) -> None:
    (tmp_path / "transcripts").mkdir()
    path = tmp_path / transcript_relpath("t1")
    cut = _ended_transcript(3)[:2]  # the call has no result: the process died in the tool
    write_transcript(path, cut)
    with path.open("ab") as f:
        f.write(b'{"role":"tool_res')  # and a torn last line
    model = ScriptedModel([AssistantMessage(content=(Text(text="ok"),), stop_reason="stop")])
    summary = await run_fleet(
        [FleetTask(id="t1", prompt="What is 3 squared?")],
        lambda task: TaskSetup(model=model),
        out=tmp_path,
    )
    assert (summary.done, summary.resumed) == (1, 1)
    messages = load_transcript(path).messages
    check_transcript(messages)
    assert messages[:2] == tuple(cut)
    recovered = messages[2]
    assert type(recovered) is ToolResultMessage
    assert recovered.details["recovered"] is True
    assert type(messages[3]) is CustomMessage
    assert messages[3].kind == RESUME_KIND
    # the resumed request saw the repaired transcript, not the marker
    assert model.requests[0].messages[-1] == recovered
    (line,) = result_lines(tmp_path)
    assert (line["reason"], line["steps"], line["resumed"]) == ("stop", 2, True)


async def test_max_steps_counts_across_resumptions(tmp_path: Path) -> None:
    (tmp_path / "transcripts").mkdir()
    path = tmp_path / transcript_relpath("t1")
    write_transcript(path, _ended_transcript(3)[:3])  # one step done, then the crash
    calls = [
        AssistantMessage(content=(ToolCall(id=f"c{i}", name="nope"),), stop_reason="tool_use")
        for i in range(2, 9)
    ]
    model = ScriptedModel(calls)
    line = await _run_t1(tmp_path, model, LoopConfig(max_steps=3))
    assert len(model.requests) == 2
    assert (line["reason"], line["steps"]) == ("max_steps", 3)


async def _run_t1(out: Path, model: ScriptedModel, config: LoopConfig) -> dict[str, Any]:
    """Run the fleet of task ``t1`` with ``model`` and ``config``; its result line."""
    await run_fleet(
        [FleetTask(id="t1", prompt="What is 3 squared?")],
        lambda task: TaskSetup(model=model, config=config),
        out=out,
    )
    (line,) = result_lines(out)
    return line


@pytest.mark.parametrize(
    ("budget", "per_reply"),
    [
        ({"max_output_tokens": 30}, Usage(input_tokens=5, output_tokens=10)),
        ({"max_input_tokens": 300}, Usage(input_tokens=60, output_tokens=1, cache_read_tokens=40)),
    ],
    ids=["output", "input"],
)
async def test_token_budgets_count_across_resumptions(
    tmp_path: Path, budget: dict[str, int], per_reply: Usage
) -> None:
    # Uninterrupted, each budget allows three replies (10, 20, 30 output tokens; or
    # 100, 200, 300 prompt tokens, where a fourth request would send 400).
    hang = True
    in_tool = trio.Event()
    ids = iter(range(1000))

    async def work(call: ToolCall, args: Any, ctx: Any) -> str:
        in_tool.set()
        if hang:
            await trio.sleep_forever()
        return "done"

    def reply(request: Any) -> AssistantMessage:
        call = ToolCall(id=f"c{next(ids)}", name="work")
        return AssistantMessage(content=(call,), stop_reason="tool_use", usage=per_reply)

    models: list[ScriptedModel] = []

    def factory(task: FleetTask) -> TaskSetup:
        models.append(ScriptedModel([reply] * 10))
        tool = Tool(name="work", description="Works.", parameters={"type": "object"}, execute=work)
        return TaskSetup(model=models[-1], tools=(tool,), config=LoopConfig(**budget))

    task = FleetTask(id="t1", prompt="Work.")
    for _ in range(3):  # killed three times, each time inside the tool after one reply
        in_tool = trio.Event()
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:

                async def fleet() -> None:
                    await run_fleet([task], factory, out=tmp_path, fsync=False)

                nursery.start_soon(fleet)
                await in_tool.wait()
                nursery.cancel_scope.cancel()
    hang = False
    with trio.fail_after(10):
        summary = await run_fleet([task], factory, out=tmp_path, fsync=False)
    assert [m.request_count for m in models] == [1, 1, 1, 0]  # no request once spent
    (line,) = result_lines(tmp_path)
    assert (line["reason"], line["steps"]) == ("usage_limit", 3)
    assert line["usage"]["output_tokens"] == 3 * per_reply.output_tokens
    assert (summary.done, summary.resumed) == (1, 0)  # recorded from its transcript
    messages = load_transcript(tmp_path / line["transcript"]).messages
    check_transcript(messages)
    assert sum(1 for m in messages if type(m) is AssistantMessage) == 3


async def test_a_budget_left_after_a_resumption_is_what_the_transcript_did_not_use(
    tmp_path: Path,
) -> None:
    (tmp_path / "transcripts").mkdir()
    path = tmp_path / transcript_relpath("t1")
    prompt, first, result = _ended_transcript(3)[:3]
    first = attrs.evolve(first, usage=Usage(output_tokens=25))
    write_transcript(path, [prompt, first, result])  # one reply of 25 tokens, then the crash
    call = ToolCall(id="c2", name="nope")
    replies = [
        AssistantMessage(content=(call,), stop_reason="tool_use", usage=Usage(output_tokens=20)),
        AssistantMessage(content=(Text(text="more"),), stop_reason="stop"),
    ]
    model = ScriptedModel(replies)
    line = await _run_t1(tmp_path, model, LoopConfig(max_output_tokens=40))
    # 25 + 20 reached 40: the second reply is never asked for (with a fresh budget of
    # 40 it would have been, 20 < 40).
    assert len(model.requests) == 1
    assert (line["reason"], line["steps"], line["resumed"]) == ("usage_limit", 2, True)
    assert line["usage"]["output_tokens"] == 45


async def test_context_messages_and_failures(tmp_path: Path) -> None:
    earlier = (
        UserMessage.text("Remember 7."),
        AssistantMessage(content=(Text(text="OK."),), stop_reason="stop"),
    )
    tasks = [
        FleetTask(id="with context", prompt="Which number?", messages=earlier),
        FleetTask(id="boom", prompt="x"),
        FleetTask(id="model error", prompt="x"),
    ]

    def factory(task: FleetTask) -> TaskSetup:
        if task.id == "boom":
            raise RuntimeError("no key for this task")
        if task.id == "model error":
            return TaskSetup(model=ScriptedModel([]))
        reply = AssistantMessage(content=(Text(text="7"),), stop_reason="stop")
        return TaskSetup(model=ScriptedModel([reply]))

    summary = await run_fleet(tasks, factory, out=tmp_path)
    assert (summary.done, summary.failed) == (3, 2)
    by_id = {line["id"]: line for line in result_lines(tmp_path)}
    assert by_id["boom"]["reason"] == "failed"
    assert by_id["boom"]["error"] == "RuntimeError: no key for this task"
    assert by_id["model error"]["reason"] == "error"
    assert "no response left" in by_id["model error"]["error"]
    ctx = by_id["with context"]
    assert ctx["transcript"].startswith("transcripts/with_context-")
    messages = load_transcript(tmp_path / ctx["transcript"]).messages
    assert messages[:2] == earlier
    assert [type(m).__name__ for m in messages[2:]] == ["UserMessage", "AssistantMessage"]
    assert ctx["steps"] == 1  # the context's own reply is not this run's step


async def test_a_torn_results_line_is_cut_and_its_task_recorded_once(tmp_path: Path) -> None:
    await run_fleet(demo_tasks(3, sleep=0), demo_factory, out=tmp_path)
    results = tmp_path / "results.jsonl"
    lines = results.read_bytes().split(b"\n")
    results.write_bytes(b"\n".join(lines[:2]) + b"\n" + lines[2][:25])  # the 3rd line torn
    summary = await run_fleet(demo_tasks(3, sleep=0), demo_factory, out=tmp_path)
    assert (summary.skipped, summary.done) == (2, 1)
    assert_fleet_complete(tmp_path, [t.id for t in demo_tasks(3)])


async def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text('{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n')
    with pytest.raises(ValueError, match=r"tasks.jsonl:2: task id 'a' was already used on line 1"):
        load_tasks(tasks_file)
    tasks_file.write_text('{"id": 5, "prompt": "x", "colour": 1}\n')
    with pytest.raises(ValueError, match=r"tasks.jsonl:1: unknown field\(s\) \['colour'\]"):
        load_tasks(tasks_file)
    tasks_file.write_text('{"id": 5}\n')
    with pytest.raises(ValueError, match="neither a prompt nor messages"):
        load_tasks(tasks_file)
    tasks_file.write_text('{"id": 5, "messages": [{"role": "robot"}]}\n')
    with pytest.raises(ValueError, match=r"tasks.jsonl:1: 'messages'"):
        load_tasks(tasks_file)
    with pytest.raises(ValueError, match="appears twice"):
        await run_fleet(
            [{"id": "a", "prompt": "x"}, {"id": "a", "prompt": "x"}],
            demo_factory,
            out=tmp_path / "dup",
        )
    with pytest.raises(ValueError, match="module:function"):
        await run_fleet([{"id": "a", "prompt": "x"}], "no_colon", out=tmp_path / "f")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.jsonl").write_text("garbage\n{}\n")
    with pytest.raises(ValueError, match=r"results.jsonl:1: not a result line"):
        await run_fleet([{"id": "a", "prompt": "x"}], demo_factory, out=tmp_path / "bad")
    assert (tmp_path / "bad" / "results.jsonl").read_text() == "garbage\n{}\n"


async def test_tasks_from_a_file_with_a_string_factory(tmp_path: Path) -> None:
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(
        "".join(
            json.dumps({"id": t.id, "prompt": t.prompt, "metadata": dict(t.metadata)}) + "\n"
            for t in demo_tasks(5, sleep=0)
        )
    )
    summary = await run_fleet(
        str(tasks_file), "trio_agent.fleet:demo_factory", out=tmp_path / "out"
    )
    assert summary.done == 5
    assert_fleet_complete(tmp_path / "out", [t.id for t in demo_tasks(5)])


async def test_progress_line(tmp_path: Path, autojump_clock: Any) -> None:
    import io

    stream = io.StringIO()
    await run_fleet(
        demo_tasks(10, sleep=1), demo_factory, out=tmp_path, progress=True, progress_stream=stream
    )
    text = stream.getvalue()
    assert "\r" in text
    final = text.rstrip("\n").split("\r")[-1]
    assert final.startswith("fleet: 10 done, 0 failed, 0 running, ")
    assert final.endswith(f"tasks/s, {10 * 171:,} tokens")


def test_command_line_demo(tmp_path: Path) -> None:
    from trio_agent import cli

    code = cli.main(
        ["fleet", "--demo", "--demo-tasks", "20", "--demo-sleep", "0", "--out", str(tmp_path)]
    )
    assert code == 0
    assert_fleet_complete(tmp_path, [t.id for t in demo_tasks(20)])


def test_command_line_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from trio_agent import cli

    assert cli.main(["fleet", "--out", str(tmp_path)]) == 2
    assert "give TASKS.jsonl" in capsys.readouterr().err
    tasks_file = tmp_path / "t.jsonl"
    tasks_file.write_text('{"id": "a", "prompt": "x"}\n')
    assert cli.main(["fleet", str(tasks_file), "--factory", "nope:f", "--out", str(tmp_path)]) == 2
    assert "bad --factory" in capsys.readouterr().err
    tasks_file.write_text("{\n")
    assert cli.main(["fleet", str(tasks_file), "--factory", "x:y", "--out", str(tmp_path)]) == 2
    assert "tasks" in capsys.readouterr().err


def test_fleet_help_lists_exit_codes_and_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    from trio_agent import cli

    with pytest.raises(SystemExit):
        cli.main(["fleet", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Exit codes: 0" in text
    assert "130 interrupted" in text
    assert "(default 64)" in text
    assert "(default 1,000)" in text
    # What the fleet does about failures, its lock and its bounds.
    assert "1 results.jsonl records a failed task (failed, error or timeout" in text
    assert "--retry-failed" in text
    assert "--task-timeout SECONDS" in text
    assert "OUT/fleet.lock holds the pid" in text
    assert "the task that hit it is not recorded" in text
    assert "current folder first on the module path" in text


def test_importing_the_fleet_does_not_import_ray() -> None:
    code = "import sys, trio_agent.fleet; assert 'ray' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ})


def test_the_ray_worker_body_runs_chunks_without_ray(tmp_path: Path) -> None:
    worker = FleetWorker(Job(factory="trio_agent.fleet:demo_factory", out=tmp_path), 4)
    try:
        assert worker.ready()
        tasks = list(demo_tasks(10, sleep=0))
        results = worker.run_chunk(tasks)
        again = worker.run_chunk(tasks)  # a chunk handed out twice: each run once
    finally:
        worker.stop()
    assert [r.id for r in results] == [t.id for t in tasks]
    assert all(r.reason == "stop" and r.steps == 2 for r in results)
    assert all(r.reason == "stop" and r.steps == 2 and not r.resumed for r in again)
    for r in results:
        check_transcript(load_transcript(tmp_path / r.transcript).messages)


def test_the_ray_worker_body_raises_a_storage_error_once_its_chunk_has_ended(
    tmp_path: Path,
) -> None:
    tasks = [*demo_tasks(4, sleep=0)]
    held = tmp_path / transcript_relpath(tasks[2].id)
    worker = FleetWorker(Job(factory="trio_agent.fleet:demo_factory", out=tmp_path), 4)
    try:
        write_transcript(held, [UserMessage.text("a run that another process writes")])

        async def hold_and_run() -> None:
            async with JsonlTranscript(held):  # its lock held, as by another process
                with pytest.raises(StorageError, match="is open in another process"):
                    await trio.to_thread.run_sync(worker.run_chunk, tasks)

        trio.run(hold_and_run)
    finally:
        worker.stop()
    for task in (tasks[0], tasks[1], tasks[3]):  # the others ran to their end
        messages = load_transcript(tmp_path / transcript_relpath(task.id)).messages
        assert messages[-1].text.endswith("squared is " + str(task.metadata["n"] ** 2) + ".")  # type: ignore[union-attr]


def test_the_fleet_benchmark_runs_at_a_small_size() -> None:
    from benchmarks import bench_fleet

    for measured in (
        bench_fleet.child_floor(20, 10),
        bench_fleet.child_fleet(20, 10, "never", 0),
    ):
        assert measured["wall"] > 0
        assert measured["rss_growth"] >= 0


# --- the fleet's own storage failing ----------------------------------------------------

SRC = Path(__file__).resolve().parent.parent.parent / "src"


def run_python(
    args: list[str],
    *,
    limit: tuple[int, int] | None = None,
    python_path: tuple[str, ...] = (),
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in a subprocess that imports this trio_agent (and ``python_path``),
    under the resource limit ``limit`` = (RLIMIT_x, value) if given (a file-size limit
    with SIGXFSZ ignored, so a write past it fails with EFBIG, as a full disk fails
    with ENOSPC)."""
    import resource

    def apply_limit() -> None:
        if limit is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # kept across exec
            resource.setrlimit(limit[0], (limit[1], limit[1]))

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join((str(SRC), *python_path)),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        preexec_fn=apply_limit,
        timeout=240,
        check=False,
    )


def fleet_command(
    *args: str, limit: tuple[int, int] | None = None, python_path: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """``trio-agent fleet --no-progress ARGS`` in a subprocess (see :func:`run_python`)."""
    command = ["-m", "trio_agent.cli", "fleet", "--no-progress", *args]
    return run_python(command, limit=limit, python_path=python_path)


def test_too_many_open_files_stops_the_fleet_and_records_no_failure(tmp_path: Path) -> None:
    import resource

    out = tmp_path / "fleet"
    demo = ("--demo", "--demo-tasks", "600", "--concurrency", "400", "--out", str(out))
    done = fleet_command(*demo, limit=(resource.RLIMIT_NOFILE, 200))
    assert done.returncode == 1, done.stderr
    assert "Too many open files" in done.stderr
    assert "ulimit -n" in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1  # one line: the cause, what to do
    lines = result_lines(out)
    assert 0 < len(lines) < 600
    # An open-file limit is not the tasks' failure: nothing is recorded failed, and every
    # transcript left on disk loads (no empty file from an open that half worked).
    assert {line["reason"] for line in lines} == {"stop"}
    assert transcripts_load_and_pair(out) >= len(lines)

    again = fleet_command(*demo)
    assert again.returncode == 0, again.stderr
    assert_fleet_complete(out, [t.id for t in demo_tasks(600)])


def _tasks_file(path: Path, tasks: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return path


def _demo_lines(count: int, *, sleep: float = 0.0) -> list[dict[str, Any]]:
    return [
        {"id": t.id, "prompt": t.prompt, "metadata": dict(t.metadata)}
        for t in demo_tasks(count, sleep=sleep)
    ]


def test_a_file_size_limit_stops_the_fleet_and_leaves_the_task_for_the_rerun(
    tmp_path: Path,
) -> None:
    import resource

    lines = _demo_lines(12)
    lines[5]["prompt"] = "What is 5 squared? " + "x" * 200_000  # its transcript's 1st line
    tasks = _tasks_file(tmp_path / "tasks.jsonl", lines)
    out = tmp_path / "out"
    cmd = (str(tasks), "--factory", "trio_agent.fleet:demo_factory", "--out", str(out))
    cmd_small = (*cmd, "--concurrency", "2")
    done = fleet_command(*cmd_small, limit=(resource.RLIMIT_FSIZE, 100_000))
    assert done.returncode == 1, done.stderr
    assert "File too large" in done.stderr
    assert "ulimit -f" in done.stderr
    assert "Traceback" not in done.stderr
    recorded = result_lines(out)
    assert {line["reason"] for line in recorded} == {"stop"}
    assert "demo-00005" not in {line["id"] for line in recorded}
    assert transcripts_load_and_pair(out) >= len(recorded)  # cut back to whole lines

    again = fleet_command(*cmd_small)
    assert again.returncode == 0, again.stderr
    assert_fleet_complete(out, [line["id"] for line in lines])
    big = load_transcript(out / "transcripts" / "demo-00005.jsonl").messages
    assert [type(m).__name__ for m in big].count("UserMessage") == 1


async def test_a_results_file_that_cannot_be_written_stops_the_fleet_with_whole_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await run_fleet(demo_tasks(3, sleep=0), demo_factory, out=tmp_path, fsync=False)
    results = tmp_path / "results.jsonl"
    before = results.read_bytes()
    real_fsync = os.fsync

    def no_space(fd: int) -> None:
        if os.fstat(fd).st_size > len(before):  # the results file, after its new line
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(StorageError, match=r"results.jsonl: \[Errno 28\] No space left"):
        await run_fleet(demo_tasks(6, sleep=0), demo_factory, out=tmp_path, fsync=False)
    monkeypatch.undo()
    assert results.read_bytes() == before  # the failed write was cut back off
    summary = await run_fleet(demo_tasks(6, sleep=0), demo_factory, out=tmp_path, fsync=False)
    assert (summary.skipped, summary.done) == (3, 3)
    assert_fleet_complete(tmp_path, [t.id for t in demo_tasks(6)])


# --- failed tasks: the exit code, --retry-failed ----------------------------------------

FLAKY_FACTORY = """
from pathlib import Path
from trio_agent.fleet import demo_factory

def build(task):
    flag = task.metadata.get("fails_until")
    if flag and not Path(flag).exists():
        raise RuntimeError("not yet")
    return demo_factory(task)
"""


def test_every_run_exits_1_while_a_task_is_recorded_failed(tmp_path: Path) -> None:
    (tmp_path / "flaky.py").write_text(FLAKY_FACTORY)
    flag = tmp_path / "fixed"
    lines = _demo_lines(3)
    lines[1]["metadata"]["fails_until"] = str(flag)
    tasks = _tasks_file(tmp_path / "tasks.jsonl", lines)
    out = tmp_path / "out"
    cmd = (str(tasks), "--factory", "flaky:build", "--out", str(out))

    first = fleet_command(*cmd, python_path=(str(tmp_path),))
    assert first.returncode == 1, first.stderr
    assert "0 resumed), 0 done before" in first.stdout
    rerun = fleet_command(*cmd, python_path=(str(tmp_path),))
    assert rerun.returncode == 1, rerun.stderr  # still failed in results.jsonl
    assert "1 task(s) recorded failed" in rerun.stderr
    assert "--retry-failed" in rerun.stderr
    assert "3 done before" in rerun.stdout
    reasons = {line["id"]: line["reason"] for line in result_lines(out)}
    assert reasons == {"demo-00000": "stop", "demo-00001": "failed", "demo-00002": "stop"}

    flag.touch()
    retried = fleet_command(*cmd, "--retry-failed", python_path=(str(tmp_path),))
    assert retried.returncode == 0, retried.stderr
    assert "1 done now (0 failed, 0 resumed, 1 retried), 2 done before" in retried.stdout
    recorded = result_lines(out)
    assert [(line["id"], line["reason"]) for line in recorded[3:]] == [("demo-00001", "stop")]
    assert fleet_command(*cmd, python_path=(str(tmp_path),)).returncode == 0


async def test_retry_failed_continues_a_transcript_that_ended_on_a_model_error(
    tmp_path: Path,
) -> None:
    task = FleetTask(id="t1", prompt="What is 3 squared?")
    summary = await run_fleet([task], lambda t: TaskSetup(model=ScriptedModel([])), out=tmp_path)
    assert (summary.failed, summary.still_failed) == (1, 1)
    again = await run_fleet([task], lambda t: TaskSetup(model=ScriptedModel([])), out=tmp_path)
    assert (again.done, again.skipped, again.still_failed) == (0, 1, 1)

    answer = AssistantMessage(content=(Text(text="9"),), stop_reason="stop")
    model = ScriptedModel([answer])
    retried = await run_fleet(
        [task], lambda t: TaskSetup(model=model), out=tmp_path, retry_failed=True
    )
    assert (retried.done, retried.retried, retried.resumed, retried.still_failed) == (1, 1, 1, 0)
    first, second = result_lines(tmp_path)
    assert (first["reason"], second["reason"], second["resumed"]) == ("error", "stop", True)
    messages = load_transcript(tmp_path / transcript_relpath("t1")).messages
    roles = [type(m).__name__ for m in messages]
    assert roles == ["UserMessage", "AssistantMessage", "CustomMessage", "AssistantMessage"]
    assert messages[1].stop_reason == "error"  # type: ignore[union-attr]
    assert messages[-1] == answer
    assert second["steps"] == 2  # the error reply and the answer
    # Run again, with or without the flag: nothing is left to do.
    for retry in (False, True):
        later = await run_fleet(
            [task], lambda t: TaskSetup(model=model), out=tmp_path, retry_failed=retry
        )
        assert (later.done, later.skipped, later.still_failed) == (0, 1, 0)
    assert len(result_lines(tmp_path)) == 2


# --- one fleet per output folder; transcripts never removed ------------------------------


async def test_a_second_fleet_on_the_same_folder_is_refused_with_the_holders_pid(
    tmp_path: Path,
) -> None:
    inside = trio.Event()
    release = trio.Event()

    async def slow(task: FleetTask) -> TaskSetup:
        inside.set()
        await release.wait()
        return demo_factory(task)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                partial(run_fleet, demo_tasks(5, sleep=0), slow, out=tmp_path, fsync=False)
            )
            await inside.wait()
            assert (tmp_path / "fleet.lock").read_text() == f"{os.getpid()}\n"
            with pytest.raises(FleetError, match=rf"in use by another fleet \(pid {os.getpid()}\)"):
                await run_fleet(demo_tasks(5, sleep=0), demo_factory, out=tmp_path)
            release.set()
    assert_fleet_complete(tmp_path, [t.id for t in demo_tasks(5)])
    assert not (tmp_path / "fleet.lock").exists()  # removed, still locked, at the end
    again = await run_fleet(demo_tasks(5, sleep=0), demo_factory, out=tmp_path)
    assert again.skipped == 5


def test_two_commands_on_one_folder_the_second_exits_1_naming_the_first(tmp_path: Path) -> None:
    out = tmp_path / "fleet"
    demo = ("--demo", "--demo-tasks", "200", "--demo-sleep", "0.2", "--concurrency", "20")
    log = tmp_path / "first.log"
    lock = out / "fleet.lock"
    with child_process(fleet_cli("--no-progress", *demo, "--out", str(out)), log) as first:
        locked = lambda: lock.exists() and bool(lock.read_text())  # noqa: E731
        wait_until(first, log, locked, within=60, what="the first fleet never took the lock")
        second = fleet_command(*demo, "--out", str(out))
        assert first.poll() is None, "the first fleet ended too soon for this test"
        assert first.wait(timeout=120) == 0, log.read_text()
    assert second.returncode == 1
    assert f"in use by another fleet (pid {first.pid})" in second.stderr
    assert "Traceback" not in second.stderr
    assert_fleet_complete(out, [t.id for t in demo_tasks(200)])  # each task once


async def test_a_transcript_another_process_holds_is_never_removed(tmp_path: Path) -> None:
    earlier = (UserMessage.text("Remember 7."),)
    task = FleetTask(id="t1", messages=earlier)  # messages only: no prompt
    path = tmp_path / transcript_relpath("t1")
    (tmp_path / "transcripts").mkdir()
    write_transcript(path, earlier)  # its messages are in: as if a run had just begun
    inode = path.stat().st_ino
    reply = AssistantMessage(content=(Text(text="7"),), stop_reason="stop")
    model = ScriptedModel([reply])
    async with JsonlTranscript(path):  # a writer elsewhere has it open (and locked)
        with pytest.raises(StorageError, match="is open in another process"):
            await run_fleet([task], lambda t: TaskSetup(model=model), out=tmp_path)
        assert path.stat().st_ino == inode  # the same file, still there
    assert model.requests == []  # the model was not asked while another writer had it
    assert result_lines(tmp_path) == []

    summary = await run_fleet([task], lambda t: TaskSetup(model=model), out=tmp_path)
    assert (summary.done, summary.failed) == (1, 0)
    assert load_transcript(path).messages == (*earlier, reply)


async def test_two_ids_that_used_to_share_a_file_get_one_each(tmp_path: Path) -> None:
    ids = ["a b", "a_b-c8687a08aa5d6ed2"]  # the second was the first one's file name
    tasks = [FleetTask(id=i, prompt=f"Who are you, {i}?") for i in ids]

    def factory(task: FleetTask) -> TaskSetup:
        reply = AssistantMessage(content=(Text(text=f"I am {task.id}"),), stop_reason="stop")
        return TaskSetup(model=ScriptedModel([reply]))

    # One at a time: the second task would otherwise have appended to the first's file.
    summary = await run_fleet(tasks, factory, out=tmp_path, concurrency=1)
    assert (summary.done, summary.failed) == (2, 0)
    lines = result_lines(tmp_path)
    assert len({line["transcript"] for line in lines}) == 2
    for line in lines:
        prompt, answer = load_transcript(tmp_path / line["transcript"]).messages
        assert prompt.content == (Text(text=f"Who are you, {line['id']}?"),)
        assert answer.text == f"I am {line['id']}"  # type: ignore[union-attr]


# --- task_timeout --------------------------------------------------------------------------


@pytest.fixture
def patient_clock() -> MockClock:
    """A virtual clock that jumps once the loop has been idle for 0.5 s of real time: file
    writes in worker threads (real time) finish before it jumps, where a plain autojump
    clock would jump past a timeout while a transcript line is being written."""
    return MockClock(autojump_threshold=0.5)


def _stalling_model() -> ScriptedModel:
    model = ScriptedModel(
        [
            [
                Start(),
                TextStart(index=0),
                TextDelta(index=0, delta="Let me th"),
                TextDelta(index=0, delta="ink"),
            ]
        ]
    )
    model.pause_at(0, 3)  # never released: the model stalls mid-reply
    return model


async def test_a_stalled_model_times_out_and_retry_failed_continues_it(
    tmp_path: Path, patient_clock: MockClock
) -> None:
    tasks = [FleetTask(id="stalls", prompt="Think."), FleetTask(id="quick", prompt="Hi.")]
    answer = AssistantMessage(content=(Text(text="Done."),), stop_reason="stop")

    def factory(task: FleetTask) -> TaskSetup:
        if task.id == "stalls":
            return TaskSetup(model=_stalling_model())
        return TaskSetup(model=ScriptedModel([answer]))

    with trio.fail_after(300):
        summary = await run_fleet(tasks, factory, out=tmp_path, task_timeout=30)
    assert trio.current_time() == pytest.approx(30, abs=1)
    assert (summary.done, summary.failed, summary.still_failed) == (2, 1, 1)
    by_id = {line["id"]: line for line in result_lines(tmp_path)}
    assert by_id["quick"]["reason"] == "stop"
    stalled = by_id["stalls"]
    assert (stalled["reason"], stalled["steps"]) == ("timeout", 1)
    assert stalled["error"] == "the task took longer than its task_timeout of 30s"
    messages = load_transcript(tmp_path / stalled["transcript"]).messages
    check_transcript(messages)
    cut = messages[-1]
    assert isinstance(cut, AssistantMessage)
    assert (cut.stop_reason, cut.text) == ("aborted", "Let me th")  # the partial reply kept

    # A rerun skips it (recorded, failed); --retry-failed continues its transcript.
    again = await run_fleet(tasks, factory, out=tmp_path, task_timeout=30)
    assert (again.done, again.skipped, again.still_failed) == (0, 2, 1)
    model = ScriptedModel([answer])
    retried = await run_fleet(
        tasks, lambda t: TaskSetup(model=model), out=tmp_path, task_timeout=30, retry_failed=True
    )
    assert (retried.done, retried.retried, retried.resumed, retried.still_failed) == (1, 1, 1, 0)
    after = load_transcript(tmp_path / stalled["transcript"]).messages
    assert after[: len(messages)] == messages
    assert [type(m).__name__ for m in after[len(messages) :]] == [
        "CustomMessage",
        "AssistantMessage",
    ]
    assert result_lines(tmp_path)[-1]["reason"] == "stop"


async def test_a_stalled_factory_or_tool_times_out_too(
    tmp_path: Path, patient_clock: MockClock
) -> None:
    async def factory(task: FleetTask) -> TaskSetup:
        if task.id == "demo-00000":
            await trio.sleep_forever()  # a set-up that never returns
        return demo_factory(task)

    with trio.fail_after(300):
        # demo-00001's tool sleeps 1,000 s: the run is cut inside its batch.
        tasks = [*demo_tasks(1, sleep=0), *list(demo_tasks(2, sleep=1000))[1:]]
        summary = await run_fleet(tasks, factory, out=tmp_path, task_timeout=5)
    assert (summary.done, summary.failed) == (2, 2)
    by_id = {line["id"]: line for line in result_lines(tmp_path)}
    assert (by_id["demo-00000"]["reason"], by_id["demo-00000"]["steps"]) == ("timeout", 0)
    assert not (tmp_path / by_id["demo-00000"]["transcript"]).exists()
    in_tool = by_id["demo-00001"]
    assert (in_tool["reason"], in_tool["steps"]) == ("timeout", 1)
    messages = load_transcript(tmp_path / in_tool["transcript"]).messages
    check_transcript(messages)
    result = messages[-1]
    assert isinstance(result, ToolResultMessage)
    assert result.is_error
    assert "timed out" in result.text


def test_command_line_task_timeout_then_retry_failed(tmp_path: Path) -> None:
    from trio_agent import cli

    demo = ["fleet", "--demo", "--demo-tasks", "4", "--no-progress", "--out", str(tmp_path)]
    assert cli.main([*demo, "--demo-sleep", "60", "--task-timeout", "0.3"]) == 1
    assert [line["reason"] for line in result_lines(tmp_path)] == ["timeout"] * 4
    assert cli.main([*demo, "--demo-sleep", "0"]) == 1  # still recorded failed
    assert cli.main([*demo, "--demo-sleep", "0", "--retry-failed"]) == 0
    lines = result_lines(tmp_path)
    assert [line["reason"] for line in lines[4:]] == ["stop"] * 4
    assert all(line["resumed"] for line in lines[4:])
    assert cli.main([*demo, "--demo-sleep", "0"]) == 0


def test_command_line_rejects_a_bad_task_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trio_agent import cli

    for bad in ("0", "-1", "nan", "inf"):
        code = cli.main(["fleet", "--demo", "--out", str(tmp_path), "--task-timeout", bad])
        assert code == 2
        assert "--task-timeout must be a number of seconds above zero" in capsys.readouterr().err


# --- the factory on the command line -------------------------------------------------------

LAUNCHER = "import sys\nfrom trio_agent.cli import main\nsys.exit(main())\n"


def _launch(tmp_path: Path, work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``trio-agent ARGS`` run as the installed script runs: from a launcher in a folder
    of its own (which is what Python puts first on sys.path), in the folder ``work``."""
    launcher = tmp_path / "bin" / "trio-agent.py"
    launcher.parent.mkdir(exist_ok=True)
    launcher.write_text(LAUNCHER)
    return run_python([str(launcher), *args], cwd=work)


def test_a_factory_module_in_the_current_folder_is_found(tmp_path: Path) -> None:
    work = tmp_path / "project"
    work.mkdir()
    (work / "myagents.py").write_text("from trio_agent.fleet import demo_factory as build\n")
    _tasks_file(work / "tasks.jsonl", _demo_lines(3))
    done = _launch(
        tmp_path, work, "fleet", "tasks.jsonl", "--factory", "myagents:build", "--out", "out"
    )
    assert done.returncode == 0, done.stderr
    assert_fleet_complete(work / "out", [t.id for t in demo_tasks(3)])


def test_a_factory_that_cannot_be_imported_is_one_line(tmp_path: Path) -> None:
    work = tmp_path / "project"
    work.mkdir()
    (work / "broken.py").write_text("import json\n\nsettings = json.loads('{oops')\n")
    _tasks_file(work / "tasks.jsonl", _demo_lines(1))
    for factory, expected in (
        # The module's own error, and where in the module it happened (no traceback).
        ("broken:build", ("JSONDecodeError: Expecting property name", "broken.py, line 3)")),
        ("missing:build", ("No module named 'missing'", "on PYTHONPATH")),
    ):
        done = _launch(tmp_path, work, "fleet", "tasks.jsonl", "--factory", factory, "--out", "o")
        assert done.returncode == 2
        assert "Traceback" not in done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("trio-agent fleet: bad --factory: cannot import")
        for part in expected:
            assert part in line
