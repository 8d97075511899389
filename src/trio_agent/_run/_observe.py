"""The runtime side of observing a run: the probe that calls the observer and writes
the ``trio_agent`` log lines (the protocol and the logger are ``_core/_observer``).

With no observer and the ``trio_agent`` logger not enabled for INFO, a run builds no
:class:`Probe` and each of the places it would report costs one attribute check. An
observer's method that raises is logged as a warning and otherwise ignored: observing
never changes a run. A model request observed is an :class:`ObservedStream`, a
``StreamWrapper``: it ends the request's observation exactly once when the stream
closes, with the reply's final message (the stream's last event's) if one arrived.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, TypeVar, final

import trio

from .._core import AssistantMessage, logger
from ._streams import StreamWrapper

if TYPE_CHECKING:
    from collections.abc import AsyncIterable, Awaitable, Callable
    from contextlib import AbstractAsyncContextManager

    from .._core import (
        CallObservation,
        Message,
        Model,
        ModelRequest,
        Observer,
        RequestObservation,
        ToolCall,
        ToolResultMessage,
        Usage,
    )
    from .._core import events as ev

__all__ = ["ObservedCall", "ObservedStream", "Probe"]

_T = TypeVar("_T")


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

    def request(
        self,
        stream: AbstractAsyncContextManager[AsyncIterable[ev.AssistantEvent]],
        model: Model,
        request: ModelRequest,
        step: int,
    ) -> ObservedStream:
        """``stream`` (what ``model.stream(request)`` returned) under an observation."""
        return ObservedStream(self, stream, model, request, step)

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


@final
class ObservedStream(StreamWrapper):
    """``model.stream(request)`` with the request's observation around it.

    The observation is activated in ``__aenter__`` (before the model's own enter, so a
    provider's producer, in a task of its own or in the run's, and its HTTP request
    start under it) and deactivated when the stream closes, both in the run's task.
    What the observer raises is logged and ignored (see ``Observer``).

    Args:
        probe: the run's probe (its observer, and whether to log at DEBUG).
        inner: what ``model.stream(request)`` returned.
        model: the model asked.
        request: the request sent.
        step: the request's number in the run (for the log line).
    """

    __slots__ = ("first_at", "model", "obs", "probe", "request", "start", "step", "token")

    def __init__(
        self,
        probe: Probe,
        inner: AbstractAsyncContextManager[AsyncIterable[ev.AssistantEvent]],
        model: Model,
        request: ModelRequest,
        step: int,
    ) -> None:
        super().__init__(inner)
        self.probe = probe
        self.model = model
        self.request = request
        self.step = step
        self.obs: RequestObservation | None = None
        self.token: object = None
        self.start = 0.0
        self.first_at: float | None = None  # when the first event arrived

    def _open(self) -> AbstractAsyncContextManager[AsyncIterable[ev.AssistantEvent]]:
        observer = self.probe.observer
        if observer is not None:
            self.obs = _safely(observer.start_request, model=self.model, request=self.request)
            if self.obs is not None:
                self.token = _safely(self.obs.activate)
        self.start = trio.current_time()
        return super()._open()

    def _event(self, event: ev.AssistantEvent) -> None:
        if self.first_at is None:
            self.first_at = trio.current_time()
            if self.obs is not None:
                _safely(self.obs.first_chunk)

    def _end(self, error: BaseException | None) -> None:
        last = self.last
        # The reply's final message; a last event carrying anything else made the
        # stream malformed (the loop fails the reply): no final message then.
        final = (
            last.message if last is not None and type(last.message) is AssistantMessage else None
        )
        obs, self.obs = self.obs, None
        if obs is not None:
            _safely(obs.deactivate, self.token)
            _safely(obs.end, message=final, error=error)
        if self.probe.debug:
            now = trio.current_time()
            usage = None if final is None else final.usage
            logger.debug(
                "model request %d (%s): %s input_tokens=%s output_tokens=%s "
                "first_chunk=%s duration=%.3fs",
                self.step,
                self.request.options.model
                or getattr(self.model, "model", type(self.model).__name__),
                final.stop_reason
                if final is not None
                else _error_type(error)
                if error
                else "no reply",
                "-" if usage is None else usage.input_tokens,
                "-" if usage is None else usage.output_tokens,
                "-" if self.first_at is None else f"{self.first_at - self.start:.3f}s",
                now - self.start,
            )
