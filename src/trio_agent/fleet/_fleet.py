"""``run_fleet``: a set of tasks run to completion, results on disk, resumable.

Theory of operation. The *driver* (the caller's trio loop) locks the output folder
(``fleet.lock``: one fleet per folder), reads ``results.jsonl`` there, skips every task
already there, hands the others to a *backend*, and appends one line per finished task to
``results.jsonl`` — it is that file's only writer, so a task is never recorded twice,
whichever worker ran it or how often it was restarted (``retry_failed`` adds a second
line for a failed task run again; the last line counts). Workers only write their tasks'
transcripts (see ``_worker``). The local backend runs the tasks in the driver's own
loop; :class:`RayBackend` on a Ray cluster.

When the fleet's own storage fails (a transcript cannot be opened or written: too many
open files, a full disk), the backend starts no new task (on Ray: hands out no new
chunk), lets the running ones finish and be recorded, and raises :class:`StorageError`
(made by :func:`storage_stop`, the same for every backend): the task that hit the error
is not recorded, so the next run resumes it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from trio_agent import AgentUsageError, TranscriptFormatError, Usage

from .._run import plan_for
from .._store import FsyncMode, load_transcript, names, open_locked, write_all
from ._progress import Counters, show_progress
from ._results import ResultsLog
from ._task import (
    Decisions,
    Factory,
    FleetError,
    FleetTask,
    StorageError,
    TaskResult,
    load_tasks,
    task_from_json,
    transcript_relpath,
)
from ._worker import Job, resolve_factory, run_task

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping
    from typing import TextIO

__all__ = ["Backend", "FleetSummary", "LocalBackend", "Recorder", "run_fleet"]

RESULTS_FILE = "results.jsonl"
LOCK_FILE = "fleet.lock"


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

    A task whose transcript cannot be read or written (:class:`StorageError`) stops the
    fleet: no new task starts, the running ones finish and are recorded, then the error
    is raised; that task (and every one not started) is left for the next run.

    Attributes:
        concurrency: the most runs at once (default 64).
    """

    concurrency: int = attrs.field(default=64, validator=attrs.validators.ge(1))

    async def run(self, tasks: Iterator[FleetTask], job: Job, recorder: Recorder) -> None:
        """Run every task (the ``Backend`` protocol; ``run_fleet`` calls it)."""
        factory = resolve_factory(job.factory)
        limiter = trio.CapacityLimiter(self.concurrency)
        counters = recorder.counters
        stopped: list[StorageError] = []

        async def one(task: FleetTask, token: object) -> None:
            try:
                counters.running += 1
                try:
                    result = await run_task(task, factory, job, may_exist=recorder.may_exist(task))
                except StorageError as exc:
                    stopped.append(exc)
                    return
                finally:
                    counters.running -= 1
                await recorder.record(result)
            finally:
                limiter.release_on_behalf_of(token)

        async with trio.open_nursery() as nursery:
            for task in tasks:
                token = object()
                await limiter.acquire_on_behalf_of(token)
                if stopped:
                    limiter.release_on_behalf_of(token)
                    break
                nursery.start_soon(one, task, token)
        if stopped:
            raise storage_stop(stopped)


def storage_stop(errors: list[StorageError]) -> StorageError:
    """The error a fleet stopped on: the first, with how many more and what to do (from
    the first one's ``__cause__``: its errno). Every backend raises this one."""
    first = errors[0]
    cause = first.__cause__
    code = cause.errno if isinstance(cause, OSError) else None
    hint = {
        errno.EMFILE: "lower the concurrency or raise the open-file limit (ulimit -n)",
        errno.ENFILE: "lower the concurrency (the system's open-file table is full)",
        errno.ENOSPC: "free some disk space",
        errno.EFBIG: "raise the file-size limit (ulimit -f)",
    }.get(code or 0, "fix the cause")
    more = f" (and {len(errors) - 1} more task(s) like it)" if len(errors) > 1 else ""
    stop = StorageError(
        f"{first}{more}. The fleet stopped: no new task was started, the running ones "
        f"were recorded, and the tasks not recorded are left for the next run; {hint}, "
        "then run the fleet again to resume them."
    )
    stop.__cause__ = cause if cause is not None else first
    return stop


@attrs.frozen(kw_only=True)
class FleetSummary:
    """What :func:`run_fleet` did.

    Attributes:
        out: the output folder.
        total: tasks in the input.
        skipped: tasks already in ``results.jsonl`` (finished by an earlier run) and not
            run again.
        done: tasks finished by this run (``failed`` and ``retried`` included).
        failed: of those, how many failed (reason ``failed``, ``error`` or ``timeout``).
        resumed: of those, how many continued an interrupted transcript.
        usage: the tokens of this run's tasks (their whole runs).
        wall_time: seconds this call took.
        retried: of ``done``, the tasks recorded failed before and run again
            (``retry_failed``).
        cost: what this run's tasks cost in USD (their whole runs, as each result's
            ``cost``); None when one of them could not be priced.
        still_failed: tasks of this fleet whose last line in ``results.jsonl`` is a
            failure — recorded by this run or an earlier one; ``retry_failed=True``
            runs them again. ``trio-agent fleet`` exits 1 while it is not 0.
        deferred: tasks of this fleet whose last line in ``results.jsonl`` is
            ``deferred``: their calls wait for decisions (``decisions=``).
    """

    out: Path
    total: int
    skipped: int
    done: int
    failed: int
    resumed: int
    usage: Usage
    wall_time: float
    retried: int = 0
    still_failed: int = 0
    deferred: int = 0
    cost: float | None = 0.0

    @property
    def results_path(self) -> Path:
        """``out/results.jsonl``: one line per finished task."""
        return self.out / RESULTS_FILE


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _single(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one error of ``group`` that is not a ``Cancelled``, else the group itself (a
    ``results.jsonl`` that cannot be written fails every task recording at that moment
    with the same error: it counts once)."""
    leaves = _leaves(group)
    errors = list({id(e): e for e in leaves if not isinstance(e, trio.Cancelled)}.values())
    if len(errors) == 1:
        return errors[0]
    if not errors:
        return leaves[0]
    return group


class _Driver:
    def __init__(
        self,
        log: ResultsLog,
        counters: Counters,
        transcripts: set[str],
        *,
        retry_failed: bool,
        decided: frozenset[str] = frozenset(),
    ) -> None:
        self.log = log
        self.transcripts = transcripts
        self.counters = counters
        self.usage = [0, 0, 0, 0]
        self.cost: float | None = 0.0
        self.seen: set[str] = set()
        self.retry_failed = retry_failed
        self.retrying: set[str] = set()  # recorded failed, handed out again, not back yet
        self.decided = decided  # recorded deferred, with decisions: handed out again
        self.retried = 0
        self.on_result: Callable[[TaskResult], Any] | None = None

    def may_exist(self, task: FleetTask) -> bool:
        return transcript_relpath(task.id).removeprefix("transcripts/") in self.transcripts

    async def record(self, result: TaskResult) -> None:
        if result.id in self.log.done:
            if result.id not in self.retrying:
                return  # already recorded (a backend handed it back twice): no second line
            self.retrying.discard(result.id)
            self.retried += 1
        await self.log.record(result)
        self.log.done.add(result.id)
        self.counters.finished(result)
        u = result.usage
        self.usage[0] += u.input_tokens
        self.usage[1] += u.output_tokens
        self.usage[2] += u.cache_read_tokens
        self.usage[3] += u.cache_write_tokens
        self.cost = None if self.cost is None or result.cost is None else self.cost + result.cost
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
                answered = task.id in self.decided and task.id in self.log.deferred
                if not answered and not (self.retry_failed and task.id in self.log.failed):
                    self.counters.skipped += 1
                    continue
                self.retrying.add(task.id)
            yield task

    def still_failed(self) -> int:
        """Tasks of this fleet whose last line in results.jsonl is a failure."""
        seen = self.seen
        return sum(1 for task_id in self.log.failed if task_id in seen)


def _check_decisions(out_dir: Path, log: ResultsLog, decisions: Decisions) -> None:
    """Every problem with the fleet's decisions, before anything runs. Blocks (reads
    the transcripts).

    Raises:
        ValueError: a task that does not wait for a decision, or decisions that do not
            answer its waiting calls exactly; one line per problem.
    """
    problems: list[str] = []
    for task_id, mine in decisions.items():
        if task_id not in log.deferred:
            problems.append(f"task {task_id!r}: its last result is not 'deferred': nothing waits")
            continue
        path = out_dir / transcript_relpath(task_id)
        try:
            plan_for(load_transcript(path), mine)
        except (AgentUsageError, TypeError, TranscriptFormatError, OSError) as exc:
            problems.append(f"task {task_id!r}: {exc}")
    if problems:
        raise ValueError("the decisions cannot be used: " + "; ".join(problems))


def _lock_folder(out_dir: Path) -> int:
    """Lock ``out_dir/fleet.lock`` (created if missing) and write this process's id in
    it; the fd holds the lock. Blocks (file I/O).

    Raises:
        FleetError: another process holds the lock (its pid in the message).
        OSError: the file cannot be opened or written.
    """
    path = out_dir / LOCK_FILE
    try:
        fd, _ = open_locked(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    except AgentUsageError:
        try:
            holder = path.read_text(encoding="ascii").strip() or "unknown"
        except (OSError, ValueError):
            holder = "unknown"
        raise FleetError(
            f"{out_dir} is in use by another fleet (pid {holder}): one fleet at a time per "
            "output folder; wait for it to end (or stop it), or use another output folder"
        ) from None
    try:
        os.ftruncate(fd, 0)
        write_all(fd, f"{os.getpid()}\n".encode())  # at offset 0: the file was just opened
    except BaseException:
        os.close(fd)
        raise
    return fd


def _unlock_folder(fd: int, out_dir: Path) -> None:
    """Remove the lock file, still holding its lock (a fleet that opened it meanwhile
    finds it gone once it gets the lock, and opens a new one), then let go of it."""
    path = out_dir / LOCK_FILE
    try:
        if names(fd, path):
            with contextlib.suppress(OSError):
                path.unlink()
    finally:
        os.close(fd)


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
    task_timeout: float | None = None,
    retry_failed: bool = False,
    timings: bool = False,
    decisions: Decisions | None = None,
) -> FleetSummary:
    """Run every task to its end; results in ``out/results.jsonl``, one transcript each.

    Runs in the caller's trio loop and returns when every task is recorded. Running it
    again with the same ``out`` skips the tasks already in ``results.jsonl`` and resumes
    interrupted ones from their transcripts, so a crash or a Ctrl-C loses no finished
    message and repeats no finished task (a task whose run had ended but whose result
    line was not yet written is recorded from its transcript without running again).

    One fleet at a time per output folder: the call locks ``out/fleet.lock`` (which
    holds its process id) until it returns; a second fleet on the same folder, in this
    process or another, raises :class:`FleetError` naming the holder's pid. (No lock on
    Windows.)

    A task that fails — reason ``failed``, ``error`` or ``timeout`` — is recorded, and
    skipped by later runs like any other, unless ``retry_failed``: then it runs again,
    continued from its transcript where there is one (a run that ended on a model error
    continues after it), and gets a second line in ``results.jsonl``; the last line of
    a task is the one that counts (``FleetSummary.still_failed``).

    The fleet's own storage failing is no task's failure: when a transcript cannot be
    opened, read or written (too many open files, a full disk, a file-size limit, a
    transcript another process holds), no new task starts, the running ones finish and
    are recorded, and :class:`StorageError` is raised; the task that hit it is not
    recorded, so the next run resumes it. If ``results.jsonl`` itself cannot be
    written, the fleet stops at once (``StorageError``; what it holds stays whole).

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
        task_timeout: seconds one attempt at a task may take, its factory included;
            then it ends with reason ``timeout`` (a normal end: the transcript paired,
            ``AgentEnd`` last, see ``LoopConfig.run_timeout``), counts as failed and is
            run again by ``retry_failed``. None (default): no bound.
        retry_failed: run the tasks recorded failed again (see above).
        timings: each transcript records when each model request and tool call
            happened (``JsonlTranscript(..., timings=True)``): ``trio-agent report``
            draws them as timelines. ``trio-agent fleet`` turns it on.
        decisions: per task id, the decisions (call id -> ``Approve()``,
            ``Deny(reason)`` or ``Result(content)``) for the calls its run left waiting:
            a task recorded ``deferred`` (its ``TaskResult.deferred`` lists the calls)
            is resumed from its transcript with them, and gets a second line in
            ``results.jsonl``. They are checked before anything runs: a task that does
            not wait, or decisions that do not answer its waiting calls exactly, is a
            ``ValueError``. A deferred task without decisions stays recorded
            ``deferred``.

    Cancellation (Ctrl-C): running tasks are cancelled, each pairs its transcript with
    ``aborted`` results and closes it; results already handed to the driver are written
    (shielded); ``Cancelled`` propagates. Every task not in ``results.jsonl`` is resumed
    by the next call.

    Raises:
        ValueError: a task that does not read as one, an id seen twice (tasks before it
            keep their results), an unreadable ``results.jsonl``, a bad factory string,
            a ``task_timeout`` that is not a number of seconds above zero.
        ImportError: the factory's module cannot be imported (or raised on import).
        FleetError: another fleet holds the output folder; (Ray) every worker died and
            the rest cannot run.
        StorageError: a transcript or ``results.jsonl`` could not be written (see above).
        OSError: the output folder cannot be created.
    """
    started = time.perf_counter()
    out_dir = Path(out)
    job = Job(
        factory=factory,
        out=out_dir,
        fsync=fsync,
        task_timeout=task_timeout,
        retry_failed=retry_failed,
        timings=timings,
        decisions={k: dict(v) for k, v in (decisions or {}).items()},
    )
    if isinstance(tasks, str | os.PathLike):
        tasks = await trio.to_thread.run_sync(load_tasks, tasks)
    if backend is None:
        backend = LocalBackend(concurrency)
    if isinstance(backend, LocalBackend):
        resolve_factory(factory)  # a bad factory string fails before anything runs

    def prepare() -> tuple[int, ResultsLog, set[str]]:
        folder = out_dir / "transcripts"
        folder.mkdir(parents=True, exist_ok=True)
        lock = _lock_folder(out_dir)
        try:
            return lock, ResultsLog.open_sync(out_dir / RESULTS_FILE), set(os.listdir(folder))
        except BaseException:
            _unlock_folder(lock, out_dir)
            raise

    lock, log, transcripts = await trio.to_thread.run_sync(prepare)
    try:
        with log:
            if decisions:
                await trio.to_thread.run_sync(_check_decisions, out_dir, log, decisions)
            counters = Counters()
            driver = _Driver(
                log,
                counters,
                transcripts,
                retry_failed=retry_failed,
                decided=frozenset(decisions or ()),
            )
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
    finally:
        _unlock_folder(lock, out_dir)
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
        retried=driver.retried,
        still_failed=driver.still_failed(),
        deferred=sum(1 for task_id in log.deferred if task_id in driver.seen),
        cost=driver.cost,
    )
