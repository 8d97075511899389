"""Fleets on a Ray cluster: a local cluster started here, on 127.0.0.1 only.

The cluster (``num_cpus=2``) is started once for this module and shut down after it.
Actors hold half a CPU each. Real processes, so the real clock; ``fail_after`` guards
every fleet.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest
import trio

from fleetkit import assert_fleet_complete
from trio_agent.fleet import FleetError, RayBackend, TaskResult, demo_factory, demo_tasks, run_fleet

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
