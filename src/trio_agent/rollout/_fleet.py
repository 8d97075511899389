"""``run_rollouts``: a fleet in rollout mode — ``n`` samples per task, each scored, one
line per sample in ``rollouts.jsonl``.

Theory of operation. The tasks are expanded into ``n`` fleet tasks each (ids
``<id>.s0`` … ``<id>.s<n-1>``; a single sample keeps the task's id) and handed to
:func:`~trio_agent.fleet.run_fleet`, which runs, records and resumes them as any fleet.
Each result the fleet records goes through a memory channel to one writer task, which
loads the transcript, scores it (the reward function), builds its
:class:`Trajectory` and appends a line to ``rollouts.jsonl``. When the fleet is done,
every task in ``results.jsonl`` without a line in ``rollouts.jsonl`` (a crash between
the two, a task finished by an earlier call) gets one: running the same call again
completes the file and never writes a sample twice.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from trio_agent import load_transcript
from trio_agent.fleet import (
    FleetSummary,
    FleetTask,
    TaskResult,
    load_tasks,
    run_fleet,
    task_from_json,
)

from ._rollout import score
from ._trajectory import Trajectory

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping

    from trio_agent import Message
    from trio_agent.fleet import Factory

__all__ = ["ROLLOUTS_FILE", "RolloutFleetSummary", "run_rollouts"]

ROLLOUTS_FILE = "rollouts.jsonl"
"""The name of the file in the output folder with one line per scored sample."""


@attrs.frozen(kw_only=True)
class RolloutFleetSummary:
    """What :func:`run_rollouts` did.

    Attributes:
        fleet: the fleet's own summary (tasks done, failed, skipped, usage...).
        written: lines this call added to ``rollouts.jsonl``.
        path: ``rollouts.jsonl``.
    """

    fleet: FleetSummary
    written: int
    path: Path


def _expand(tasks: Iterable[FleetTask | Mapping[str, Any]], n: int) -> Iterator[FleetTask]:
    for number, item in enumerate(tasks, start=1):
        task = item if isinstance(item, FleetTask) else task_from_json(item, where=f"task {number}")
        if n == 1:
            yield attrs.evolve(task, metadata={**task.metadata, "group": task.id, "sample": 0})
            continue
        for k in range(n):
            yield attrs.evolve(
                task,
                id=f"{task.id}.s{k}",
                metadata={**task.metadata, "group": task.id, "sample": k},
            )


def _written(path: Path) -> set[str]:
    """Ids already in ``rollouts.jsonl``; a torn last line (a crash mid-write) is cut
    off, so that the next line starts on a line of its own."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return set()
    if data and not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]
        os.truncate(path, len(data))
    ids = set()
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            ids.add(json.loads(line)["id"])
        except (ValueError, KeyError, TypeError):
            continue
    return ids


def _recorded(path: Path) -> dict[str, TaskResult]:
    """The last result line of each task in ``results.jsonl``."""
    found: dict[str, TaskResult] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return found
    for line in text.splitlines():
        try:
            result = TaskResult.from_json(json.loads(line))
        except (ValueError, KeyError, TypeError):
            continue
        found[result.id] = result
    return found


def _append(path: Path, lines: list[str]) -> None:
    if lines:
        with open(path, "a", encoding="utf-8") as f:
            f.write("".join(lines))


async def run_rollouts(
    tasks: Iterable[FleetTask | Mapping[str, Any]] | str | os.PathLike[str],
    factory: Factory | str,
    *,
    out: str | os.PathLike[str],
    reward: Callable[[tuple[Message, ...], FleetTask], float | Awaitable[float]] | None = None,
    n: int = 1,
    **fleet_options: Any,
) -> RolloutFleetSummary:
    """Run a fleet in rollout mode: ``n`` samples of every task, each scored.

    Each sample is a fleet task (``<id>.s<k>``, or the task's own id when ``n`` is 1)
    whose metadata gains ``group`` (the task's id) and ``sample`` (``k``): the samples
    of one task are a GRPO group. Besides the fleet's ``results.jsonl`` and transcripts,
    ``out/rollouts.jsonl`` gets one line per sample::

        {"id": "t1.s0", "group": "t1", "sample": 0, "reason": "stop", "reward": 1.0,
         "calls": 3, "samples": 1, "prefix_breaks": 0, "model_tokens": 412,
         "tokens": 1630, "transcript": "transcripts/t1.s0.jsonl"}

    The trajectory is in the transcript (``Trajectory.from_transcript(
    load_transcript(out / line["transcript"]).messages)``). A reward function that raises
    leaves ``"reward": null`` and the error in ``"reward_error"``; a transcript that
    cannot be read leaves the counts out and says why in ``"error"``.

    Runs in the caller's trio loop (see :func:`~trio_agent.fleet.run_fleet`, which takes
    ``fleet_options``: ``concurrency``, ``backend``, ``task_timeout``...). Running it again
    on the same ``out`` skips finished samples and only adds the missing lines.

    Args:
        tasks: as ``run_fleet``'s.
        factory: as ``run_fleet``'s.
        out: the output folder.
        reward: scores a sample from its transcript and its task (plain or async);
            None: no rewards.
        n: samples per task (at least 1).
        **fleet_options: passed to ``run_fleet`` (not ``on_result``).

    Raises:
        ValueError: ``n`` below 1, ``on_result`` given, or as ``run_fleet``.
        Exception: as ``run_fleet``.
    """
    if type(n) is not int or n < 1:
        raise ValueError(f"n must be an integer of at least 1, got {n!r}")
    if "on_result" in fleet_options:
        raise ValueError("run_rollouts records each result itself: on_result is not taken")
    out_dir = Path(out)
    if isinstance(tasks, str | os.PathLike):
        tasks = await trio.to_thread.run_sync(load_tasks, tasks)
    expanded = list(_expand(tasks, n))
    by_id = {task.id: task for task in expanded}
    path = out_dir / ROLLOUTS_FILE
    send, receive = trio.open_memory_channel[TaskResult](math.inf)
    written = 0
    done: set[str] = set()

    async def line(result: TaskResult) -> str:
        task = by_id[result.id]
        entry: dict[str, Any] = {
            "id": result.id,
            "group": task.metadata.get("group", result.id),
            "sample": task.metadata.get("sample", 0),
            "reason": result.reason,
        }
        try:
            loaded = await trio.to_thread.run_sync(load_transcript, out_dir / result.transcript)
        except Exception as exc:
            entry.update(reward=None, error=f"{type(exc).__name__}: {exc}")
        else:
            messages = loaded.messages

            def sample_reward(transcript: tuple[Message, ...]) -> Any:
                assert reward is not None
                return reward(transcript, task)

            try:
                value = await score(sample_reward if reward else None, messages)
            except Exception as exc:
                entry.update(reward=None, reward_error=f"{type(exc).__name__}: {exc}")
            else:
                entry["reward"] = value
            entry.update(Trajectory.from_transcript(messages).summary())
        entry["transcript"] = result.transcript
        return json.dumps(entry) + "\n"

    async def writer() -> None:
        nonlocal written
        async with receive:
            async for result in receive:
                if result.id in done or result.id not in by_id:
                    continue
                text = await line(result)
                await trio.to_thread.run_sync(_append, path, [text])
                done.add(result.id)
                written += 1

    await trio.to_thread.run_sync(lambda: out_dir.mkdir(parents=True, exist_ok=True))
    done |= await trio.to_thread.run_sync(_written, path)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer)
        async with send:
            summary = await run_fleet(
                expanded, factory, out=out_dir, on_result=send.send_nowait, **fleet_options
            )
    # Samples recorded by the fleet but not here (an earlier call that crashed between
    # the two files, or tasks finished before): their lines now.
    recorded = await trio.to_thread.run_sync(_recorded, out_dir / "results.jsonl")
    for task_id, result in recorded.items():
        if task_id in by_id and task_id not in done:
            await trio.to_thread.run_sync(_append, path, [await line(result)])
            done.add(task_id)
            written += 1
    return RolloutFleetSummary(fleet=summary, written=written, path=path)
