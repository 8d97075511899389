"""The Ray backend: a fleet's tasks on a Ray cluster, one trio loop per actor.

Theory of operation. ``RayBackend.run`` starts ``actors`` Ray actors (each holds
``num_cpus`` of a CPU for its life). Each actor is a :class:`FleetWorker`: it starts a
thread running ``trio.run`` and takes calls through ``trio.from_thread.run(...,
trio_token=...)`` — one trio loop per actor, up to ``runs_per_actor`` runs at once (a
capacity limiter inside that loop). The driver hands out tasks in chunks of
``chunk_size`` (no scheduling per task), keeping ``2 × runs_per_actor`` tasks in flight
per actor so that no slot idles while a chunk's results travel back, and records the
results it gets back — the driver stays the only writer of ``results.jsonl``.

When an actor dies (its process killed, its node lost), its chunks in flight fail with
``RayActorError``: their tasks go back to the queue and are run by another actor —
resumed from their transcripts when the output folder is shared storage, started over
otherwise — and a fresh actor replaces the dead one (at most ``max_restarts`` times in a
fleet). A task whose actor died under it ``max_attempts`` times is recorded ``failed``,
so one task that kills its worker cannot stall the fleet. Every actor is killed when the
fleet ends, also on error or cancellation: actors hold their CPUs until then.

Ray is imported only here, inside the methods: ``import trio_agent.fleet`` never needs it
(``pip install 'trio-agent[ray]'`` for this backend).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from trio_agent import Usage

from ._task import FAILED, FleetError, FleetTask, StorageError, TaskResult, transcript_relpath
from ._worker import Job, resolve_factory, run_task

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ._fleet import Recorder

__all__ = ["FleetWorker", "RayBackend"]


class FleetWorker:
    """The body of a fleet's Ray actor: a trio loop in a thread, running chunks of tasks.

    Plain Python (``RayBackend`` wraps it with ``ray.remote``); usable without Ray.
    """

    def __init__(self, job: Job, runs: int) -> None:
        self._job = job
        self._factory = resolve_factory(job.factory)
        (job.out / "transcripts").mkdir(parents=True, exist_ok=True)
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
        """True once the loop runs (the factory was resolved in the constructor)."""
        return self._token is not None

    def run_chunk(self, tasks: list[FleetTask]) -> list[TaskResult]:
        """Run ``tasks`` in the actor's trio loop; blocks the calling thread until every
        one has a result (several calls may run at once, sharing the limiter).

        Raises:
            StorageError: a task's transcript could not be read or written; raised once
                every other task of the chunk has ended (their results are not returned:
                their transcripts hold them, for the next run of the fleet).
        """
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
        if storage:
            # The fleet stops; the chunk's finished runs are rebuilt from their
            # transcripts by the next run of the fleet, without running again.
            raise storage[0]
        return [r for r in results if r is not None]

    def stop(self) -> None:
        """End the trio loop (cancelling nothing: call it when no chunk runs)."""
        if self._stop is not None and self._token is not None:
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join()


class _Queue:
    """Tasks to hand out: retried ones first, then the input, in chunks."""

    def __init__(self, tasks: Iterator[FleetTask], chunk_size: int) -> None:
        self._tasks = tasks
        self._chunk = chunk_size
        self.retry: deque[FleetTask] = deque()
        self.in_flight = 0
        self._changed = trio.Event()
        self.exhausted = False

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def next_chunk(self) -> list[FleetTask] | None:
        """The next chunk, or None once everything is handed out and back."""
        while True:
            chunk: list[FleetTask] = []
            while self.retry and len(chunk) < self._chunk:
                chunk.append(self.retry.popleft())
            while not self.exhausted and len(chunk) < self._chunk:
                task = next(self._tasks, None)
                if task is None:
                    self.exhausted = True
                else:
                    chunk.append(task)
            if chunk:
                self.in_flight += 1
                return chunk
            if self.in_flight == 0:
                return None
            await self._changed.wait()

    def finished(self, back: list[FleetTask] = []) -> None:  # noqa: B006 - never mutated
        self.in_flight -= 1
        self.retry.extend(back)
        self._notify()

    @property
    def left(self) -> int:
        return len(self.retry) + (0 if self.exhausted else 1)


@attrs.frozen(kw_only=True)
class RayBackend:
    """Run a fleet on a Ray cluster (``pip install 'trio-agent[ray]'``).

    Attributes:
        address: the cluster to connect to when Ray is not initialized yet
            (``"auto"``: the one ``ray start`` runs on this machine; ``None``: start a
            local one); a connection this backend made is shut down at the end. When
            ``ray.is_initialized()``, the current connection is used and left open.
        actors: how many actors (one trio loop each).
        runs_per_actor: runs at once per actor.
        num_cpus: CPUs each actor holds for its life (fractions allowed).
        chunk_size: tasks per call to an actor (default ``runs_per_actor // 4``). A
            call returns when its whole chunk is done: smaller chunks record results
            sooner when run times vary, larger ones make fewer calls.
        max_restarts: dead actors replaced in one fleet.
        max_attempts: a task whose actor died under it this many times is recorded
            ``failed``.
        init_options: more keyword arguments for ``ray.init``.
        name_prefix: when set, actors are named ``f"{name_prefix}{k}"`` (k = 0, 1, ...
            in start order, replacements included), so that ``ray.get_actor`` finds them.

    The factory must be picklable (a module-level function, or ``"module:function"``
    importable on the workers), and ``out`` reachable from every node (shared storage)
    for a task to resume where a dead actor left it.
    """

    address: str | None = "auto"
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
        actors (their tasks resume on the next run).

        Raises:
            FleetError: an actor could not start, or every actor died with tasks left.
            ImportError: Ray is not installed.
        """
        try:
            import ray
            from ray.exceptions import RayActorError
        except ImportError as exc:
            raise ImportError("RayBackend needs Ray: pip install 'trio-agent[ray]'") from exc

        own_connection = False
        if not ray.is_initialized():
            await trio.to_thread.run_sync(
                lambda: ray.init(address=self.address, **self.init_options)
            )
            own_connection = True
        chunk = self.chunk_size or max(1, self.runs_per_actor // 4)
        in_flight_chunks = max(2, -(-2 * self.runs_per_actor // chunk))
        remote_cls: Any = ray.remote(FleetWorker)
        base: dict[str, Any] = {
            "num_cpus": self.num_cpus,
            "max_concurrency": in_flight_chunks + 2,
        }
        queue = _Queue(tasks, chunk)
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
            actor = remote_cls.options(**options).remote(job, self.runs_per_actor)
            spawned.append(actor)
            try:
                await get(actor.ready.remote())
            except RayActorError as exc:
                raise FleetError(f"a Ray actor of the fleet could not start: {exc}") from exc
            return actor

        async def died(batch: list[FleetTask]) -> None:
            back: list[FleetTask] = []
            lost: list[FleetTask] = []
            for task in batch:
                attempts[task.id] = attempts.get(task.id, 0) + 1
                (lost if attempts[task.id] >= self.max_attempts else back).append(task)
            queue.finished(back)
            for task in lost:
                await recorder.record(
                    TaskResult(
                        id=task.id,
                        reason=FAILED,
                        steps=0,
                        usage=Usage(),
                        wall_time=0.0,
                        error=f"the Ray actor running it died {attempts[task.id]} times",
                        transcript=transcript_relpath(task.id),
                    )
                )

        async def feed(actor: Any, dead: list[bool]) -> None:
            while not dead[0]:
                batch = await queue.next_chunk()
                if batch is None:
                    return
                counters.running += len(batch)
                try:
                    results: list[TaskResult] = await get(actor.run_chunk.remote(batch))
                except RayActorError:
                    dead[0] = True
                    counters.running -= len(batch)
                    await died(batch)
                    return
                except BaseException:
                    counters.running -= len(batch)
                    queue.finished()
                    raise
                counters.running -= len(batch)
                for result in results:
                    await recorder.record(result)
                queue.finished()

        async def slot() -> None:
            while True:
                actor = await start_actor()
                dead = [False]
                async with trio.open_nursery() as nursery:
                    for _ in range(in_flight_chunks):
                        nursery.start_soon(feed, actor, dead)
                if not dead[0]:
                    await stop(actor)
                    return
                ray.kill(actor)
                if restarts[0] == 0 or (queue.left == 0 and queue.in_flight == 0):
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
