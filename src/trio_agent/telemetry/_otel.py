"""The OpenTelemetry observer: GenAI-convention spans for runs, requests and tool calls.

Span tree of a run (names and ``gen_ai.*`` attributes after the GenAI semantic
conventions, which are still marked "development")::

    invoke_agent {agent}            INTERNAL  the whole run
      chat {model}                  CLIENT    one model request (the provider's HTTP
                                              request, if instrumented, nests here)
      execute_tool {tool}           INTERNAL  one tool call; whatever the tool does
                                              (a nested run, a subprocess span) nests here

Every call of a batch gets a span, from its preparation (lookup, argument checks,
``before_tool_call``) to its result — also a call refused there (``not_found``,
``invalid_arguments``, ``blocked``) or stopped by an abort. Calls that never reach a batch
(those of a truncated, failed or interrupted reply, answered with a skipped result) get
none: nothing was executed.

Calls of a parallel batch run in tasks of their own; each activates its own span there,
so siblings never see each other's span. A cancelled span gets ``error.type`` set
explicitly (OpenTelemetry records ``trio.Cancelled`` as nothing): ``cancelled`` when a
cancel propagated out of it, the tool outcome (``aborted``, ``skipped``, ``timed_out``...)
for a call (the exception's type for a tool that raised), the end reason (``aborted``,
``model_error``) for a run.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, final

import trio
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from .._core import Image, Text, dumps

if TYPE_CHECKING:
    from .._core import (
        AssistantMessage,
        Message,
        Model,
        ModelRequest,
        ToolCall,
        ToolResultMessage,
        Usage,
    )
    from .._core import events as ev

__all__ = ["OpenTelemetry"]

_TRACER_NAME = "trio_agent"


@final
class OpenTelemetry:
    """An observer (``LoopConfig.observer``) that turns a run into OpenTelemetry spans.

    Args:
        tracer_provider: where the spans go; None uses the global provider (whatever
            the application, or ``opentelemetry-instrument`` from the ``OTEL_*``
            environment variables, set up — and follows it if it is set later).
        agent_name: ``gen_ai.agent.name``, and the run span's name ``invoke_agent
            {agent_name}``.
        capture_content: also record what was said: the system prompt and messages of
            each request and its reply (``gen_ai.system_instructions``,
            ``gen_ai.input.messages``, ``gen_ai.output.messages``, as our JSON
            transcript format), each call's arguments and result text
            (``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``) and the run's
            prompts. Off by default: contents may hold personal data or secrets.

    Its methods are synchronous, never block and never checkpoint; it holds no state
    per run, so one instance may serve any number of runs at once.

    Attributes:
        tracer: the OpenTelemetry tracer the spans come from.
        agent_name: as given.
        capture_content: as given.
    """

    __slots__ = ("agent_name", "capture_content", "tracer")

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        agent_name: str = "trio-agent",
        capture_content: bool = False,
    ) -> None:
        self.tracer = trace.get_tracer(_TRACER_NAME, tracer_provider=tracer_provider)
        self.agent_name = agent_name
        self.capture_content = capture_content

    def __repr__(self) -> str:
        return (
            f"OpenTelemetry(agent_name={self.agent_name!r}, "
            f"capture_content={self.capture_content!r})"
        )

    # --- the Observer protocol ---------------------------------------------------------

    def start_run(self, *, model: Model, prompts: tuple[Message, ...]) -> _RunSpan:
        """Start the run's ``invoke_agent`` span (the ``Observer`` protocol); it ends when
        the run ends, with the end reason, steps and token usage."""
        span = self.tracer.start_span(f"invoke_agent {self.agent_name}", kind=SpanKind.INTERNAL)
        if span.is_recording():
            span.set_attribute("gen_ai.operation.name", "invoke_agent")
            span.set_attribute("gen_ai.agent.name", self.agent_name)
            _model_attributes(span, model, None)
            if self.capture_content and prompts:
                span.set_attribute("gen_ai.input.messages", dumps(prompts))
        return _RunSpan(span)

    def start_request(self, *, model: Model, request: ModelRequest) -> _RequestSpan:
        """Start a ``chat`` span (kind CLIENT) for one model request, a child of the run's
        span; it ends when the stream closes, with the reply's stop reason and usage."""
        name = request.options.model or _model_name(model)
        span = self.tracer.start_span(f"chat {name}" if name else "chat", kind=SpanKind.CLIENT)
        if span.is_recording():
            span.set_attribute("gen_ai.operation.name", "chat")
            _model_attributes(span, model, request.options.model)
            options = request.options
            if options.max_tokens is not None:
                span.set_attribute("gen_ai.request.max_tokens", options.max_tokens)
            if options.temperature is not None:
                span.set_attribute("gen_ai.request.temperature", options.temperature)
            address = getattr(model, "server_address", None)
            if isinstance(address, str):
                span.set_attribute("server.address", address)
                port = getattr(model, "server_port", None)
                if isinstance(port, int):
                    span.set_attribute("server.port", port)
            if self.capture_content:
                if request.system_prompt:
                    span.set_attribute("gen_ai.system_instructions", request.system_prompt)
                span.set_attribute("gen_ai.input.messages", dumps(request.messages))
        return _RequestSpan(span, self.capture_content)

    def start_tool_call(self, *, call: ToolCall) -> _CallSpan:
        """Start an ``execute_tool`` span for one call, a child of the run's span; it is
        current in the call's task while the tool runs, and ends with the call's outcome."""
        span = self.tracer.start_span(f"execute_tool {call.name}", kind=SpanKind.INTERNAL)
        if span.is_recording():
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", call.name)
            span.set_attribute("gen_ai.tool.call.id", call.id)
            span.set_attribute("gen_ai.tool.type", "function")
            if self.capture_content:
                span.set_attribute(
                    "gen_ai.tool.call.arguments",
                    json.dumps(call.arguments, ensure_ascii=False, default=repr),
                )
        return _CallSpan(span, self.capture_content)


def _model_name(model: Model) -> str | None:
    name = getattr(model, "model", None)
    return name if isinstance(name, str) and name else None


def _model_attributes(span: trace.Span, model: Model, requested: str | None) -> None:
    provider = getattr(model, "provider", None)
    if isinstance(provider, str) and provider:
        span.set_attribute("gen_ai.provider.name", provider)
    name = requested or _model_name(model)
    if name:
        span.set_attribute("gen_ai.request.model", name)


def _usage_attributes(span: trace.Span, usage: Usage) -> None:
    span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
    span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cache_read_tokens)
    span.set_attribute("gen_ai.usage.cache_creation.input_tokens", usage.cache_write_tokens)


def _error_type(error: BaseException) -> str:
    if isinstance(error, trio.Cancelled):
        return "cancelled"
    cause = error.__cause__ if error.__cause__ is not None else error
    return type(cause).__qualname__


def _fail(span: trace.Span, error_type: str, description: str | None = None) -> None:
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, description))


class _Span:
    __slots__ = ("span",)

    def __init__(self, span: trace.Span) -> None:
        self.span = span

    def activate(self) -> object:
        return otel_context.attach(trace.set_span_in_context(self.span))

    def deactivate(self, token: object) -> None:
        otel_context.detach(token)  # type: ignore[arg-type]


@final
class _RunSpan(_Span):
    __slots__ = ()

    def end(
        self,
        *,
        reason: ev.EndReason | None,
        steps: int,
        usage: Usage,
        error: BaseException | None,
    ) -> None:
        span = self.span
        if span.is_recording():
            if reason is not None:
                span.set_attribute("trio_agent.end_reason", reason)
            span.set_attribute("trio_agent.steps", steps)
            _usage_attributes(span, usage)
            if error is not None:
                _fail(span, _error_type(error), f"{type(error).__name__}: {error}")
            elif reason == "aborted":
                _fail(span, "aborted", "the run was aborted")
            elif reason == "error":
                _fail(span, "model_error", "the model's reply failed")
        span.end()


@final
class _RequestSpan(_Span):
    __slots__ = ("capture", "started")

    def __init__(self, span: trace.Span, capture: bool) -> None:
        super().__init__(span)
        self.capture = capture
        self.started = trio.current_time()

    def first_chunk(self) -> None:
        if self.span.is_recording():
            self.span.set_attribute(
                "trio_agent.time_to_first_chunk", trio.current_time() - self.started
            )

    def end(self, *, message: AssistantMessage | None, error: BaseException | None) -> None:
        span = self.span
        if span.is_recording():
            if message is not None:
                span.set_attribute("gen_ai.response.finish_reasons", (message.stop_reason,))
                if message.model:
                    span.set_attribute("gen_ai.response.model", message.model)
                _usage_attributes(span, message.usage)
                if self.capture:
                    span.set_attribute("gen_ai.output.messages", dumps((message,)))
            if error is not None:
                _fail(span, _error_type(error), f"{type(error).__name__}: {error}")
            elif message is None:
                _fail(span, "no_reply", "the stream ended without a final reply")
            elif message.stop_reason == "error":
                _fail(span, "model_error", message.error_message)
            elif message.stop_reason == "aborted":
                _fail(span, "aborted", message.error_message)
        span.end()


@final
class _CallSpan(_Span):
    __slots__ = ("capture",)

    def __init__(self, span: trace.Span, capture: bool) -> None:
        super().__init__(span)
        self.capture = capture

    def end(
        self,
        *,
        result: ToolResultMessage,
        outcome: ev.ToolOutcome,
        exception: Exception | None,
    ) -> None:
        span = self.span
        if span.is_recording():
            span.set_attribute("trio_agent.tool.outcome", outcome)
            if self.capture:
                span.set_attribute("gen_ai.tool.call.result", _result_text(result))
            if outcome != "ok":
                # A tool that raised: the exception's type; otherwise the outcome
                # (timed_out, aborted, skipped, not_found...; "error" for an error result).
                kind = type(exception).__qualname__ if exception is not None else outcome
                _fail(span, kind, _result_text(result) if self.capture else None)
        span.end()


def _result_text(result: ToolResultMessage) -> str:
    return "".join(
        b.text if type(b) is Text else f"[image {b.mime_type}]" if type(b) is Image else ""
        for b in result.content
    )


if TYPE_CHECKING:
    from .._core import Observer

    def _is_observer(observer: OpenTelemetry) -> Observer:
        return observer  # the type checker proves the protocol is implemented
