"""The observer ``trio-agent chat`` uses: spans on the console, or where ``OTEL_*`` say.

Built from the public ``trio_agent.telemetry.OpenTelemetry``; imported only when telemetry
is asked for (it needs ``opentelemetry-api``).
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from opentelemetry import trace

from ..telemetry import OpenTelemetry

__all__ = ["command_line_observer"]


def command_line_observer(
    console: bool, *, agent_name: str, out: TextIO | None = None
) -> OpenTelemetry | None:
    """The observer for a command-line session, or None for no telemetry.

    With ``console``, the spans are printed (as JSON, one object per span, when each
    ends) on ``out`` (default stderr) through the OpenTelemetry SDK, whose resource
    honours ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``. Without it, spans go
    to the global tracer provider when the application configured one — as
    ``opentelemetry-instrument trio-agent chat ...`` does from the ``OTEL_*``
    environment variables (``OTEL_TRACES_EXPORTER``, ``OTEL_EXPORTER_OTLP_ENDPOINT``...)
    — and nowhere otherwise. ``OTEL_SDK_DISABLED=true`` turns both off.

    Raises:
        ImportError: ``console`` asked for, and the OpenTelemetry SDK is not installed.
    """
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if console:
        try:
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
        except ImportError as exc:
            raise ImportError(
                "--otel-console needs the OpenTelemetry SDK: pip install opentelemetry-sdk"
            ) from exc
        provider = TracerProvider()
        provider.add_span_processor(
            SimpleSpanProcessor(ConsoleSpanExporter(out=out if out is not None else sys.stderr))
        )
        return OpenTelemetry(tracer_provider=provider, agent_name=agent_name)
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return None  # nobody configured a provider: spans would go nowhere
    return OpenTelemetry(agent_name=agent_name)
