"""Running trio code from asyncio: one trio guest run on the running asyncio loop.

Theory of operation. The first call on an asyncio loop starts trio in *guest mode*
(``trio.lowlevel.start_guest_run``): trio's scheduler runs inside the asyncio loop's
own callbacks, on the same thread — no thread per call, no second event loop. The trio
side is one nursery (``_Guest._main``) that lives until :func:`aclose`. Each call
(:func:`run`) is one trio task in that nursery, inside its own ``CancelScope``, started
through the trio token (``run_sync_soon``: thread-safe, and run in trio's context); its
outcome is handed back by completing an asyncio future (same thread).

Cancelling the asyncio task that awaits :func:`run` cancels the trio task's scope; the
asyncio task then waits — shielded — until the trio task finished its clean-up (an agent
run pairs its transcript with ``aborted`` results) before ``CancelledError``
propagates. So when a cancelled call returns, nothing of it is left running.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING, Any, TypeVar

import trio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import outcome

__all__ = ["aclose", "run"]

T = TypeVar("T")

_guests: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Guest] = weakref.WeakKeyDictionary()


class _Guest:
    """The trio guest run of one asyncio loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.token: trio.lowlevel.TrioToken | None = None
        self.nursery: trio.Nursery | None = None
        self.pending: list[Callable[[], None]] = []
        self.stop: trio.Event | None = None
        self.stopping = False
        self.active = 0
        self.done: asyncio.Future[None] = loop.create_future()
        trio.lowlevel.start_guest_run(
            self._main,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            run_sync_soon_not_threadsafe=loop.call_soon,
            done_callback=self._finished,
            host_uses_signal_set_wakeup_fd=True,
        )

    async def _main(self) -> None:
        self.stop = trio.Event()
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            self.token = trio.lowlevel.current_trio_token()
            pending, self.pending = self.pending, []
            for start in pending:
                start()
            await self.stop.wait()
            # Nothing is running (aclose waits for the calls); nothing is left.
            nursery.cancel_scope.cancel()

    def _finished(self, result: outcome.Outcome[None]) -> None:
        if self.done.done():
            return
        # The guest run's own outcome (not an async context): a failure is a bug,
        # handed to whoever awaits aclose().
        error = getattr(result, "error", None)
        if error is not None:
            self.done.set_exception(error)
        else:
            self.done.set_result(None)

    def stop_if_idle(self) -> None:
        """Once :func:`aclose` asked and no call runs: end the run (in trio's context)."""
        if self.stopping and self.active == 0 and self.stop is not None:
            self.stop.set()

    def soon(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` in trio's context, as soon as the run is up."""
        if self.token is None:
            self.pending.append(fn)
        else:
            self.token.run_sync_soon(fn)

    def start(
        self, async_fn: Callable[..., Awaitable[T]], args: tuple[Any, ...]
    ) -> tuple[asyncio.Future[T], trio.CancelScope]:
        future: asyncio.Future[T] = self.loop.create_future()
        scope = trio.CancelScope()

        async def job() -> None:
            try:
                with scope:
                    value = await async_fn(*args)
            except trio.Cancelled:
                # Not this call's scope: the whole guest run is going away.
                future.cancel()
                raise
            except Exception as exc:
                if not future.done():
                    future.set_exception(exc)
                return
            finally:
                self.active -= 1
                self.stop_if_idle()
            if future.done():
                return
            if scope.cancelled_caught:
                future.cancel()
            else:
                future.set_result(value)

        def spawn() -> None:
            assert self.nursery is not None
            self.active += 1
            self.nursery.start_soon(job)

        self.soon(spawn)
        return future, scope


def _guest() -> _Guest:
    loop = asyncio.get_running_loop()
    guest = _guests.get(loop)
    if guest is None or guest.stopping:
        guest = _guests[loop] = _Guest(loop)
    return guest


async def run(async_fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run the trio function ``async_fn(*args)`` from asyncio code and return its value.

    Must be called from a coroutine on a running asyncio loop (``asyncio`` or uvloop).
    The first call starts trio in guest mode on that loop; later calls share it. Every
    call is one trio task; none needs a thread.

    Cancelling the awaiting asyncio task cancels the trio task, waits for it to finish
    (its clean-up runs: an agent run pairs its transcript), then raises
    ``asyncio.CancelledError``. An exception ``async_fn`` raises is raised here.

    Raises:
        RuntimeError: no asyncio loop is running.
        BaseException: what ``async_fn`` raised.
    """
    guest = _guest()
    future, scope = guest.start(async_fn, args)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        if not future.done():
            guest.soon(scope.cancel)
            await _settled(future)  # noqa: ASYNC102 - bounded by the trio clean-up
        raise


async def _settled(future: asyncio.Future[Any]) -> None:
    """Wait until ``future`` is done, whatever cancels the waiting task meanwhile.

    The trio task's clean-up is bounded (an agent run's ``cleanup_timeout``); waiting
    for it keeps the promise that a cancelled call leaves nothing running.
    """
    done = asyncio.Event()
    future.add_done_callback(lambda _: done.set())
    while not done.is_set():
        try:
            await asyncio.shield(done.wait())
        except asyncio.CancelledError:  # noqa: ASYNC103 - the caller re-raises it
            continue  # noqa: ASYNC104 - re-raised by run() once settled


async def aclose() -> None:
    """Stop this loop's trio guest run: wait for the calls in flight, then end it.

    Call it before the asyncio loop ends (a guest run left behind never finishes: its
    callbacks are dropped with the loop). A later :func:`run` starts a new one. Closes
    nothing else: close models (``await run(model.aclose)``) first.
    """
    loop = asyncio.get_running_loop()
    guest = _guests.pop(loop, None)
    if guest is None:
        return
    guest.stopping = True
    guest.soon(guest.stop_if_idle)
    await guest.done
