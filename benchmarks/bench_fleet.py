"""Fleet throughput: ``run_fleet`` against the W3 floor, locally and on Ray.

``python -m benchmarks.bench_fleet [--full] [--no-ray] [--repeats N]``

Every task has W3's shape (one run: a reply with one tool call sleeping 10 ms, then a
final reply), here through the demo fleet (``demo_tasks``/``demo_factory``): each task
also builds its scripted model and tool through the factory, writes a JSONL transcript
(4 messages) and one line of ``results.jsonl`` (fsynced, group commit).

The floor is W3's bare trio loop (``bench_turns.floor_loop``: stream the reply, run the
call in a nursery, append to a list) for the same number of runs under the same limit on
runs at once — no files, no results, no factory. Each figure is measured in a fresh
subprocess (so peak RSS is this workload's alone), medians of ``--repeats``; memory per
running task is the peak RSS growth divided by the runs at once.

Ray rows start a local cluster (``num_cpus=2``, on 127.0.0.1) once, outside the timing,
and run the same fleet over 1 and 2 actors (half a CPU each), beside the local figure at
the same total concurrency.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

LOCAL_SIZES = (1_000, 10_000)
FULL_SIZES = (*LOCAL_SIZES, 100_000)
CONCURRENCY = 1_000
RAY_TASKS = 2_000
RAY_RUNS_PER_ACTOR = 128


def _status_kb(key: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
        f.write("5")


def _measure(fn: Any) -> dict[str, Any]:
    import trio

    gc.collect()
    _reset_peak()
    before = _status_kb("VmRSS")
    cpu = time.process_time()
    wall = time.perf_counter()
    trio.run(fn)
    wall = time.perf_counter() - wall
    return {
        "wall": wall,
        "cpu": time.process_time() - cpu,
        "rss_growth": (_status_kb("VmHWM") - before) * 1024,
    }


def child_floor(tasks: int, concurrency: int) -> dict[str, Any]:
    import trio

    from trio_agent._bench.bench_batch import sleep_tool
    from trio_agent._bench.bench_runs import script
    from trio_agent._bench.bench_turns import floor_loop

    replies = script(tasks)
    tools = {"sleep": sleep_tool}

    async def main() -> None:
        limiter = trio.CapacityLimiter(concurrency)
        done = [0]

        async def one(token: object) -> None:
            try:
                transcript = await floor_loop(replies, tools)
            finally:
                limiter.release_on_behalf_of(token)
            assert len(transcript) == 4
            done[0] += 1

        # As the fleet does: a task is started only once a slot is free.
        async with trio.open_nursery() as nursery:
            for _ in range(tasks):
                token = object()
                await limiter.acquire_on_behalf_of(token)
                nursery.start_soon(one, token)
        assert done[0] == tasks

    return _measure(main)


def child_fleet(tasks: int, concurrency: int, fsync: str, ray_actors: int = 0) -> dict[str, Any]:
    from trio_agent.fleet import RayBackend, demo_factory, demo_tasks, run_fleet

    backend = None
    if ray_actors:
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        import ray

        ray.init(
            num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False
        )
        assert [n["NodeManagerAddress"] for n in ray.nodes()] == ["127.0.0.1"]
        backend = RayBackend(address=None, actors=ray_actors, runs_per_actor=concurrency)
    mode: Any = {"turn": "turn", "never": False}[fsync]
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as out:

        async def main() -> None:
            summary = await run_fleet(
                demo_tasks(tasks, sleep=0.010),
                demo_factory,
                out=out,
                concurrency=concurrency,
                backend=backend,
                fsync=mode,
                progress=False,
            )
            assert summary.done == tasks
            assert summary.failed == 0

        result = _measure(main)
    if ray_actors:
        import ray

        ray.shutdown()
    return result


def _run_child(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_fleet", "--child", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench child {args} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _median(samples: list[dict[str, Any]], key: str) -> float:
    return statistics.median(s[key] for s in samples)


def _row(label: str, tasks: int, conc: int, ours: list[dict[str, Any]], floor: Any) -> str:
    wall = _median(ours, "wall")
    rate = tasks / wall
    mem = _median(ours, "rss_growth") / min(tasks, conc)
    if floor is None:
        return f"| {label} | {tasks:,} | {conc:,} | {rate:,.0f}/s | | | {mem / 1024:,.1f} KB |"
    f_wall = _median(floor, "wall")
    f_mem = _median(floor, "rss_growth") / min(tasks, conc)
    return (
        f"| {label} | {tasks:,} | {conc:,} | {rate:,.0f}/s | {tasks / f_wall:,.0f}/s | "
        f"{wall / f_wall:.1f}× | {mem / 1024:,.1f} KB (floor {f_mem / 1024:,.1f} KB) |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_fleet")
    parser.add_argument("--full", action="store_true", help="also 100,000 tasks (minutes)")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray rows")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        if kind == "floor":
            out = child_floor(int(rest[0]), int(rest[1]))
        else:
            out = child_fleet(int(rest[0]), int(rest[1]), rest[2], int(rest[3]))
        print(json.dumps(out))
        return 0

    lines = [
        "| fleet | tasks | runs at once | ours | W3 floor | wall ratio "
        "| peak RSS per running task |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]

    def rep(*a: str) -> list[dict[str, Any]]:
        return [_run_child(*a) for _ in range(args.repeats)]

    for tasks in FULL_SIZES if args.full else LOCAL_SIZES:
        print(f"local {tasks:,}...", file=sys.stderr)
        floor = rep("floor", str(tasks), str(CONCURRENCY))
        ours = rep("fleet", str(tasks), str(CONCURRENCY), "never", "0")
        lines.append(_row("local, fsync never", tasks, CONCURRENCY, ours, floor))
    print("local fsync=turn...", file=sys.stderr)
    ours = rep("fleet", "1000", str(CONCURRENCY), "turn", "0")
    lines.append(_row("local, fsync per turn", 1000, CONCURRENCY, ours, None))
    if not args.no_ray:
        for actors in (1, 2):
            conc = actors * RAY_RUNS_PER_ACTOR
            print(f"local and Ray, {actors} actor(s)...", file=sys.stderr)
            floor = rep("floor", str(RAY_TASKS), str(conc))
            local = rep("fleet", str(RAY_TASKS), str(conc), "never", "0")
            lines.append(_row("local, fsync never", RAY_TASKS, conc, local, floor))
            ray_rows = rep("fleet", str(RAY_TASKS), str(RAY_RUNS_PER_ACTOR), "never", str(actors))
            lines.append(
                _row(
                    f"Ray, {actors} actor(s) × {RAY_RUNS_PER_ACTOR}",
                    RAY_TASKS,
                    conc,
                    ray_rows,
                    floor,
                )
            )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
