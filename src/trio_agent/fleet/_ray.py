"""The Ray backend: a fleet's tasks on a Ray cluster, one trio loop per actor.

Theory of operation. ``RayBackend.run`` connects to the cluster (``ray.init`` in a worker
thread that a cancel or ``connect_timeout`` abandons: Ray's own wait for an address where
nothing answers lasts many minutes and cannot be interrupted), then starts ``actors`` Ray
actors (each holds ``num_cpus`` of a CPU for its life). Each actor is a
:class:`FleetWorker`: it starts a thread running ``trio.run`` and takes calls through
``trio.from_thread.run(..., trio_token=...)`` — one trio loop per actor, up to
``runs_per_actor`` runs at once (a capacity limiter inside that loop). The driver hands
out tasks in chunks of
``chunk_size`` (no scheduling per task), keeping ``2 × runs_per_actor`` tasks in flight
per actor so that no slot idles while a chunk's results travel back, and records the
results it gets back — the driver stays the only writer of ``results.jsonl``.

When an actor dies (its process killed, its node lost), its chunks in flight fail with
``RayActorError``, and a fresh actor replaces it (at most ``max_restarts`` times in a
fleet). Their tasks run again — resumed from their transcripts when the output folder
is shared storage, started over otherwise — but which of them killed the actor, if any,
is unknown, so none is blamed: each becomes a *suspect* and is retried one by one,
alone on an actor (that actor takes no other chunk until the suspect's call returns;
the other actors go on as before). A suspect that finishes is recorded like any task;
one whose actor dies while running it alone is blamed for that death and retried alone
again, and after ``max_attempts`` such deaths it is recorded ``failed`` — so one task
that kills its worker cannot stall the fleet, and the tasks that merely ran beside it
are never charged. The price of the precision is throughput after a death: each suspect
keeps a whole actor for the time of one run. Every actor is killed when the fleet ends,
also on error or cancellation: actors hold their CPUs until then.

When the fleet's own storage fails on a worker (a transcript cannot be opened or
written), the actor lets the other tasks of that chunk end and raises a
:class:`StorageError` that carries their results; the driver records them, hands out no
new chunk, lets the chunks in flight end and records them, then raises the one-line
``StorageError`` the local backend raises. The task that hit the error, and every task
not handed out, is left for the next run.

Actors import a ``"module:function"`` factory themselves: the driver's current folder
is appended to their ``sys.path`` (a module there is found by a cluster on this machine).
A factory that does not resolve there (the constructor keeps the error, ``ready()``
raises it, so it reaches the driver whole) is raised by the driver as the local backend
raises it — the same ``ImportError`` or ``ValueError``, one line, its message prefixed
``on a Ray worker:``. ``out`` is made absolute from the driver's current folder: workers
have a current folder of their own.

Ray is imported only here, inside the methods: ``import trio_agent.fleet`` never needs it
(``pip install 'trio-agent[ray]'`` for this backend).
"""

from __future__ import annotations

import math
import os
import pickle
import sys
import threading
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from trio_agent import Usage

from .._core._util import seconds
from ._fleet import storage_stop
from ._task import FAILED, FleetError, FleetTask, StorageError, TaskResult, transcript_relpath
from ._worker import Job, resolve_factory, run_task

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ._fleet import Recorder

__all__ = ["FleetWorker", "RayBackend"]


class _ChunkStopped(StorageError):
    """What :meth:`FleetWorker.run_chunk` raises when transcripts of its chunk could not
    be read or written, once every other task of the chunk has ended.

    The message is the first such error's. Attributes: ``errors``, every
    :class:`StorageError` of the chunk (each with its ``__cause__``, the original
    ``OSError``); ``results``, the results of the chunk's tasks that did end. It crosses
    processes whole: its pickle keeps the causes (a plain exception's drops them), so the
    driver can say what to do (``ulimit -n``, free disk space...).
    """

    def __init__(self, errors: list[StorageError], results: list[TaskResult]) -> None:
        super().__init__(str(errors[0]))
        self.errors = errors
        self.results = results
        self.__cause__ = errors[0].__cause__

    def __reduce__(self) -> tuple[Any, ...]:
        errors = [(str(e), _portable(e.__cause__)) for e in self.errors]
        return (_rebuild_chunk_stopped, (errors, self.results))


def _portable(exc: BaseException | None) -> BaseException | None:
    """``exc`` if it pickles, else an ``OSError`` with its errno and text (or None)."""
    if exc is None:
        return None
    try:
        pickle.dumps(exc)
    except Exception:
        return OSError(exc.errno, exc.strerror) if isinstance(exc, OSError) else None
    return exc


def _rebuild_chunk_stopped(
    errors: list[tuple[str, BaseException | None]], results: list[TaskResult]
) -> _ChunkStopped:
    rebuilt = []
    for message, cause in errors:
        error = StorageError(message)
        error.__cause__ = cause
        rebuilt.append(error)
    return _ChunkStopped(rebuilt, results)


class FleetWorker:
    """The body of a fleet's Ray actor: a trio loop in a thread, running chunks of tasks.

    Plain Python (``RayBackend`` wraps it with ``ray.remote``); usable without Ray.

    The constructor resolves the factory and creates ``out/transcripts``, but raises
    nothing: an error there (the factory's ``ImportError`` or ``ValueError``, an
    ``OSError``) is raised by :meth:`ready` and :meth:`run_chunk` instead — a Ray actor
    whose constructor raises dies with nothing but the text of the error, while a
    method's error reaches the driver whole, to be raised there as it is.

    Args:
        job: what every task of the fleet shares.
        runs: runs at once in this worker.
        import_path: a folder appended to ``sys.path`` (if not already on it) before the
            factory is imported: the driver's current folder, so that
            ``"module:function"`` finds a module there when the worker runs on the same
            machine (last on the path, it never hides a module the worker has).
    """

    def __init__(self, job: Job, runs: int, import_path: str | None = None) -> None:
        if import_path is not None and import_path not in sys.path:
            sys.path.append(import_path)
        self._job = job
        self._error: Exception | None = None
        self._factory: Any = None
        try:
            self._factory = resolve_factory(job.factory)
            (job.out / "transcripts").mkdir(parents=True, exist_ok=True)
        except (ImportError, ValueError, OSError) as exc:
            self._error = exc
        self._limiter_size = runs
        started = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._thread = threading.Thread(
            target=trio.run, args=(self._main, started), name="trio-fleet", daemon=True
        )
        self._thread.start()
        started.wait()

    async def _main(self, started: threading.Event) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._limiter = trio.CapacityLimiter(self._limiter_size)
        self._stop = trio.Event()
        started.set()
        await self._stop.wait()

    def ready(self) -> bool:
        """True once the loop runs and the factory is resolved.

        Raises:
            ImportError: the factory's module cannot be imported here.
            ValueError: the factory string names nothing callable.
            OSError: ``out/transcripts`` cannot be created here.
        """
        if self._error is not None:
            raise self._error
        return self._token is not None

    def run_chunk(self, tasks: list[FleetTask]) -> list[TaskResult]:
        """Run ``tasks`` in the actor's trio loop; blocks the calling thread until every
        one has a result (several calls may run at once, sharing the limiter).

        Raises:
            StorageError: a task's transcript could not be read or written; raised once
                every other task of the chunk has ended. Its ``results`` are theirs (to
                record), its ``errors`` every such error of the chunk, each with its
                ``__cause__`` (kept when it is pickled, unlike a plain exception's).
            ImportError, ValueError, OSError: as :meth:`ready`.
        """
        self.ready()
        return trio.from_thread.run(self._chunk, tasks, trio_token=self._token)

    async def _chunk(self, tasks: list[FleetTask]) -> list[TaskResult]:
        results: list[TaskResult | None] = [None] * len(tasks)
        storage: list[StorageError] = []

        async def one(i: int, task: FleetTask) -> None:
            async with self._limiter:
                try:
                    results[i] = await run_task(task, self._factory, self._job)
                except StorageError as exc:
                    storage.append(exc)  # the other tasks of the chunk finish first

        async with trio.open_nursery() as nursery:
            for i, task in enumerate(tasks):
                nursery.start_soon(one, i, task)
        done = [r for r in results if r is not None]
        if storage:
            raise _ChunkStopped(storage, done)  # the driver records ``done``, then stops
        return done

    def stop(self) -> None:
        """End the trio loop (cancelling nothing: call it when no chunk runs)."""
        if self._stop is not None and self._token is not None:
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join()


class _Actor:
    """One actor as the driver sees it: the tasks of its calls in flight, and whether a
    suspect's call has it (a suspect runs alone: see :class:`_Queue`)."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.running = 0
        """Tasks in this actor's calls in flight."""
        self.solo = False
        """A suspect was handed to this actor: it waits for the actor, or runs alone on
        it; no other chunk is handed to the actor meanwhile."""
        self.dead = False
        self.died_with = 0
        """``running`` when the actor was first seen dead: how many tasks died with it."""
        self._idle = trio.Event()

    async def wait_alone(self) -> None:
        """Wait until no call runs on the actor (or it is dead)."""
        while self.running and not self.dead:
            await self._idle.wait()

    def enter(self, tasks: int) -> None:
        self.running += tasks

    def leave(self, tasks: int) -> None:
        self.running -= tasks
        if not self.running:
            self._idle.set()
            self._idle = trio.Event()

    def seen_dead(self) -> None:
        if not self.dead:
            self.dead = True
            self.died_with = self.running
            self._idle.set()


class _Queue:
    """Tasks to hand out: suspects one at a time, then the input in chunks.

    A *suspect* is a task that was running on an actor when it died beside other tasks:
    any of them may have killed it. Each suspect is handed out alone, to an actor that
    then runs nothing else, so a death is only ever blamed on a task that ran alone.
    """

    def __init__(self, tasks: Iterator[FleetTask], chunk_size: int) -> None:
        self._tasks = tasks
        self._chunk = chunk_size
        self.suspects: deque[FleetTask] = deque()
        self.in_flight = 0
        self._changed = trio.Event()
        self.exhausted = False
        self.stopped = False
        """Nothing more is handed out (the fleet's storage failed)."""

    def notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def stop(self) -> None:
        """Hand out nothing more: every ``next_chunk`` returns None from now on."""
        self.stopped = True
        self.notify()

    async def next_chunk(self, actor: _Actor) -> tuple[list[FleetTask], bool] | None:
        """The next chunk for ``actor`` and whether it is a suspect's solo call (then
        ``actor.solo`` is set); None once everything is handed out and back, or the
        actor is dead, or the queue stopped."""
        while not actor.dead and not self.stopped:
            if actor.solo:  # its suspect's call first
                await self._changed.wait()
                continue
            if self.suspects:
                actor.solo = True
                self.in_flight += 1
                return [self.suspects.popleft()], True
            chunk: list[FleetTask] = []
            while not self.exhausted and len(chunk) < self._chunk:
                task = next(self._tasks, None)
                if task is None:
                    self.exhausted = True
                else:
                    chunk.append(task)
            if chunk:
                self.in_flight += 1
                return chunk, False
            if self.in_flight == 0:
                return None
            await self._changed.wait()
        return None

    def finished(self, suspects: list[FleetTask] = []) -> None:  # noqa: B006 - never mutated
        """A chunk handed out is back (``suspects``: its tasks, to retry one by one)."""
        self.in_flight -= 1
        self.suspects.extend(suspects)
        self.notify()

    @property
    def left(self) -> int:
        return len(self.suspects) + (0 if self.exhausted else 1)


def import_ray() -> Any:
    """The ``ray`` module.

    Raises:
        ImportError: Ray is not installed (the message says how to install it).
    """
    try:
        import ray
    except ImportError as exc:
        raise ImportError("RayBackend needs Ray: pip install 'trio-agent[ray]'") from exc
    return ray


async def _connect(ray: Any, address: str | None, options: Mapping[str, Any]) -> None:
    """``ray.init(address=address, **options)`` in a worker thread that a cancel abandons.

    ``ray.init`` blocks, and against an address where no cluster answers it keeps trying
    for many minutes; it cannot be interrupted. So on cancel (a timeout, Ctrl-C) the
    caller gets control back at once, the attempt goes on in its thread until Ray gives
    up, and a connection it makes after all is shut down right away.
    """
    lock = threading.Lock()
    state = {"abandoned": False, "connected": False}

    def init() -> None:
        ray.init(address=address, **options)
        with lock:
            state["connected"] = True
            late = state["abandoned"]
        if late:  # nobody waits for this connection any more
            ray.shutdown()

    try:
        await trio.to_thread.run_sync(init, abandon_on_cancel=True)
    except BaseException:
        with lock:
            state["abandoned"] = True
            late = state["connected"]
        if late:  # connected just as the wait was cancelled
            ray.shutdown()
        raise


@attrs.frozen(kw_only=True)
class RayBackend:
    """Run a fleet on a Ray cluster (``pip install 'trio-agent[ray]'``).

    Attributes:
        address: the cluster to connect to when Ray is not initialized yet
            (``"auto"``: the one ``ray start`` runs on this machine; ``None``: start a
            local one); a connection this backend made is shut down at the end. When
            ``ray.is_initialized()``, the current connection is used and left open.
        connect_timeout: seconds to wait for ``ray.init`` (connecting, or starting the
            local cluster); then the fleet ends with a ``FleetError`` before any task
            ran. None waits as long as Ray does (many minutes for an address where
            nothing answers). Either way a cancel (Ctrl-C) ends the wait at once.
        actors: how many actors (one trio loop each).
        runs_per_actor: runs at once per actor.
        num_cpus: CPUs each actor holds for its life (fractions allowed).
        chunk_size: tasks per call to an actor (default ``runs_per_actor // 4``). A
            call returns when its whole chunk is done: smaller chunks record results
            sooner when run times vary, larger ones make fewer calls.
        max_restarts: dead actors replaced in one fleet. A task that kills its worker
            every time costs at most ``1 + max_attempts`` of them (one death beside other
            tasks, then its runs alone).
        max_attempts: a task whose actor died this many times while running it alone is
            recorded ``failed`` (error ``"its Ray actor died N times while running it
            alone"``). Tasks that were running beside others when their actor died are
            not charged: they are retried one by one, each alone on an actor, so that
            only the task that kills its worker is charged (a node lost while a task ran
            alone is charged to it too).
        init_options: more keyword arguments for ``ray.init``.
        name_prefix: when set, actors are named ``f"{name_prefix}{k}"`` (k = 0, 1, ...
            in start order, replacements included), so that ``ray.get_actor`` finds them.

    The factory must be picklable (a module-level function, or ``"module:function"``
    importable on the workers). The driver's current folder is appended to each actor's
    ``sys.path``, so a factory module there works on a cluster on this machine; on a
    remote cluster the folder is that path on the worker's machine, if it exists, so the
    module must be importable there (installed, on the workers' ``PYTHONPATH``, or
    shipped with Ray's ``runtime_env``, e.g. ``init_options={"runtime_env":
    {"py_modules": [...]}}``). A relative ``out`` is taken from the driver's current
    folder; it must be reachable at that path from every node (shared storage) for a
    task to resume where a dead actor left it.
    """

    address: str | None = "auto"
    connect_timeout: float | None = attrs.field(default=60.0, validator=seconds(optional=True))
    actors: int = attrs.field(default=2, validator=attrs.validators.ge(1))
    runs_per_actor: int = attrs.field(default=64, validator=attrs.validators.ge(1))
    num_cpus: float = attrs.field(default=0.5, validator=attrs.validators.ge(0))
    chunk_size: int | None = None
    max_restarts: int = attrs.field(default=4, validator=attrs.validators.ge(0))
    max_attempts: int = attrs.field(default=3, validator=attrs.validators.ge(1))
    init_options: Mapping[str, Any] = attrs.field(factory=dict)
    name_prefix: str | None = None

    async def run(self, tasks: Iterator[FleetTask], job: Job, recorder: Recorder) -> None:
        """Run every task on the cluster; see the class docstring. Cancelling kills the
        actors (their tasks resume on the next run); a cancel while connecting returns
        at once (the connection attempt is abandoned to its thread).

        Raises:
            FleetError: no connection to the cluster within ``connect_timeout``, an actor
                could not start, or every actor died with tasks left.
            StorageError: a transcript could not be read or written on a worker (raised
                once the chunks in flight have ended and been recorded).
            ImportError: Ray is not installed, or the factory's module cannot be
                imported on a worker (the message starts ``on a Ray worker:``).
            ValueError: the factory string names nothing callable on a worker.
        """
        ray = import_ray()
        from ray.exceptions import RayActorError, RayTaskError

        own_connection = False
        if not ray.is_initialized():
            timeout = self.connect_timeout
            try:
                with trio.fail_after(math.inf if timeout is None else timeout):
                    await _connect(ray, self.address, self.init_options)
            except trio.TooSlowError:
                raise FleetError(
                    f"Ray did not start a local cluster within {timeout:g} s"
                    if self.address is None
                    else f"no Ray cluster answered at {self.address!r} within {timeout:g} s "
                    "(is it running, and reachable from here?)"
                ) from None
            own_connection = True
        chunk = self.chunk_size or max(1, self.runs_per_actor // 4)
        in_flight_chunks = max(2, -(-2 * self.runs_per_actor // chunk))
        remote_cls: Any = ray.remote(FleetWorker)
        base: dict[str, Any] = {
            "num_cpus": self.num_cpus,
            "max_concurrency": in_flight_chunks + 2,
        }
        # Workers have a current folder of their own: a relative ``out`` is the driver's.
        job = attrs.evolve(job, out=job.out.absolute())
        here = os.getcwd()
        queue = _Queue(tasks, chunk)
        storage: list[StorageError] = []
        attempts: dict[str, int] = {}
        spawned: list[Any] = []
        restarts = [self.max_restarts]
        counters = recorder.counters
        # Blocking ray.get calls run in threads of their own, not trio's shared pool.
        threads = trio.CapacityLimiter(self.actors * in_flight_chunks + self.actors)

        async def get(ref: Any) -> Any:
            return await trio.to_thread.run_sync(
                ray.get, ref, abandon_on_cancel=True, limiter=threads
            )

        async def start_actor() -> Any:
            options = dict(base)
            if self.name_prefix is not None:
                options["name"] = f"{self.name_prefix}{len(spawned)}"
            actor = remote_cls.options(**options).remote(job, self.runs_per_actor, here)
            spawned.append(actor)
            try:
                await get(actor.ready.remote())
            except RayActorError as exc:
                raise FleetError(f"a Ray actor of the fleet could not start: {exc}") from exc
            except RayTaskError as exc:  # FleetWorker.ready raised the constructor's error
                cause = exc.cause
                if isinstance(cause, ImportError):  # the factory's errors, as locally
                    raise ImportError(f"on a Ray worker: {cause}") from None
                if isinstance(cause, ValueError):
                    raise ValueError(f"on a Ray worker: {cause}") from None
                raise FleetError(
                    f"a Ray actor of the fleet could not start: {type(cause).__name__}: {cause}"
                ) from None
            return actor

        async def died(actor: _Actor, batch: list[FleetTask]) -> None:
            if actor.died_with != 1:  # others died too: none of them is blamed
                queue.finished(batch)
                return
            (task,) = batch  # it ran alone: it killed the actor (or the node went down)
            attempts[task.id] = attempts.get(task.id, 0) + 1
            if attempts[task.id] < self.max_attempts:
                queue.finished(batch)
                return
            queue.finished()
            await recorder.record(
                TaskResult(
                    id=task.id,
                    reason=FAILED,
                    steps=0,
                    usage=Usage(),
                    wall_time=0.0,
                    error=f"its Ray actor died {attempts[task.id]} times while running it alone",
                    transcript=transcript_relpath(task.id),
                )
            )

        async def feed(actor: _Actor) -> None:
            while True:
                work = await queue.next_chunk(actor)
                if work is None:
                    return
                batch, solo = work
                if solo:
                    await actor.wait_alone()
                    if actor.dead or queue.stopped:  # the suspect never ran
                        queue.finished(batch)
                        return
                actor.enter(len(batch))
                counters.running += len(batch)
                try:
                    results: list[TaskResult] = await get(actor.handle.run_chunk.remote(batch))
                except RayActorError:
                    actor.seen_dead()
                    await died(actor, batch)
                    return
                except RayTaskError as exc:
                    if not isinstance(exc.cause, StorageError):
                        queue.finished()
                        raise
                    # The fleet's storage failed: hand out nothing more, record what
                    # the chunk finished, let the other chunks in flight end.
                    stopped = exc.cause
                    if isinstance(stopped, _ChunkStopped):
                        storage.extend(stopped.errors)
                        results = stopped.results
                    else:
                        storage.append(stopped)
                        results = []
                    queue.stop()
                except BaseException:
                    queue.finished()
                    raise
                finally:
                    counters.running -= len(batch)
                    actor.leave(len(batch))
                    if solo:
                        actor.solo = False
                for result in results:
                    await recorder.record(result)
                queue.finished()

        async def slot() -> None:
            while True:
                actor = _Actor(await start_actor())
                async with trio.open_nursery() as nursery:
                    for _ in range(in_flight_chunks):
                        nursery.start_soon(feed, actor)
                if not actor.dead:
                    await stop(actor.handle)
                    return
                ray.kill(actor.handle)
                if restarts[0] == 0 or queue.stopped or not (queue.left or queue.in_flight):
                    return
                restarts[0] -= 1

        async def stop(actor: Any) -> None:
            try:
                await get(actor.stop.remote())
            except RayActorError:
                pass

        try:
            async with trio.open_nursery() as nursery:
                for _ in range(self.actors):
                    nursery.start_soon(slot)
            if storage:
                raise storage_stop(storage)
            if queue.left or queue.in_flight:
                raise FleetError(
                    "every Ray actor of the fleet died and no restart is left; "
                    "run the fleet again to resume the tasks not recorded"
                )
        finally:
            for actor in spawned:
                ray.kill(actor)
            if own_connection:
                ray.shutdown()
