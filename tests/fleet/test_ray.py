"""Fleets on a Ray cluster: a local cluster started here, on 127.0.0.1 only.

The cluster (``num_cpus=2``) is started once for this module and shut down after it.
Actors hold half a CPU each. Real processes, so the real clock; ``fail_after`` guards
every fleet. The tests of a cluster that does not answer run in subprocesses (see there).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest
import trio

from tests.kit.fleet import assert_fleet_complete
from trio_agent.fleet import (
    FleetError,
    FleetTask,
    RayBackend,
    TaskResult,
    TaskSetup,
    demo_factory,
    demo_tasks,
    run_fleet,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

# Read when Ray is imported: without it, Ray binds to the machine's outward address.
# The tests stay on loopback (asserted in the fixture).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
ray = pytest.importorskip(
    "ray", reason="the Ray tests need the ray extra: pip install -e '.[test,ray]'"
)

TASKS = 300


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


async def test_an_actor_that_cannot_start_is_a_clear_error(cluster: None, tmp_path: Path) -> None:
    backend = RayBackend(address=None, actors=1, runs_per_actor=2)
    with trio.fail_after(120), pytest.raises(FleetError, match="could not start"):
        await run_fleet(
            demo_tasks(3), "trio_agent.fleet:no_such_factory", out=tmp_path, backend=backend
        )
    await _assert_cpus_released()


def test_the_command_line_on_ray(cluster: None, tmp_path: Path) -> None:
    from trio_agent import cli

    # Ray is already initialized here: the backend uses that connection.
    argv = ["fleet", "--demo", "--demo-tasks", "40", "--demo-sleep", "0", "--out", str(tmp_path)]
    assert cli.main([*argv, "--ray", "auto", "--actors", "2", "--concurrency", "4"]) == 0
    assert_fleet_complete(tmp_path, [t.id for t in demo_tasks(40)])


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
    return [sys.executable, "-m", "trio_agent.cli", "fleet", "--demo", "--demo-tasks", "3", *args]


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
    assert 0 <= late < 1.0  # returned at the cancel, not when Ray gave up


def test_ctrl_c_ends_the_wait_for_an_unreachable_cluster(tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    args = ("--ray", _closed_address(), "--ray-timeout", "600", "--progress")
    with log.open("wb") as err:
        child = subprocess.Popen(
            _fleet_cli(*args, "--out", str(tmp_path / "out")), stdout=subprocess.DEVNULL, stderr=err
        )
    try:
        deadline = time.monotonic() + 60
        # The progress line shows once the fleet's loop runs, ray.init waiting in its thread.
        while b"fleet: 0 done" not in log.read_bytes():
            assert child.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        time.sleep(0.5)
        interrupted = time.monotonic()
        child.send_signal(signal.SIGINT)
        child.wait(timeout=60)
        took = time.monotonic() - interrupted
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
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
