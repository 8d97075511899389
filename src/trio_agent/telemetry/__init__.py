"""OpenTelemetry spans for runs (``pip install 'trio-agent[otel]'``).

``LoopConfig(observer=OpenTelemetry())`` (or ``Agent(config=...)``) gives each run an
``invoke_agent`` span, each model request a ``chat`` span and each tool call an
``execute_tool`` span, named and attributed after the GenAI semantic conventions. Only
``opentelemetry-api`` is needed: spans go wherever the application's tracer provider
sends them (none installed: they cost almost nothing). The implementation lives in
``_otel``; nothing in ``trio_agent`` imports this package.
"""

try:
    import opentelemetry.trace as _trace  # noqa: F401 - a clear message when it is missing
except ModuleNotFoundError as _exc:  # pragma: no cover - depends on the environment
    if not (_exc.name or "").startswith("opentelemetry"):
        raise
    raise ImportError(
        "trio_agent.telemetry needs opentelemetry-api: pip install 'trio-agent[otel]'"
    ) from _exc

from ._otel import OpenTelemetry as OpenTelemetry

__all__ = ["OpenTelemetry"]
