"""``run_fleet``: a set of tasks run to completion, results on disk, resumable.

Theory of operation. The *driver* (the caller's trio loop) reads ``results.jsonl`` in the
output folder, skips every task already there, hands the others to a *backend*, and
appends one line per finished task to ``results.jsonl`` — it is that file's only writer,
so a task is never recorded twice, whichever worker ran it or how often it was
restarted. Workers only write their tasks' transcripts (see ``_worker``). The local
backend runs the tasks in the driver's own loop; :class:`RayBackend` on a Ray cluster.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from trio_agent import Usage

from ._progress import Counters, show_progress
from ._results import ResultsLog
from ._task import Factory, FleetTask, TaskResult, load_tasks, task_from_json, transcript_relpath
from ._worker import FsyncMode, Job, resolve_factory, run_task

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping
    from typing import TextIO

__all__ = ["Backend", "FleetSummary", "LocalBackend", "Recorder", "run_fleet"]

RESULTS_FILE = "results.jsonl"


class Recorder(Protocol):
    """How a backend reports to the driver."""

    counters: Counters

    def may_exist(self, task: FleetTask) -> bool:
        """False when the task's transcript did not exist when the fleet started."""
        ...

    async def record(self, result: TaskResult) -> None: ...


class Backend(Protocol):
    """Where a fleet's tasks run: :class:`LocalBackend` or :class:`RayBackend`."""

    async def run(self, tasks: Iterator[FleetTask], job: Job, recorder: Recorder) -> None:
        """Run every task of ``tasks`` and ``await recorder.record(result)`` for each."""
        ...


@attrs.frozen
class LocalBackend:
    """Run the tasks in the caller's trio loop: one nursery, at most ``concurrency``
    runs at once (a ``CapacityLimiter``); tasks are taken from the iterator only as
    slots free up, so a million tasks never sit in memory as trio tasks.

    Attributes:
        concurrency: the most runs at once (default 64).
    """

    concurrency: int = attrs.field(default=64, validator=attrs.validators.ge(1))

    async def run(self, tasks: Iterator[FleetTask], job: Job, recorder: Recorder) -> None:
        """Run every task (the ``Backend`` protocol; ``run_fleet`` calls it)."""
        factory = resolve_factory(job.factory)
        limiter = trio.CapacityLimiter(self.concurrency)
        counters = recorder.counters

        async def one(task: FleetTask, token: object) -> None:
            try:
                counters.running += 1
                try:
                    result = await run_task(task, factory, job, may_exist=recorder.may_exist(task))
                finally:
                    counters.running -= 1
                await recorder.record(result)
            finally:
                limiter.release_on_behalf_of(token)

        async with trio.open_nursery() as nursery:
            for task in tasks:
                token = object()
                await limiter.acquire_on_behalf_of(token)
                nursery.start_soon(one, task, token)


@attrs.frozen(kw_only=True)
class FleetSummary:
    """What :func:`run_fleet` did.

    Attributes:
        out: the output folder.
        total: tasks in the input.
        skipped: tasks already in ``results.jsonl`` (finished by an earlier run).
        done: tasks finished by this run (``failed`` included).
        failed: of those, how many ended with reason ``failed`` or ``error``.
        resumed: of those, how many continued an interrupted transcript.
        usage: the tokens of this run's tasks (their whole runs).
        wall_time: seconds this call took.
    """

    out: Path
    total: int
    skipped: int
    done: int
    failed: int
    resumed: int
    usage: Usage
    wall_time: float

    @property
    def results_path(self) -> Path:
        """``out/results.jsonl``: one line per finished task."""
        return self.out / RESULTS_FILE


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _single(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one error of ``group`` that is not a ``Cancelled``, else the group itself."""
    leaves = _leaves(group)
    errors = [e for e in leaves if not isinstance(e, trio.Cancelled)]
    if len(errors) == 1:
        return errors[0]
    if not errors:
        return leaves[0]
    return group


class _Driver:
    def __init__(self, log: ResultsLog, counters: Counters, transcripts: set[str]) -> None:
        self.log = log
        self.transcripts = transcripts
        self.counters = counters
        self.usage = [0, 0, 0, 0]
        self.seen: set[str] = set()
        self.on_result: Callable[[TaskResult], Any] | None = None

    def may_exist(self, task: FleetTask) -> bool:
        return transcript_relpath(task.id).removeprefix("transcripts/") in self.transcripts

    async def record(self, result: TaskResult) -> None:
        if result.id in self.log.done:
            return  # already recorded (a backend handed it back twice): never a second line
        await self.log.record(result)
        self.log.done.add(result.id)
        self.counters.finished(result)
        u = result.usage
        self.usage[0] += u.input_tokens
        self.usage[1] += u.output_tokens
        self.usage[2] += u.cache_read_tokens
        self.usage[3] += u.cache_write_tokens
        if self.on_result is not None:
            self.on_result(result)

    def pending(self, tasks: Iterable[FleetTask | Mapping[str, Any]]) -> Iterator[FleetTask]:
        done = self.log.done
        for number, item in enumerate(tasks, start=1):
            task = (
                item
                if isinstance(item, FleetTask)
                else task_from_json(item, where=f"task {number}")
            )
            if task.id in self.seen:
                raise ValueError(f"task {number}: id {task.id!r} appears twice in the tasks")
            self.seen.add(task.id)
            if task.id in done:
                self.counters.skipped += 1
                continue
            yield task


async def run_fleet(
    tasks: Iterable[FleetTask | Mapping[str, Any]] | str | os.PathLike[str],
    factory: Factory | str,
    *,
    out: str | os.PathLike[str],
    concurrency: int = 64,
    backend: Backend | None = None,
    fsync: FsyncMode = "turn",
    progress: bool | None = None,
    progress_stream: TextIO | None = None,
    on_result: Callable[[TaskResult], Any] | None = None,
) -> FleetSummary:
    """Run every task to its end; results in ``out/results.jsonl``, one transcript each.

    Runs in the caller's trio loop and returns when every task is recorded. Running it
    again with the same ``out`` skips the tasks already in ``results.jsonl`` and resumes
    interrupted ones from their transcripts, so a crash or a Ctrl-C loses no finished
    message and repeats no finished task (a task whose run had ended but whose result
    line was not yet written is recorded from its transcript without running again).

    Args:
        tasks: :class:`FleetTask` s, JSON objects of the task format, or the path of a
            JSONL file of them (read at once, see :func:`load_tasks`). An iterable is
            consumed lazily, as slots free up.
        factory: builds each task's model, tools and config, on the worker that runs it
            (a callable taking the :class:`FleetTask`, plain or async, or
            ``"module:function"``). With Ray it must be picklable; nothing else crosses
            processes but tasks and results.
        out: the output folder (created if missing): ``results.jsonl`` and
            ``transcripts/<id>.jsonl``.
        concurrency: runs at once, for the default local backend.
        backend: where to run; default ``LocalBackend(concurrency)``.
        fsync: each transcript's ``JsonlTranscript`` fsync mode (default ``"turn"``:
            durable at every turn's end; ``False`` survives a process crash only).
            ``results.jsonl`` is always fsynced, after the transcript was closed.
        progress: show a progress line (done, failed, running, rate, tokens) on stderr;
            default: when stderr is a terminal.
        progress_stream: where the progress line goes instead of stderr.
        on_result: called (in the driver's loop) with each result once it is on disk.

    Cancellation (Ctrl-C): running tasks are cancelled, each pairs its transcript with
    ``aborted`` results and closes it; results already handed to the driver are written
    (shielded); ``Cancelled`` propagates. Every task not in ``results.jsonl`` is resumed
    by the next call.

    Raises:
        ValueError: a task that does not read as one, an id seen twice (tasks before it
            keep their results), an unreadable ``results.jsonl``, a bad factory string.
        ImportError: the factory's module cannot be imported.
        OSError: the output folder or ``results.jsonl`` cannot be written.
        FleetError: (Ray) every worker died and the rest cannot run.
    """
    started = time.perf_counter()
    out_dir = Path(out)
    if isinstance(tasks, str | os.PathLike):
        tasks = await trio.to_thread.run_sync(load_tasks, tasks)
    if backend is None:
        backend = LocalBackend(concurrency)
    job = Job(factory=factory, out=out_dir, fsync=fsync)
    if isinstance(backend, LocalBackend):
        resolve_factory(factory)  # a bad factory string fails before anything runs

    def prepare() -> tuple[ResultsLog, set[str]]:
        folder = out_dir / "transcripts"
        folder.mkdir(parents=True, exist_ok=True)
        return ResultsLog.open_sync(out_dir / RESULTS_FILE), set(os.listdir(folder))

    log, transcripts = await trio.to_thread.run_sync(prepare)
    with log:
        counters = Counters()
        driver = _Driver(log, counters, transcripts)
        driver.on_result = on_result
        stream = progress_stream if progress_stream is not None else sys.stderr
        if progress is None:
            progress = bool(getattr(stream, "isatty", lambda: False)())
        try:
            async with trio.open_nursery() as nursery:
                if progress:
                    nursery.start_soon(show_progress, counters, stream)
                await backend.run(driver.pending(tasks), job, driver)
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            raise _single(group) from None
    u = driver.usage
    return FleetSummary(
        out=out_dir,
        total=len(driver.seen),
        skipped=counters.skipped,
        done=counters.done,
        failed=counters.failed,
        resumed=counters.resumed,
        usage=Usage(
            input_tokens=u[0], output_tokens=u[1], cache_read_tokens=u[2], cache_write_tokens=u[3]
        ),
        wall_time=time.perf_counter() - started,
    )
