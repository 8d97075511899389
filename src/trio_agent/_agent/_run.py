"""An Agent's runs, one at a time: the run slot, a run's bookkeeping, and its end.

Theory of operation
-------------------
An agent runs one run at a time. ``prompt()`` and ``continue_()`` take the agent's
:class:`RunSlot` (:meth:`RunSlot.begin`), or raise :class:`AgentBusyError` while a run
holds it; a run that has ended and only hands its ``AgentEnd`` to the subscribers is
waited for instead. The slot holds the run's :class:`ActiveRun`: its ``Runner`` once
built, and the messages its polls took from the queues.

A run's state becomes final exactly once (:meth:`RunSlot.finalize`): its transcript,
usage and error are kept, each message it took from the queues and did not deliver goes
back to the front of its queue, and the agent is no longer running. That happens just
before the run's ``AgentEnd`` reaches the subscribers, once the events before it were
handed over (at once when nobody subscribes) — so a subscriber holding ``AgentEnd`` finds
the state final, as in pi — or when the run ends without that (it never started, or
its clean-up was cut short). The run then finishes handing ``AgentEnd`` over, and
:meth:`RunSlot.finish` frees the slot: what the bounded clean-up could not hand over is
dropped (never to the next run's subscribers), an :class:`AgentRunError` becomes the
state's ``error_message``, and whoever waits for the slot goes on.

Nothing here is a checkpoint except :meth:`RunSlot.begin`, :meth:`RunSlot.wait_for_idle`
and :meth:`RunSlot.close`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, final

import attrs
import trio

from .._core import (
    AgentBusyError,
    AgentRunError,
    AgentUsageError,
    AssistantMessage,
    Message,
    check_loop_config,
)
from .._run import Kind, Runner

if TYPE_CHECKING:
    from .._core import AgentRunResult, LoopConfig
    from .._run import EventDelivery, MessageQueues, QueueMode
    from ._state import StateView

__all__ = ["ActiveRun", "QueueModes", "RunSlot", "check_config"]


def check_config(_owner: object, _attribute: object, config: LoopConfig) -> None:
    """The validator of ``Agent.config``: the agent's runs poll its own queues, so
    ``config`` must not set those polls.

    Raises:
        TypeError: ``config`` is not a ``LoopConfig``.
        AgentUsageError: ``config`` sets a steering or follow-up hook.
    """
    check_loop_config(config)
    for hook, method in (
        ("get_steering_messages", "steer"),
        ("get_follow_up_messages", "follow_up"),
    ):
        if getattr(config, hook) is not None:
            raise AgentUsageError(
                f"LoopConfig.{hook} is set, but the Agent owns that queue: queue messages "
                f"with agent.{method}() instead (or drive run_agent_loop yourself to use "
                "your own hook)"
            )


class QueueModes(Protocol):
    """Where a poll reads its queue mode (the Agent: the modes may change between polls)."""

    @property
    def steering_mode(self) -> QueueMode: ...

    @property
    def follow_up_mode(self) -> QueueMode: ...


@attrs.define(eq=False)
class ActiveRun:
    """The bookkeeping of one run, from ``prompt()`` to its return."""

    skip_first_poll: bool = False
    taken: list[tuple[Kind, Message]] = attrs.field(factory=list)
    run: Runner | None = None
    resets_at_end: int = 0  # the view's reset count when the run's state was made final
    finalized: bool = False
    done: trio.Event = attrs.field(factory=trio.Event)


@final
class RunSlot:
    """The one run an agent may hold, and the state changes at its start and end.

    Args:
        queues: the agent's queues (the run's polls take from them, and what they took
            and did not deliver goes back).
        modes: where the polls read the queue modes.
        view: the agent's state.
        delivery: the agent's event delivery to its subscribers (what a run still owes
            them is dropped at its end; closing ends every subscription).

    Attributes:
        active: the run holding the slot, or None.
        live_run: the active run's ``Runner`` from :meth:`attach` until the run's state
            is final, else None (the agent's state is read from it).
        closed: the agent refuses new work.
    """

    __slots__ = ("_delivery", "_modes", "_queues", "_view", "active", "closed", "live_run")

    def __init__(
        self,
        queues: MessageQueues,
        modes: QueueModes,
        view: StateView,
        delivery: EventDelivery,
    ) -> None:
        self.active: ActiveRun | None = None
        self.live_run: Runner | None = None
        self.closed = False
        self._queues = queues
        self._modes = modes
        self._view = view
        self._delivery = delivery

    def check_open(self) -> None:
        """Raises :class:`AgentUsageError` once the agent is closed."""
        if self.closed:
            raise AgentUsageError("the agent is closed (its open_agent block was left)")

    def check_idle(self, what: str) -> None:
        """Raises :class:`AgentBusyError` while a run is active (``what`` names the call)."""
        active = self.active
        if active is not None and not active.finalized:
            raise AgentBusyError(
                f"cannot call {what} while the agent is running: call abort(), then "
                f"await wait_for_idle(), then {what}"
            )

    async def begin(self, what: str) -> ActiveRun:
        """Take the run slot for ``what`` (``"prompt"`` or ``"continue_"``), or raise
        :class:`AgentBusyError`. A checkpoint."""
        await trio.lowlevel.checkpoint()
        while True:
            self.check_open()
            active = self.active
            if active is None:
                break
            if not active.finalized:
                if what == "prompt":
                    hint = (
                        "queue the message with steer() or follow_up(), or await "
                        "wait_for_idle() before prompt()"
                    )
                else:
                    hint = "await wait_for_idle() before continue_()"
                raise AgentBusyError(f"the agent is already running: {hint}")
            # The previous run has ended and only delivers its AgentEnd: wait for it.
            await active.done.wait()
        active = ActiveRun()
        self.active = active
        self._view.begin()
        return active

    def attach(self, active: ActiveRun, runner: Runner) -> None:
        """``runner`` runs ``active``: from now on the state is read from it."""
        active.run = runner
        self.live_run = runner

    def take(self, active: ActiveRun, kind: Kind) -> list[Message]:
        """The run's poll of the ``kind`` queue (by its mode); nothing once the run's
        state is final."""
        if active.finalized:
            return []
        modes = self._modes
        mode = modes.steering_mode if kind == "steering" else modes.follow_up_mode
        return self._queues.take(active.taken, kind, mode)

    def poll_steering(self, active: ActiveRun) -> list[Message]:
        """The run's steering poll."""
        if active.skip_first_poll:
            # The run's prompts already carry the steering this poll would deliver;
            # skipping it keeps "one_at_a_time" to one message per turn.
            active.skip_first_poll = False
            return []
        return self.take(active, "steering")

    def prompt_messages(self, active: ActiveRun, prompts: list[Message]) -> list[Message]:
        """What ``prompt(prompts)`` sends: the queued steering (by its mode), then
        ``prompts``."""
        steering = self.take(active, "steering")
        active.skip_first_poll = bool(steering)
        return [*steering, *prompts]

    def continue_messages(self, active: ActiveRun) -> list[Message]:
        """What ``continue_()`` sends (see ``Agent.continue_``): nothing new after a
        user, tool-result or custom message; after an assistant message, the queued
        steering, else the queued follow-ups.

        Raises:
            AgentUsageError: nothing to continue from (the slot is freed first).
        """
        messages = self._view.messages
        if not messages:
            self.finish(active, None, None)
            raise AgentUsageError(
                "nothing to continue from: the transcript is empty (call prompt(); it also "
                "delivers queued steering)"
            )
        if type(messages[-1]) is not AssistantMessage:
            return []
        prompts = self.take(active, "steering")
        active.skip_first_poll = bool(prompts)
        if not prompts:
            prompts = self.take(active, "follow_up")
        if not prompts:
            self.finish(active, None, None)
            raise AgentUsageError(
                "cannot continue from an assistant message with nothing queued: call "
                "prompt(), or queue a message with steer() or follow_up() first"
            )
        return prompts

    def interrupt(self) -> None:
        """A message just queued at the front of the steering queue interrupts the
        active run (see ``Agent.steer``); nothing happens when none is active (the
        message waits in the queue), or when the run is being aborted or has ended."""
        active = self.active
        if active is not None and not active.finalized and active.run is not None:
            active.run.interrupt()

    def abort(self, reason: str | None, grace: float | None = None) -> None:
        """Abort the active run (see ``Agent.abort``). Nothing is awaited between
        :meth:`begin` and :meth:`attach` (the run goes on in the task that took the
        slot), so another task never finds a slot taken and its ``Runner`` missing."""
        active = self.active
        if active is not None and active.run is not None:
            active.run.abort(reason, grace=grace)

    def finalize(self, active: ActiveRun, result: AgentRunResult | None) -> None:
        """Make the run's state final, once: ``result`` kept, the messages taken and not
        delivered back at the front of their queues, the agent no longer running."""
        if active.finalized:
            return
        active.finalized = True
        self.live_run = None
        self._queues.put_back(active.taken, result.messages if result is not None else ())
        self._view.end(result)
        active.resets_at_end = self._view.resets

    def finish(
        self, active: ActiveRun, result: AgentRunResult | None, error: AgentRunError | None
    ) -> None:
        """The run is over: finalize it (if not yet), drop what is still owed to
        the subscribers, keep ``error``'s message and free the slot."""
        view = self._view
        self.finalize(active, result)
        # What the run's bounded clean-up could not hand over is dropped (a
        # subscriber that took nothing for cleanup_timeout): never to the next run.
        self._delivery.drop_owed()
        # The error is kept unless the agent was reset since the run's state became
        # final (a subscriber may reset it as soon as it sees AgentEnd): a reset wins.
        if error is not None and view.resets == active.resets_at_end:
            view.fail(str(error))
        self.active = None
        # The run's hooks point back at `active`: without this link the finished run
        # is freed at once, not left for the garbage collector.
        active.run = None
        active.done.set()

    async def wait_for_idle(self) -> None:
        """Wait until no run holds the slot. A checkpoint."""
        await trio.lowlevel.checkpoint()
        while self.active is not None:
            await self.active.done.wait()

    # Not a checkpoint when no run is active: in the finally of a cancelled open_agent
    # block, a checkpoint would raise Cancelled before the subscriptions are ended.
    async def close(self, bound: float) -> None:
        """Refuse new work, abort the active run and wait for it to end: at most ``bound``
        seconds with the subscribers still served, then (every subscription ended) as
        long again. Shielded: a cancel does not cut the waits short."""
        self.closed = True
        self.abort("the agent was closed")
        active = self.active
        if active is not None:
            # First with the subscribers still served, so that they see the run end...
            with trio.move_on_after(bound, shield=True):
                await active.done.wait()
        self._delivery.end()
        if active is not None and not active.done.is_set():
            # ...then without them, if one was too slow to take the last events.
            with trio.move_on_after(bound, shield=True):
                await active.done.wait()
