"""Fleets on one machine: tasks in, results and transcripts out, resumable.

The big runs use the demo fleet (``trio_agent.fleet.demo_tasks``/``demo_factory``):
each task's scripted model calls a ``lookup`` tool once (it sleeps), then answers. The
SIGKILL test runs ``trio-agent fleet`` in a subprocess, so it uses the real clock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio

from fleetkit import assert_fleet_complete, result_lines
from trio_agent import (
    AssistantMessage,
    BeforeToolCallContext,
    CustomMessage,
    LoopConfig,
    Text,
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
    FleetTask,
    FleetWorker,
    Job,
    TaskSetup,
    demo_factory,
    demo_tasks,
    load_tasks,
    run_fleet,
)
from trio_agent.fleet._task import transcript_relpath
from trio_agent.fleet._worker import RESUME_KIND
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from pathlib import Path


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
    cmd = [
        sys.executable,
        "-m",
        "trio_agent.cli",
        "fleet",
        "--demo",
        "--demo-sleep",
        "0.05",
        "--concurrency",
        "32",
        "--fsync",
        "never",
        "--no-progress",
        "--out",
        str(out),
    ]
    log = tmp_path / "child.log"
    with log.open("wb") as err:
        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 120
        results = out / "results.jsonl"
        while not (results.exists() and results.read_bytes().count(b"\n") >= 150):
            assert child.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the fleet made no progress"
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
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
    cmd = [
        sys.executable,
        "-m",
        "trio_agent.cli",
        "fleet",
        "--demo",
        "--demo-tasks",
        "300",
        "--demo-sleep",
        "0.3",
        "--concurrency",
        "40",
        "--fsync",
        "never",
        "--no-progress",
        "--out",
        str(out),
    ]
    log = tmp_path / "child.log"
    with log.open("wb") as err:
        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 120
        results = out / "results.jsonl"
        while not (results.exists() and results.read_bytes().count(b"\n") >= 40):
            assert child.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the fleet made no progress"
            time.sleep(0.01)
        child.send_signal(signal.SIGINT)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
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


def test_the_fleet_benchmark_runs_at_a_small_size() -> None:
    from benchmarks import bench_fleet

    for measured in (
        bench_fleet.child_floor(20, 10),
        bench_fleet.child_fleet(20, 10, "never", 0),
    ):
        assert measured["wall"] > 0
        assert measured["rss_growth"] >= 0
