"""W1 with telemetry on: what the OpenTelemetry observer costs per turn.

The same script as W1 "no consumer" (``trio_agent._bench.bench_turns``), run with
``LoopConfig(observer=OpenTelemetry(...))``, against the same run without an observer,
interleaved in the same process. Two providers:

- **API only**: ``trace.NoOpTracerProvider()`` — what a library user pays when the
  application installed ``opentelemetry-api`` but no SDK (every span is non-recording).
- **SDK, in-memory**: the SDK's ``TracerProvider`` with a ``SimpleSpanProcessor`` into an
  ``InMemorySpanExporter`` (cleared before each run, outside the timed region) — the
  recording cost without any I/O.

Per turn the run makes one ``chat`` and one ``execute_tool`` span (plus one
``invoke_agent`` span per run). OpenTelemetry is imported when a case first runs, not at
import: this module is the last of the suite's, so no earlier row's garbage collections
walk its modules.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

import trio

from trio_agent import Context, LoopConfig, UserMessage, run_agent_loop
from trio_agent._bench._harness import Case, Stopwatch, Timing
from trio_agent._bench.bench_turns import NOOP, ours_plain, w1_case
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trio_agent import AssistantEvent


async def _run(replies: Sequence[list[AssistantEvent]], observer: Any) -> Timing:
    turns = len(replies) - 1
    model = ScriptedModel(replies, keep_requests=False)
    config = LoopConfig(max_steps=len(replies), observer=observer)
    with Stopwatch() as watch:
        result = await run_agent_loop(
            [UserMessage.text("go")], Context(tools=(NOOP,)), model, config
        )
    assert result.reason == "stop", result.reason
    assert result.steps == turns + 1
    return watch.timing


def api_only(turns: int, replies: Sequence[list[AssistantEvent]]) -> Timing:
    from opentelemetry import trace

    from trio_agent.telemetry import OpenTelemetry

    observer = OpenTelemetry(tracer_provider=trace.NoOpTracerProvider())
    return trio.run(_run, replies, observer)


_SDK: Any = None


def sdk_in_memory(turns: int, replies: Sequence[list[AssistantEvent]]) -> Timing:
    global _SDK
    from trio_agent.telemetry import OpenTelemetry

    if _SDK is None:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        _SDK = exporter, provider
    exporter, provider = _SDK
    exporter.clear()
    timing = trio.run(_run, replies, OpenTelemetry(tracer_provider=provider))
    spans = len(exporter.get_finished_spans())
    assert spans == 2 * turns + 2, spans  # per turn chat + execute_tool; last chat; run
    exporter.clear()
    return timing


def _case(name: str, ours: Any) -> Case:
    return w1_case(name, ours, ours_plain, module=__name__)


def _sdk_installed() -> bool:
    try:
        return importlib.util.find_spec("opentelemetry.sdk") is not None
    except ModuleNotFoundError:  # not even the `opentelemetry` namespace
        return False


# Without OpenTelemetry installed (a wheel without the `otel` extra) there are no rows.
CASES = (
    (
        _case("telemetry on, API only, vs off", api_only),
        _case("telemetry on, SDK in-memory, vs off", sdk_in_memory),
    )
    if _sdk_installed()
    else ()
)
