"""Fleets on a Ray cluster: a local cluster started here, on 127.0.0.1 only.

The cluster (``num_cpus=2``) is started once for this module and shut down after it.
Actors hold half a CPU each. Real processes, so the real clock; ``fail_after`` guards
every fleet. The tests of a cluster that does not answer run in subprocesses (see there).
"""

from __future__ import annotations

import errno
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio

from tests.kit.fleet import assert_fleet_complete, fleet_cli, result_lines
from tests.kit.processes import child_process, wait_until
from trio_agent import Usage
from trio_agent._store._locked_file import open_locked
from trio_agent.fleet import (
    FleetError,
    FleetTask,
    RayBackend,
    StorageError,
    TaskResult,
    TaskSetup,
    demo_factory,
    demo_tasks,
    run_fleet,
)
from trio_agent.fleet._progress import Counters
from trio_agent.fleet._task import transcript_relpath
from trio_agent.fleet._worker import Job

if TYPE_CHECKING:
    from collections.abc import Iterator

# Read when Ray is imported: without it, Ray binds to the machine's outward address.
# The tests stay on loopback (asserted in the fixture).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
ray = pytest.importorskip(
    "ray", reason="the Ray tests need the ray extra: pip install -e '.[test,ray]'"
)

TASKS = 300
SRC = Path(__file__).resolve().parent.parent / "src"


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )
    try:
        assert [n["NodeManagerAddress"] for n in ray.nodes()] == ["127.0.0.1"]
        yield
    finally:
        ray.shutdown()


async def _assert_cpus_released() -> None:
    """Every actor was killed: the cluster's 2 CPUs are free again (soon)."""
    for _ in range(600):  # polls Ray's view of the resources: up to 30 s
        if ray.available_resources().get("CPU", 0.0) >= 2.0:
            return
        await trio.sleep(0.05)
    raise AssertionError(f"CPUs still held: {ray.available_resources()}")


async def test_the_fleet_over_two_actors(cluster: None, tmp_path: Path) -> None:
    backend = RayBackend(address=None, actors=2, runs_per_actor=16, name_prefix="two-")
    with trio.fail_after(120):
        summary = await run_fleet(
            demo_tasks(TASKS, sleep=0.02), demo_factory, out=tmp_path, backend=backend, fsync=False
        )
    assert (summary.done, summary.failed, summary.skipped) == (TASKS, 0, 0)
    assert summary.usage.output_tokens == TASKS * 21
    lines = assert_fleet_complete(tmp_path, [t.id for t in demo_tasks(TASKS)])
    assert all(line["steps"] == 2 for line in lines)
    await _assert_cpus_released()  # the actors were released (they hold CPUs for life)


async def test_an_actor_killed_mid_fleet_loses_and_repeats_nothing(
    cluster: None, tmp_path: Path
) -> None:
    backend = RayBackend(address=None, actors=2, runs_per_actor=16, name_prefix="kill-")
    recorded: list[str] = []
    enough = trio.Event()

    def on_result(result: TaskResult) -> None:
        recorded.append(result.id)
        if len(recorded) == 60:
            enough.set()

    killed_at = -1
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:

            async def fleet() -> None:
                summary = await run_fleet(
                    demo_tasks(TASKS, sleep=0.05),
                    demo_factory,
                    out=tmp_path,
                    backend=backend,
                    fsync=False,
                    on_result=on_result,
                )
                assert (summary.done, summary.failed) == (TASKS, 0)

            nursery.start_soon(fleet)
            await enough.wait()
            actor = ray.get_actor("kill-0")
            ray.kill(actor)
            killed_at = len(recorded)
    assert 60 <= killed_at < TASKS
    assert len(recorded) == len(set(recorded)) == TASKS
    assert_fleet_complete(tmp_path, [t.id for t in demo_tasks(TASKS)])
    await _assert_cpus_released()


KILLER = "demo-00013"


def _kills_its_worker(task: FleetTask) -> TaskSetup:
    """The demo factory, except that task ``KILLER`` ends its worker's process at once
    (as a crash in native code would). Pickled by value: the workers cannot import this
    module."""
    if task.id == KILLER:
        os._exit(1)
    return demo_factory(task)


async def test_a_task_that_kills_its_worker_is_the_only_one_charged(
    cluster: None, tmp_path: Path
) -> None:
    # Chunks of 4, 4 chunks in flight per actor: the killer always takes 3 tasks of its
    # chunk down with it, and whatever else its actor runs then.
    backend = RayBackend(
        address=None, actors=2, runs_per_actor=8, chunk_size=4, name_prefix="crash-"
    )
    tasks = 41
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        with trio.fail_after(180):
            summary = await run_fleet(
                demo_tasks(tasks, sleep=0.2),
                _kills_its_worker,
                out=tmp_path,
                backend=backend,
                fsync=False,
            )
    finally:
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    lines = assert_fleet_complete(tmp_path, [t.id for t in demo_tasks(tasks)], failed={KILLER})
    assert [line["id"] for line in lines if line["reason"] != "stop"] == [KILLER]
    (killer,) = (line for line in lines if line["id"] == KILLER)
    assert killer["error"] == "its Ray actor died 3 times while running it alone"
    assert (summary.done, summary.failed) == (tasks, 1)
    await _assert_cpus_released()


async def test_a_factory_the_workers_cannot_resolve_is_the_local_error_in_one_line(
    cluster: None, tmp_path: Path
) -> None:
    factory = "trio_agent.fleet:no_such_factory"
    with pytest.raises(ValueError, match="has no") as local:
        await run_fleet(demo_tasks(3), factory, out=tmp_path / "local")
    backend = RayBackend(address=None, actors=1, runs_per_actor=2)
    with trio.fail_after(120), pytest.raises(ValueError, match=r"^on a Ray worker: ") as on_ray:
        await run_fleet(demo_tasks(3), factory, out=tmp_path / "ray", backend=backend)
    assert type(on_ray.value) is ValueError
    assert str(on_ray.value) == f"on a Ray worker: {local.value}"
    assert not (tmp_path / "ray" / "results.jsonl").read_bytes()  # nothing ran
    await _assert_cpus_released()


class _Recorder:
    """A backend's driver reduced to a list (``RayBackend.run`` called directly)."""

    def __init__(self) -> None:
        self.counters = Counters()
        self.results: list[TaskResult] = []

    def may_exist(self, task: FleetTask) -> bool:
        return True

    async def record(self, result: TaskResult) -> None:
        self.results.append(result)


async def test_an_actor_that_cannot_start_is_a_one_line_fleet_error(
    cluster: None, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("not a folder\n")
    job = Job(factory=demo_factory, out=tmp_path / "a-file" / "out")  # no transcripts there
    recorder = _Recorder()
    backend = RayBackend(address=None, actors=1, runs_per_actor=2)
    one_line = (  # "." matches no line break
        r"^a Ray actor of the fleet could not start: NotADirectoryError: \[Errno 20\] Not a "
        r"directory: '.*a-file/out/transcripts'$"
    )
    expected = pytest.RaisesGroup(pytest.RaisesExc(FleetError, match=one_line))
    with trio.fail_after(120), expected:  # run_fleet unwraps the group
        await backend.run(iter(demo_tasks(3)), job, recorder)
    assert recorder.results == []
    await _assert_cpus_released()


def test_the_command_line_on_ray(cluster: None, tmp_path: Path) -> None:
    from trio_agent import cli

    # Ray is already initialized here: the backend uses that connection.
    argv = ["fleet", "--demo", "--demo-tasks", "40", "--demo-sleep", "0", "--out", str(tmp_path)]
    assert cli.main([*argv, "--ray", "auto", "--actors", "2", "--concurrency", "4"]) == 0
    assert_fleet_complete(tmp_path, [t.id for t in demo_tasks(40)])


# --- the fleet's own storage failing on a worker ------------------------------------------


def test_a_transcript_held_elsewhere_stops_the_ray_fleet_in_one_line_and_a_rerun_completes(
    cluster: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trio_agent import cli

    out = tmp_path / "out"
    held = out / transcript_relpath("demo-00003")  # in the 2nd chunk: (demo-00002, -3)
    held.parent.mkdir(parents=True)
    ids = [t.id for t in demo_tasks(TASKS)]
    # Chunks of 2 (--concurrency 8 per actor), 16 tasks in flight per actor.
    argv = ["fleet", "--demo", "--demo-tasks", str(TASKS), "--demo-sleep", "0.05"]
    argv += ["--out", str(out), "--ray", "auto", "--actors", "2", "--concurrency", "8"]
    fd, _ = open_locked(held, os.O_RDWR)  # this process holds its lock: the actor's open fails
    try:
        assert cli.main([*argv, "--no-progress"]) == 1
    finally:
        os.close(fd)
    err = capsys.readouterr().err
    (line,) = err.strip().splitlines()  # one line: no remote traceback
    assert line.startswith(f"trio-agent fleet: the transcript {held} is open in another process")
    assert "The fleet stopped: no new task was started" in line
    assert "Ray" not in line

    assert (out / "results.jsonl").read_bytes().endswith(b"\n")  # whole lines only
    recorded = {entry["id"] for entry in result_lines(out)}
    assert {entry["reason"] for entry in result_lines(out)} == {"stop"}
    assert "demo-00003" not in recorded  # left for the rerun
    assert "demo-00002" in recorded  # ended beside it in its chunk: recorded
    assert len(recorded) < TASKS / 2  # no chunk was handed out after the stop
    # Every task that started (has a transcript) ended and was recorded: the chunks in
    # flight were let finish, none was cancelled half-way.
    started = {path.stem for path in (out / "transcripts").iterdir()} - {"demo-00003"}
    assert started == recorded

    assert cli.main([*argv, "--no-progress"]) == 0
    assert f"{TASKS - len(recorded)} done now" in capsys.readouterr().out
    assert_fleet_complete(out, ids)  # every task exactly once


def test_a_chunks_storage_error_crosses_processes_with_its_cause_and_results() -> None:
    from trio_agent.fleet._fleet import storage_stop
    from trio_agent.fleet._ray import _ChunkStopped

    errors = []
    for code, text in ((errno.ENOSPC, "No space left on device"), (errno.EMFILE, "Too many")):
        error = StorageError(f"cannot write or read the transcript t: [Errno {code}] {text}")
        error.__cause__ = OSError(code, text)
        errors.append(error)
    done = TaskResult(
        id="t0", reason="stop", steps=1, usage=Usage(), wall_time=0.1, error=None, transcript="x"
    )
    # As Ray sends an actor's error to the driver: pickled (RayTaskError checks it with
    # pickle, Ray ships it with cloudpickle).
    for dumps in (pickle.dumps, ray.cloudpickle.dumps):
        back = pickle.loads(dumps(_ChunkStopped(errors, [done])))
        assert isinstance(back, _ChunkStopped)  # a StorageError
        assert str(back) == str(errors[0])
        assert back.results == [done]
        assert [str(e) for e in back.errors] == [str(e) for e in errors]
        assert [getattr(e.__cause__, "errno", None) for e in back.errors] == [
            errno.ENOSPC,
            errno.EMFILE,
        ]
        stop = storage_stop(back.errors)  # what the driver raises: the cause's advice in it
        assert "(and 1 more task(s) like it)" in str(stop)
        assert "free some disk space" in str(stop)


# --- the factory and the output folder, from the current folder ---------------------------

MODULE = "from trio_agent.fleet import demo_factory as build\n"


def _tasks_file(path: Path, count: int) -> None:
    lines = (
        json.dumps({"id": t.id, "prompt": t.prompt, "metadata": dict(t.metadata)})
        for t in demo_tasks(count, sleep=0)
    )
    path.write_text("".join(line + "\n" for line in lines))


def test_the_command_in_a_project_folder_on_ray(cluster: None, tmp_path: Path) -> None:
    """``trio-agent fleet --ray ADDRESS`` run as the installed script is, from a folder
    holding the factory module, with a relative --out: the actors import the module and
    write the transcripts under that folder (not under the cluster's current folder)."""
    work = tmp_path / "project"
    work.mkdir()
    (work / "myagents.py").write_text(MODULE)
    _tasks_file(work / "tasks.jsonl", 20)
    launcher = tmp_path / "bin" / "trio-agent.py"
    launcher.parent.mkdir()
    launcher.write_text("import sys\nfrom trio_agent.cli import main\nsys.exit(main())\n")
    address = ray.get_runtime_context().gcs_address
    args = ["fleet", "tasks.jsonl", "--factory", "myagents:build", "--out", "out"]
    args += ["--ray", address, "--actors", "2", "--concurrency", "4", "--no-progress"]
    done = subprocess.run(
        [sys.executable, str(launcher), *args],
        cwd=work,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert_fleet_complete(work / "out", [t.id for t in demo_tasks(20)])


def test_a_factory_in_the_current_folder_reaches_an_open_connection(
    cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ray was connected from another folder (the fixture's): the actors still find the
    module of the driver's current folder."""
    from trio_agent import cli

    name = f"agents_{tmp_path.name.replace('-', '_')}"  # a module name of this test only
    (tmp_path / f"{name}.py").write_text(MODULE)
    _tasks_file(tmp_path / "tasks.jsonl", 10)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the command puts "." on it
    monkeypatch.delitem(sys.modules, name, raising=False)
    argv = ["fleet", "tasks.jsonl", "--factory", f"{name}:build", "--out", "out"]
    assert cli.main([*argv, "--ray", "auto", "--actors", "1", "--concurrency", "4"]) == 0
    sys.modules.pop(name, None)
    assert_fleet_complete(tmp_path / "out", [t.id for t in demo_tasks(10)])


def test_a_factory_only_the_driver_can_import_is_a_one_line_usage_error(
    cluster: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from trio_agent import cli

    name = f"driver_only_{tmp_path.name.replace('-', '_')}"
    elsewhere = tmp_path / "driver-path"  # on the driver's sys.path only, as PYTHONPATH
    elsewhere.mkdir()
    (elsewhere / f"{name}.py").write_text(MODULE)
    _tasks_file(tmp_path / "tasks.jsonl", 3)
    monkeypatch.syspath_prepend(str(elsewhere))
    argv = ["fleet", str(tmp_path / "tasks.jsonl"), "--factory", f"{name}:build"]
    argv += ["--out", str(tmp_path / "out"), "--ray", "auto", "--actors", "1"]
    try:
        assert cli.main(argv) == 2
    finally:
        sys.modules.pop(name, None)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (
        f"trio-agent fleet: bad --factory: on a Ray worker: cannot import {name!r} for the "
        f"factory '{name}:build': No module named {name!r} (is it in the current folder or "
        "on PYTHONPATH?)"
    )
    assert not (tmp_path / "out" / "results.jsonl").read_bytes()


# --- a cluster that does not answer ------------------------------------------------------
# Each in a subprocess of its own: ray.init cannot be stopped, and the attempt these tests
# abandon goes on in a thread of the process that started it (the cluster of this module's
# other tests must not meet it).


def _closed_address() -> str:
    """An address on 127.0.0.1 where nothing listens (a port bound once, then freed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def _fleet_cli(*args: str) -> list[str]:
    return fleet_cli("--demo", "--demo-tasks", "3", *args)


def test_an_unreachable_cluster_is_a_clear_error_after_the_timeout(tmp_path: Path) -> None:
    address = _closed_address()
    started = time.monotonic()
    done = subprocess.run(
        _fleet_cli("--ray", address, "--ray-timeout", "2", "--out", str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=90,  # without a bound, Ray keeps trying for many minutes
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"trio-agent fleet: no Ray cluster answered at {address!r} within 2 s "
        "(is it running, and reachable from here?)"
    )
    assert done.stdout == ""
    assert 2 <= elapsed < 45  # the 2 s wait, plus starting Python and importing Ray
    assert not (tmp_path / "results.jsonl").read_bytes()  # nothing ran


def test_a_cancel_ends_the_wait_for_an_unreachable_cluster_at_once(tmp_path: Path) -> None:
    code = f"""
import trio
from trio_agent.fleet import RayBackend, demo_factory, demo_tasks, run_fleet

async def main() -> None:
    backend = RayBackend(address={_closed_address()!r}, connect_timeout=None)
    with trio.move_on_after(1) as scope:
        await run_fleet(demo_tasks(3), demo_factory, out={str(tmp_path)!r}, backend=backend)
    assert scope.cancelled_caught
    print(trio.current_time() - scope.deadline)

trio.run(main)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    late = float(done.stdout)
    # Returned at the cancel, not when Ray gave up (it keeps trying for minutes); the
    # bound leaves room for a busy machine, as the Ctrl-C test's does.
    assert 0 <= late < 10


def test_ctrl_c_ends_the_wait_for_an_unreachable_cluster(tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    args = ("--ray", _closed_address(), "--ray-timeout", "600", "--progress")
    with child_process(_fleet_cli(*args, "--out", str(tmp_path / "out")), log) as child:
        # The progress line shows once the fleet's loop runs, ray.init waiting in its thread.
        shown = lambda: b"fleet: 0 done" in log.read_bytes()  # noqa: E731
        wait_until(child, log, shown, within=60, what="no progress line", poll=0.05)
        time.sleep(0.5)
        interrupted = time.monotonic()
        child.send_signal(signal.SIGINT)
        child.wait(timeout=60)
        took = time.monotonic() - interrupted
    assert child.returncode == 130, log.read_text()
    assert took < 10, took


def test_a_bad_ray_timeout_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trio_agent import cli

    for bad in ("0", "-1", "nan"):
        assert cli.main(_fleet_cli("--ray", "auto", "--ray-timeout", bad)[3:]) == 2
        assert "--ray-timeout must be a number of seconds above 0" in capsys.readouterr().err
    with pytest.raises(ValueError, match="connect_timeout must be a number of seconds"):
        RayBackend(connect_timeout=0)
    assert RayBackend().connect_timeout == 60


def test_without_ray_the_command_says_how_to_install_it(tmp_path: Path) -> None:
    # Ray made unimportable in the child: the command's own message, not "bad --factory".
    code = (
        "import sys; sys.modules['ray'] = None; from trio_agent.cli import main; sys.exit(main())"
    )
    args = ["fleet", "--demo", "--demo-tasks", "3", "--out", str(tmp_path), "--ray", "auto"]
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=90
    )
    assert done.returncode == 1
    assert done.stderr == (
        "trio-agent fleet: RayBackend needs Ray: pip install 'trio-agent[ray]'\n"
    )
