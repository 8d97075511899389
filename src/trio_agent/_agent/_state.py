"""The Agent's state: what it keeps between runs, and the snapshots it hands out.

Theory of operation
-------------------
:class:`StateView` holds what an agent keeps — the transcript, whether a run holds the
agent, the last run's error, the token totals — and builds :class:`AgentState` snapshots
from it, only when one is read:

- between runs, one snapshot is built and handed out until something changes (every
  change goes through a method of :class:`StateView`, which drops the cached one);
- while a run is active, the state is read from the run itself (its transcript, the
  reply it is streaming, its tool batch), which the run updates synchronously *before*
  it emits any event about it. So whatever runs after an event — a tool, a
  ``before_tool_call`` hook, a subscriber, another task — finds a state that already
  includes it: a running tool finds its own call in ``pending_tool_calls``, a subscriber
  holding ``MessageEnd`` finds the message in ``messages`` (it may also find what the run
  did after that event: the run goes on once a subscriber has taken an event).

Nothing is done per event for the state: the transcript tuple of a live run is extended
by the messages added since the last read (not rebuilt), and the partial reply is built
only when read, so streaming N deltas stays O(total size). Nothing here is a checkpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

import attrs

from .._core import AssistantMessage, Message, Usage

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .._core import AgentRunResult
    from .._run import Runner

__all__ = ["AgentState", "StateView"]


@attrs.frozen(kw_only=True)
class AgentState:
    """A snapshot of an :class:`Agent` (it never changes; read ``agent.state`` again).

    Attributes:
        messages: the transcript: finished messages only, in order.
        is_running: a run is active (false again once its ``AgentEnd`` is announced).
        streaming_message: the assistant reply being streamed, as it stands; None when no
            reply is streaming.
        pending_tool_calls: ids of the tool calls started and not yet finished.
        error_message: why the last run failed — the model's error, or the message of the
            :class:`AgentRunError` that ``prompt()`` raised; None otherwise.
    """

    messages: tuple[Message, ...] = ()
    is_running: bool = False
    streaming_message: AssistantMessage | None = None
    pending_tool_calls: frozenset[str] = frozenset()
    error_message: str | None = None


@final
class StateView:
    """What an agent keeps, and its snapshots (see ``Agent.state``).

    Attributes (read them; change them through the methods, which keep the snapshots
    right):
        messages: the transcript as of the last run's end (or as reset or replaced).
        running: a run holds the agent (false again once the run's state is final).
        error_message: why the last run failed, or None.
        usage: the token counts of every finished run, summed.
        resets: how many times :meth:`reset` was called.
    """

    __slots__ = (
        "_live_count",
        "_live_run",
        "_messages_tuple",
        "_state",
        "error_message",
        "messages",
        "resets",
        "running",
        "usage",
    )

    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages
        self.running = False
        self.error_message: str | None = None
        self.usage = Usage()
        self.resets = 0
        self._state: AgentState | None = None
        # The transcript as a tuple; during a run (`_live_run`), with that run's first
        # `_live_count` new messages.
        self._messages_tuple: tuple[Message, ...] | None = None
        self._live_run: Runner | None = None
        self._live_count = 0

    def state(self, run: Runner | None) -> AgentState:
        """The state: read from ``run``, the agent's live run, if any; else as kept (one
        snapshot, built once until something changes)."""
        if run is not None:
            return self._live(run)
        state = self._state
        if state is None:
            if self._messages_tuple is None:
                self._messages_tuple = tuple(self.messages)
            self._state = state = AgentState(
                messages=self._messages_tuple,
                is_running=self.running,
                error_message=self.error_message,
            )
        return state

    def total_usage(self, run: Runner | None) -> Usage:
        """The token counts of every finished run, and of ``run`` (live) so far."""
        return self.usage if run is None else self.usage + run.usage

    def _live(self, run: Runner) -> AgentState:
        """The state of an agent running ``run``, read from the run."""
        new = run.new_messages
        if self._live_run is not run or self._messages_tuple is None:
            self._live_run = run
            self._messages_tuple = tuple(self.messages)
            self._live_count = 0
        if self._live_count != len(new):
            self._messages_tuple += tuple(new[self._live_count :])
            self._live_count = len(new)
        acc = run.acc
        batch = run.batch
        return AgentState(
            messages=self._messages_tuple,
            is_running=True,
            # The partial reply is built only here, when someone looks: streaming N
            # deltas stays O(total size).
            streaming_message=(
                acc.snapshot().materialize() if acc is not None and acc.started else None
            ),
            pending_tool_calls=(
                frozenset(
                    st.call.id for st in batch.states if st.start_emitted and st.result is None
                )
                if batch is not None
                else frozenset()
            ),
        )

    def _changed(self, *, messages: bool = False) -> None:
        self._state = None
        if messages:
            self._messages_tuple = None
            self._live_run = None  # a finished run is not kept alive by the cache

    def begin(self) -> None:
        """A run takes the agent: running, no error."""
        self.running = True
        self.error_message = None
        self._changed()

    def end(self, result: AgentRunResult | None) -> None:
        """The run's state is final: its transcript, usage and error are kept (the
        transcript stays as it was when the run has no result)."""
        if result is not None:
            self.usage += result.usage
            self.messages = list(result.transcript)
            self.error_message = result.error_message
        self.running = False
        self._changed(messages=True)

    def fail(self, error_message: str) -> None:
        """The last run failed with ``error_message``."""
        self.error_message = error_message
        self._changed()

    def reset(self) -> None:
        """Forget the transcript and the last error."""
        self.resets += 1
        self.messages = []
        self.error_message = None
        self._changed(messages=True)

    def replace(self, messages: Iterable[Message]) -> None:
        """Make ``messages`` the transcript."""
        self.messages = list(messages)
        self._changed(messages=True)
