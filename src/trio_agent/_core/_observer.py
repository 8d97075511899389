"""What a run reports as it goes: the observer protocol, and the ``trio_agent`` logger.

The loop calls out at three places — a run, each model request, each tool call — to an
:class:`Observer` set in ``LoopConfig.observer`` (``trio_agent.telemetry.OpenTelemetry``
is one; anything with these methods is another). The runtime side (what calls them, and
the log lines) is ``_run/_observe``.

Each ``start_*`` method returns an *observation*, which the loop ends exactly once (the
call's, the request's, the run's outcome) and may ``activate`` in the task that does the
work — the run's task for the run and its requests, the call's own task for a tool call
— so that whatever that work starts (an HTTP request, a subprocess, a nested run) finds
it current. ``activate``/``deactivate`` are always paired in one task, never held
across a ``yield``.

Logging: the ``trio_agent`` logger has a ``NullHandler`` (silent unless the application
configures logging). At DEBUG, one line per model request and per tool call; at INFO,
one line per run end. Lines carry names, ids, outcomes, token counts and durations —
never message contents, arguments, results, headers or keys.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from . import _events as ev
    from ._messages import AssistantMessage, Message, ToolCall, ToolResultMessage, Usage
    from ._model import Model, ModelRequest

__all__ = [
    "CallObservation",
    "Observer",
    "RequestObservation",
    "RunObservation",
    "logger",
]

logger = logging.getLogger("trio_agent")
logger.addHandler(logging.NullHandler())


class _Activatable(Protocol):
    def activate(self) -> object:
        """Make this observation current in the calling task; returns a token."""
        ...

    def deactivate(self, token: object) -> None:
        """Undo the :meth:`activate` that returned ``token`` (same task)."""
        ...


class RunObservation(_Activatable, Protocol):
    """One run being observed: what ``Observer.start_run`` returns.

    The loop activates it in the run's task while the run works and ends it exactly
    once, also when the run is cancelled from outside or fails.
    """

    def end(
        self,
        *,
        reason: ev.EndReason | None,
        steps: int,
        usage: Usage,
        error: BaseException | None,
    ) -> None:
        """The run ended with ``reason`` (None if it never got to close), or ``error``
        propagates out of it (``Cancelled`` from an outer scope, a hook's failure)."""
        ...


class RequestObservation(_Activatable, Protocol):
    """One model request being observed: what ``Observer.start_request`` returns.

    The loop activates it in the run's task around the request, calls ``first_chunk``
    at most once, and ends it exactly once when the stream closes.
    """

    def first_chunk(self) -> None:
        """The model's first event arrived."""
        ...

    def end(self, *, message: AssistantMessage | None, error: BaseException | None) -> None:
        """The stream closed: ``message`` is the final ``Done``/``Error`` reply if one
        arrived; ``error`` what propagated out of the stream (``Cancelled`` for an abort,
        an interrupt or ``stream_idle_timeout``), if anything."""
        ...


class CallObservation(_Activatable, Protocol):
    """One tool call being observed: what ``Observer.start_tool_call`` returns.

    The loop activates it in the call's own task while the tool runs, and ends it
    exactly once when the call has its result (whatever the outcome).
    """

    def end(
        self,
        *,
        result: ToolResultMessage,
        outcome: ev.ToolOutcome,
        exception: Exception | None,
    ) -> None:
        """The call settled (or got its stop result on an abort, interrupt or cancel);
        ``exception`` is what the tool raised, if it raised."""
        ...


class Observer(Protocol):
    """What the loop calls out to. All methods (the observations' too) are synchronous
    and must not block. An exception one raises is logged as a warning on the
    ``trio_agent`` logger and otherwise ignored: observing never changes a run."""

    def start_run(self, *, model: Model, prompts: tuple[Message, ...]) -> RunObservation:
        """A run starts (in its own task, before its first event)."""
        ...

    def start_request(self, *, model: Model, request: ModelRequest) -> RequestObservation:
        """A model request is about to be sent."""
        ...

    def start_tool_call(self, *, call: ToolCall) -> CallObservation:
        """A tool call of a batch is about to be prepared (in the run's task)."""
        ...
