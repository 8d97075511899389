"""A model request under its observation: the observer's stream wrapper.

The loop wraps ``model.stream(request)`` in an :class:`ObservedStream` when the run is
observed (an observer, or the ``trio_agent`` logger enabled for DEBUG; see
``_core._observer``): it starts the request's observation and activates it before the
model's own enter, reports the first event, and ends the observation exactly once when
the stream closes, with the reply's final message — the stream's last event's — if one
arrived. At DEBUG it logs one line per request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

import trio

from .._core._messages import AssistantMessage
from .._core._observer import _error_type, _safely, logger
from ._streams import StreamWrapper

if TYPE_CHECKING:
    from collections.abc import AsyncIterable
    from contextlib import AbstractAsyncContextManager

    from .._core import _events as ev
    from .._core._model import Model, ModelRequest
    from .._core._observer import Probe, RequestObservation

__all__ = ["ObservedStream"]


@final
class ObservedStream(StreamWrapper):
    """``model.stream(request)`` with the request's observation around it.

    The observation is activated in ``__aenter__`` (before the model's own enter, so a
    provider's producer task and its HTTP request start under it) and deactivated when
    the stream closes, both in the run's task. What the observer raises is logged and
    ignored (see ``Observer``).

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
