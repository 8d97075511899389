"""What a run reports as it goes: the observer protocol, and the ``trio_agent`` log lines.

The loop calls out at three places — a run, each model request, each tool call — to an
:class:`Observer` set in ``LoopConfig.observer`` (``trio_agent.telemetry.OpenTelemetry``
is one; anything with these methods is another). With no observer and the
``trio_agent`` logger not enabled for INFO, a run builds no :class:`Probe` and each of
those places costs one attribute check.

Each ``start_*`` method returns an *observation*, which the loop ends exactly once (the
call's, the request's, the run's outcome) and may ``activate`` in the task that does the
work — the run's task for the run and its requests, the call's own task for a tool call
— so that whatever that work starts (an HTTP request, a subprocess, a nested run) finds
it current. ``activate``/``deactivate`` are always paired in one task, never held
across a ``yield``. (The trio side — the request's stream under its observation — is
``_run._observed.ObservedStream``.)

Logging: the ``trio_agent`` logger has a ``NullHandler`` (silent unless the application
configures logging). At DEBUG, one line per model request and per tool call; at INFO,
one line per run end. Lines carry names, ids, outcomes, token counts and durations —
never message contents, arguments, results, headers or keys.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, final

import trio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from . import _events as ev
    from ._messages import AssistantMessage, Message, ToolCall, ToolResultMessage, Usage
    from ._model import Model, ModelRequest

__all__ = [
    "CallObservation",
    "ObservedCall",
    "Observer",
    "Probe",
    "RequestObservation",
    "RunObservation",
    "logger",
]

_T = TypeVar("_T")

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


@final
class Probe:
    """One run's view of its observer and the logger (built only when either is on)."""

    __slots__ = ("debug", "observer")

    def __init__(self, observer: Observer | None, debug: bool) -> None:
        self.observer = observer
        self.debug = debug

    @staticmethod
    def make(observer: Observer | None) -> Probe | None:
        """A probe for a run, or None when nothing observes it (no observer, no logging)."""
        if observer is None and not logger.isEnabledFor(logging.INFO):
            return None
        return Probe(observer, logger.isEnabledFor(logging.DEBUG))

    async def run(
        self,
        body: Callable[[], Awaitable[_T]],
        *,
        model: Model,
        prompts: tuple[Message, ...],
        ended: Callable[[], tuple[ev.EndReason | None, int, Usage]],
    ) -> _T:
        """Run ``body`` (the whole run) under the run's observation; ``ended`` reads the
        run's end reason, steps and usage once it is over."""
        obs = (
            None
            if self.observer is None
            else _safely(self.observer.start_run, model=model, prompts=prompts)
        )
        token = None if obs is None else _safely(obs.activate)
        start = trio.current_time()
        error: BaseException | None = None
        try:
            return await body()
        except BaseException as exc:  # noqa: ASYNC103 - recorded and re-raised as is
            error = exc
            raise
        finally:
            reason, steps, usage = ended()
            if obs is not None:
                _safely(obs.deactivate, token)
                _safely(obs.end, reason=reason, steps=steps, usage=usage, error=error)
            logger.info(
                "run ended: reason=%s steps=%d input_tokens=%d output_tokens=%d "
                "cache_read_tokens=%d cache_write_tokens=%d duration=%.3fs%s",
                reason,
                steps,
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens,
                trio.current_time() - start,
                "" if error is None else f" error={_error_type(error)}",
            )

    def tool_call(self, call: ToolCall) -> ObservedCall:
        """An observation of one tool call (its log line included)."""
        obs = None if self.observer is None else _safely(self.observer.start_tool_call, call=call)
        return ObservedCall(obs, self.debug, call)


def _safely(method: Callable[..., _T], *args: Any, **kwargs: Any) -> _T | None:
    """Call into the observer; what it raises is logged and dropped (None), so that an
    observer's bug never changes a run — not its result, not its clean-up."""
    try:
        return method(*args, **kwargs)
    except Exception:
        logger.warning("the observer failed in %s", method.__qualname__, exc_info=True)
        return None


def _error_type(error: BaseException) -> str:
    if isinstance(error, trio.Cancelled):
        return "cancelled"
    return type(error).__qualname__


@final
class ObservedCall:
    """One tool call's observation and log line; ended once, activated in its task."""

    __slots__ = ("call", "debug", "exception", "obs", "start")

    def __init__(self, obs: CallObservation | None, debug: bool, call: ToolCall) -> None:
        self.obs = obs
        self.debug = debug
        self.call = call
        self.start = trio.current_time()
        self.exception: Exception | None = None  # what the tool raised, if it did

    def activate(self) -> object:
        return None if self.obs is None else _safely(self.obs.activate)

    def deactivate(self, token: object) -> None:
        if self.obs is not None:
            _safely(self.obs.deactivate, token)

    def end(self, result: ToolResultMessage, outcome: ev.ToolOutcome) -> None:
        if self.obs is not None:
            obs, self.obs = self.obs, None  # ended exactly once
            _safely(obs.end, result=result, outcome=outcome, exception=self.exception)
        if self.debug:
            self.debug = False
            logger.debug(
                "tool call %s (%s): %s in %.3fs",
                self.call.name,
                self.call.id,
                outcome,
                trio.current_time() - self.start,
            )
