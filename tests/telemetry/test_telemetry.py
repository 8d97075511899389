"""Spans, log lines and usage totals of a run (the SDK's in-memory exporter reads spans)."""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
import trio
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.kit.loop import call, make_tool, prompt, reply, sleeper, tool_use
from trio_agent import (
    Context,
    LoopConfig,
    ToolCall,
    ToolContext,
    ToolOutput,
    Usage,
    check_transcript,
    open_agent,
    open_agent_loop,
    run_agent_loop,
)
from trio_agent.providers import OpenAIChat
from trio_agent.telemetry import OpenTelemetry
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator, Mapping


SECRET = "s3cr3t-argument"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.clear()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def used(input_tokens: int, output_tokens: int, cache_read: int = 0) -> Usage:
    return Usage(
        input_tokens=input_tokens, output_tokens=output_tokens, cache_read_tokens=cache_read
    )


# The model's name: replies carry it, as the HTTP providers' do.
MODEL = "m-1"


class NamedModel(ScriptedModel):
    """A scripted model that names itself as the HTTP providers do."""

    model = MODEL
    provider = "scripted"
    server_address = "models.example"
    server_port = 8443


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def parent_id(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def attrs_of(span: ReadableSpan) -> Mapping[str, Any]:
    assert span.attributes is not None
    return span.attributes


def worker(name: str, seconds: float, tracer: trace.Tracer) -> Any:
    """A tool that opens a span of its own around its work (it must nest in the call's)."""

    async def execute(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
        with tracer.start_as_current_span(f"work {call.id}"):
            await trio.sleep(seconds)
        return f"{call.id} {SECRET}"

    return make_tool(name, execute)


async def test_span_tree_of_a_two_batch_parallel_run(
    provider: TracerProvider, exporter: InMemorySpanExporter, autojump_clock: Any
) -> None:
    tracer = provider.get_tracer("test")
    model = NamedModel(
        [
            tool_use(call("a", "slow"), call("b", "fast"), usage=used(100, 10, 5), model=MODEL),
            tool_use(call("c", "slow"), call("d", "fast"), usage=used(200, 20, 7), model=MODEL),
            reply(usage=used(300, 30), model=MODEL),
        ]
    )
    tools = [worker("slow", 2.0, tracer), worker("fast", 1.0, tracer)]
    config = LoopConfig(observer=OpenTelemetry(tracer_provider=provider, agent_name="helper"))
    with trio.fail_after(60):
        result = await run_agent_loop(prompt(), Context(tools=tools), model, config)
    assert result.reason == "stop"
    spans = exporter.get_finished_spans()

    (run,) = by_name(spans, "invoke_agent helper")
    assert run.parent is None
    assert attrs_of(run)["gen_ai.operation.name"] == "invoke_agent"
    assert attrs_of(run)["gen_ai.agent.name"] == "helper"
    assert attrs_of(run)["gen_ai.usage.input_tokens"] == 600
    assert attrs_of(run)["gen_ai.usage.output_tokens"] == 60
    assert attrs_of(run)["gen_ai.usage.cache_read.input_tokens"] == 12
    assert attrs_of(run)["trio_agent.end_reason"] == "stop"
    assert run.status.status_code is StatusCode.UNSET

    chats = by_name(spans, "chat m-1")
    assert len(chats) == 3
    for chat, usage in zip(chats, (used(100, 10, 5), used(200, 20, 7), used(300, 30)), strict=True):
        a = attrs_of(chat)
        assert chat.kind is SpanKind.CLIENT
        assert parent_id(chat) == span_id(run)
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.provider.name"] == "scripted"
        assert a["gen_ai.request.model"] == "m-1"
        assert a["server.address"] == "models.example"
        assert a["server.port"] == 8443
        assert a["gen_ai.usage.input_tokens"] == usage.input_tokens
        assert a["gen_ai.usage.output_tokens"] == usage.output_tokens
        assert "trio_agent.time_to_first_chunk" in a
    assert [attrs_of(c)["gen_ai.response.finish_reasons"] for c in chats] == [
        ("tool_use",),
        ("tool_use",),
        ("stop",),
    ]

    tools_spans = {
        attrs_of(s)["gen_ai.tool.call.id"]: s for s in spans if s.name.startswith("execute_tool")
    }
    assert sorted(tools_spans) == ["a", "b", "c", "d"]
    for call_id, tool_span in tools_spans.items():
        assert parent_id(tool_span) == span_id(run)
        assert attrs_of(tool_span)["gen_ai.tool.name"] == ("slow" if call_id in "ac" else "fast")
        assert attrs_of(tool_span)["trio_agent.tool.outcome"] == "ok"
        assert tool_span.status.status_code is StatusCode.UNSET
        # What the tool did nests under its own call, never under a sibling's.
        (work,) = by_name(spans, f"work {call_id}")
        assert parent_id(work) == span_id(tool_span)
    # The calls of one batch overlap in time (they ran in parallel): the slow call's
    # span holds the fast one's...
    a_span, b_span = tools_spans["a"], tools_spans["b"]
    assert a_span.start_time is not None
    assert b_span.start_time is not None
    assert a_span.end_time is not None
    assert b_span.end_time is not None
    assert a_span.start_time <= b_span.start_time < b_span.end_time <= a_span.end_time
    # ...and the second batch started after the second request.
    assert chats[1].end_time is not None
    assert tools_spans["c"].start_time is not None
    assert chats[1].end_time <= tools_spans["c"].start_time


async def test_aborted_run_and_its_call_record_error_type(
    provider: TracerProvider, exporter: InMemorySpanExporter, autojump_clock: Any
) -> None:
    model = ScriptedModel([tool_use(call("a", "nap"), model=MODEL)])
    config = LoopConfig(observer=OpenTelemetry(tracer_provider=provider))
    with trio.fail_after(60):
        async with open_agent_loop(
            prompt(), Context(tools=[sleeper("nap", 100.0)]), model, config
        ) as run:
            async for event in run.events:
                if event.type == "tool_execution_start":
                    await trio.sleep(1)
                    run.abort("user pressed stop")
    assert run.result is not None
    assert run.result.reason == "aborted"
    spans = exporter.get_finished_spans()
    (run_span,) = by_name(spans, "invoke_agent trio-agent")
    assert run_span.status.status_code is StatusCode.ERROR
    assert attrs_of(run_span)["error.type"] == "aborted"
    (tool_span,) = by_name(spans, "execute_tool nap")
    assert tool_span.status.status_code is StatusCode.ERROR
    assert attrs_of(tool_span)["error.type"] == "aborted"
    assert attrs_of(tool_span)["trio_agent.tool.outcome"] == "aborted"
    assert parent_id(tool_span) == span_id(run_span)


async def test_outer_cancel_is_recorded_as_cancelled(
    provider: TracerProvider, exporter: InMemorySpanExporter, autojump_clock: Any
) -> None:
    model = ScriptedModel([tool_use(call("a", "nap"), model=MODEL)])
    config = LoopConfig(observer=OpenTelemetry(tracer_provider=provider))
    with trio.move_on_after(5) as scope:
        await run_agent_loop(prompt(), Context(tools=[sleeper("nap", 100.0)]), model, config)
    assert scope.cancelled_caught
    spans = exporter.get_finished_spans()
    (run_span,) = by_name(spans, "invoke_agent trio-agent")
    assert run_span.status.status_code is StatusCode.ERROR
    assert attrs_of(run_span)["error.type"] == "cancelled"
    (tool_span,) = by_name(spans, "execute_tool nap")
    assert attrs_of(tool_span)["error.type"] == "aborted"


async def test_cancelled_request_and_failed_stream(
    provider: TracerProvider, exporter: InMemorySpanExporter, autojump_clock: Any
) -> None:
    model = ScriptedModel([reply("x" * 50, model=MODEL)], chunk_size=5)
    pause = model.pause_at(0, 3)
    config = LoopConfig(observer=OpenTelemetry(tracer_provider=provider))
    async with open_agent_loop(prompt(), Context(), model, config) as run:
        async with trio.open_nursery() as nursery:

            async def stop() -> None:
                await pause.reached.wait()
                run.abort()

            nursery.start_soon(stop)
            async for _ in run.events:
                pass
    (chat,) = by_name(exporter.get_finished_spans(), "chat")
    assert chat.status.status_code is StatusCode.ERROR
    assert attrs_of(chat)["error.type"] == "cancelled"

    exporter.clear()
    failing = ScriptedModel([reply(model=MODEL)])
    failing.fail_at(0, 1, OSError("connection reset"))
    result = await run_agent_loop(prompt(), Context(), failing, config)
    assert result.reason == "error"
    spans = exporter.get_finished_spans()
    (chat,) = by_name(spans, "chat")
    assert attrs_of(chat)["error.type"] == "OSError"
    (run_span,) = by_name(spans, "invoke_agent trio-agent")
    assert attrs_of(run_span)["error.type"] == "model_error"


async def test_timed_out_tool(
    provider: TracerProvider, exporter: InMemorySpanExporter, autojump_clock: Any
) -> None:
    model = ScriptedModel([tool_use(call("a", "nap"), model=MODEL), reply(model=MODEL)])
    config = LoopConfig(observer=OpenTelemetry(tracer_provider=provider), tool_timeout=3)
    result = await run_agent_loop(prompt(), Context(tools=[sleeper("nap", 100.0)]), model, config)
    assert result.reason == "stop"
    (tool_span,) = by_name(exporter.get_finished_spans(), "execute_tool nap")
    assert tool_span.status.status_code is StatusCode.ERROR
    assert attrs_of(tool_span)["error.type"] == "timed_out"
    assert tool_span.end_time is not None
    assert tool_span.start_time is not None


async def test_calls_stopped_before_running_get_spans(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    model = ScriptedModel(
        [tool_use(call("a", "missing"), call("b", "probe"), model=MODEL), reply(model=MODEL)]
    )
    config = LoopConfig(observer=OpenTelemetry(tracer_provider=provider))
    await run_agent_loop(prompt(), Context(tools=[make_tool("probe")]), model, config)
    spans = exporter.get_finished_spans()
    (missing,) = by_name(spans, "execute_tool missing")
    assert attrs_of(missing)["error.type"] == "not_found"
    (probe,) = by_name(spans, "execute_tool probe")
    assert probe.status.status_code is StatusCode.UNSET


CONTENT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
)


@pytest.mark.parametrize("capture", [False, True])
async def test_contents_only_on_opt_in(
    provider: TracerProvider, exporter: InMemorySpanExporter, capture: bool
) -> None:
    model = ScriptedModel(
        [
            tool_use(call("a", "probe", secret=SECRET), model=MODEL),
            reply(f"said {SECRET}", model=MODEL),
        ]
    )
    config = LoopConfig(observer=OpenTelemetry(tracer_provider=provider, capture_content=capture))
    context = Context(system_prompt=f"system {SECRET}", tools=[make_tool("probe")])
    await run_agent_loop(prompt(f"user {SECRET}"), context, model, config)
    spans = exporter.get_finished_spans()
    found = {k for s in spans for k in attrs_of(s) if k in CONTENT_KEYS}
    mentions = [s.name for s in spans for v in attrs_of(s).values() if SECRET in str(v)]
    if capture:
        assert found == set(CONTENT_KEYS)
        (tool_span,) = by_name(spans, "execute_tool probe")
        assert SECRET in str(attrs_of(tool_span)["gen_ai.tool.call.arguments"])
        assert attrs_of(tool_span)["gen_ai.tool.call.result"] == "probe ok"
        chats = by_name(spans, "chat")
        assert f"said {SECRET}" in str(attrs_of(chats[1])["gen_ai.output.messages"])
        assert f"user {SECRET}" in str(attrs_of(chats[0])["gen_ai.input.messages"])
    else:
        assert found == set()
        assert mentions == []


async def test_agent_runs_each_get_a_span_and_usage_adds_up(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    model = ScriptedModel(
        [
            tool_use(call("a", "probe"), usage=used(10, 1), model=MODEL),
            reply(usage=used(20, 2), model=MODEL),
            reply(usage=used(30, 3, 4), model=MODEL),
        ]
    )
    config = LoopConfig(observer=OpenTelemetry(tracer_provider=provider, agent_name="bot"))
    async with open_agent(model, tools=[make_tool("probe")], config=config) as agent:
        first = await agent.prompt("one")
        assert agent.usage == used(30, 3)
        second = await agent.prompt("two")
    assert first.usage == used(30, 3)
    assert second.usage == used(30, 3, 4)
    assert agent.usage == used(60, 6, 4)
    spans = exporter.get_finished_spans()
    runs = by_name(spans, "invoke_agent bot")
    assert len(runs) == 2
    assert [attrs_of(r)["gen_ai.usage.input_tokens"] for r in runs] == [30, 30]
    (tool_span,) = by_name(spans, "execute_tool probe")
    assert parent_id(tool_span) == span_id(runs[0])
    assert [parent_id(c) for c in by_name(spans, "chat")] == [
        span_id(runs[0]),
        span_id(runs[0]),
        span_id(runs[1]),
    ]


async def test_usage_totals_without_an_observer() -> None:
    model = ScriptedModel(
        [
            tool_use(call("a", "probe"), usage=used(5, 1, 2), model=MODEL),
            reply(usage=used(7, 3), model=MODEL),
        ]
    )
    result = await run_agent_loop(prompt(), Context(tools=[make_tool("probe")]), model)
    assert result.usage == Usage(input_tokens=12, output_tokens=4, cache_read_tokens=2)
    assert used(1, 2, 3) + used(4, 5, 6) == used(5, 7, 9)
    assert used(1, 0, 3).prompt_tokens == 4


def looping_model(n: int, usage: Usage) -> ScriptedModel:
    return ScriptedModel(
        [tool_use(call(f"c{i}", "probe"), usage=usage, model=MODEL) for i in range(n)]
    )


@pytest.mark.parametrize(
    ("limits", "steps"),
    [
        # 10 output tokens a reply: after 3 replies 30 >= 30, no 4th request.
        ({"max_output_tokens": 30}, 3),
        ({"max_output_tokens": 31}, 4),
        # 100 prompt tokens a reply (80 + 20 cached): after 2 replies 200 + 100 > 250.
        ({"max_input_tokens": 250}, 2),
        ({"max_input_tokens": 300}, 3),
    ],
)
async def test_usage_limits_end_the_run_before_the_next_request(
    limits: dict[str, int], steps: int
) -> None:
    model = looping_model(10, used(80, 10, 20))
    config = LoopConfig(**limits)
    result = await run_agent_loop(prompt(), Context(tools=[make_tool("probe")]), model, config)
    assert (result.reason, result.steps, len(model.requests)) == ("usage_limit", steps, steps)
    check_transcript(result.transcript)  # every call has its result
    assert result.messages[-1].role == "tool_result"


async def test_no_limit_means_no_usage_limit_end() -> None:
    model = looping_model(3, used(10**6, 10**6))
    model.add(reply(model=MODEL))
    result = await run_agent_loop(prompt(), Context(tools=[make_tool("probe")]), model)
    assert (result.reason, result.steps) == ("stop", 4)


def test_the_budget_rule_alone() -> None:
    # The end rule the runner asks before each request after the first (sans-IO).
    from trio_agent._core._turn import over_budget

    so_far = used(150, 20, 50)  # 200 prompt tokens, 20 output
    assert not over_budget(so_far, 100, max_input_tokens=None, max_output_tokens=None)
    assert not over_budget(so_far, 100, max_input_tokens=300, max_output_tokens=None)
    assert over_budget(so_far, 101, max_input_tokens=300, max_output_tokens=None)
    assert not over_budget(so_far, 0, max_input_tokens=None, max_output_tokens=21)
    assert over_budget(so_far, 0, max_input_tokens=None, max_output_tokens=20)
    assert over_budget(so_far, 0, max_input_tokens=10**6, max_output_tokens=20)


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="max_input_tokens"):
        LoopConfig(max_input_tokens=0)
    with pytest.raises(ValueError, match="max_output_tokens"):
        LoopConfig(max_output_tokens=-1)


async def test_log_lines(caplog: pytest.LogCaptureFixture, autojump_clock: Any) -> None:
    model = ScriptedModel(
        [
            tool_use(call("a", "probe", key=SECRET), call("b", "nap"), model=MODEL),
            reply(f"said {SECRET}", model=MODEL),
        ]
    )
    tools = [make_tool("probe"), sleeper("nap", 100.0)]
    context = Context(system_prompt=SECRET, tools=tools)
    with caplog.at_level(logging.DEBUG, logger="trio_agent"):
        await run_agent_loop(prompt(SECRET), context, model, LoopConfig(tool_timeout=2))
    lines = [r.getMessage() for r in caplog.records if r.name == "trio_agent"]
    assert len(lines) == 5, lines
    assert lines[0].startswith("tool call probe (a): ok in ") or lines[1].startswith(
        "tool call probe (a): ok in "
    )
    requests = [line for line in lines if line.startswith("model request")]
    assert len(requests) == 2
    # The first chunk came at virtual time 0: still reported.
    assert all("first_chunk=0.000s" in line for line in requests), requests
    assert "tool_use" in requests[0]
    assert "stop" in requests[1]
    assert any(line.startswith("tool call nap (b): timed_out in 2.000s") for line in lines)
    assert lines[-1].startswith("run ended: reason=stop steps=2")
    assert not any(SECRET in line for line in lines)
    levels = {r.getMessage().split(":")[0].split(" (")[0]: r.levelno for r in caplog.records}
    assert levels["run ended"] == logging.INFO
    assert levels["tool call probe"] == logging.DEBUG


async def test_info_logging_gives_only_the_run_line(caplog: pytest.LogCaptureFixture) -> None:
    model = ScriptedModel([tool_use(call("a", "probe"), model=MODEL), reply(model=MODEL)])
    with caplog.at_level(logging.INFO, logger="trio_agent"):
        await run_agent_loop(prompt(), Context(tools=[make_tool("probe")]), model)
    lines = [r.getMessage() for r in caplog.records if r.name == "trio_agent"]
    assert len(lines) == 1, lines
    assert lines[0].startswith("run ended: reason=stop steps=2")


def test_logger_is_silent_by_default() -> None:
    logger = logging.getLogger("trio_agent")
    assert any(isinstance(h, logging.NullHandler) for h in logger.handlers)


def test_http_models_name_their_server() -> None:
    model = OpenAIChat("gpt-x", base_url="https://user:key@api.example.com:8443/v1", api_key="k")
    assert (model.server_address, model.server_port) == ("api.example.com", 8443)
    plain = OpenAIChat("gpt-x", base_url="http://127.0.0.1/v1", api_key="k")
    assert (plain.server_address, plain.server_port) == ("127.0.0.1", 80)


def test_importing_trio_agent_does_not_import_opentelemetry() -> None:
    code = (
        "import sys, trio_agent, trio_agent.providers, trio_agent.testing\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')], 'imported'\n"
        "import trio_agent.telemetry\n"
        "assert 'opentelemetry.trace' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_otel_console_without_the_sdk_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from trio_agent.cli._chat_options import make_observer

    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)
    with pytest.raises(ImportError, match="pip install opentelemetry-sdk"):
        make_observer(True)


def test_command_line_observer_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from trio_agent.telemetry._setup import command_line_observer

    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    # No provider configured (the API's proxy): no spans, no observer.
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert command_line_observer(False, agent_name="x") is None
    assert command_line_observer(True, agent_name="x") is not None
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert command_line_observer(True, agent_name="x") is None


async def test_a_tool_that_raises_records_the_exception_type(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async def explode(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> str:
        raise KeyError("missing")

    async def error_result(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> Any:
        return ToolOutput(content="no such row", is_error=True)

    model = ScriptedModel(
        [tool_use(call("a", "explode"), call("b", "soft"), model=MODEL), reply(model=MODEL)]
    )
    config = LoopConfig(observer=OpenTelemetry(tracer_provider=provider))
    tools = [make_tool("explode", explode), make_tool("soft", error_result)]
    await run_agent_loop(prompt(), Context(tools=tools), model, config)
    spans = exporter.get_finished_spans()
    (exploded,) = by_name(spans, "execute_tool explode")
    assert attrs_of(exploded)["error.type"] == "KeyError"
    (soft,) = by_name(spans, "execute_tool soft")
    assert attrs_of(soft)["error.type"] == "error"
    assert soft.status.status_code is StatusCode.ERROR


class Broken:
    """An observer whose every method raises."""

    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(f"observer bug in {name}")

        return fail


class BrokenObservations:
    """An observer whose observations raise in every method."""

    def start_run(self, **kwargs: Any) -> Broken:
        return Broken()

    def start_request(self, **kwargs: Any) -> Broken:
        return Broken()

    def start_tool_call(self, **kwargs: Any) -> Broken:
        return Broken()


@pytest.mark.parametrize("observer", [Broken(), BrokenObservations()])
async def test_a_failing_observer_changes_nothing(
    observer: Any, caplog: pytest.LogCaptureFixture, autojump_clock: Any
) -> None:
    model = ScriptedModel(
        [tool_use(call("a", "probe"), call("b", "nap"), model=MODEL), reply(model=MODEL)]
    )
    config = LoopConfig(observer=observer, tool_timeout=1)
    tools = [make_tool("probe"), sleeper("nap", 100.0)]
    with caplog.at_level(logging.WARNING, logger="trio_agent"):
        result = await run_agent_loop(prompt(), Context(tools=tools), model, config)
    assert (result.reason, result.steps) == ("stop", 2)
    check_transcript(result.transcript)
    warnings = [r for r in caplog.records if r.getMessage().startswith("the observer failed")]
    assert warnings
    assert all("observer bug" in str(r.exc_info[1]) for r in warnings if r.exc_info)


class TracingModel:
    """A model whose stream does traced work of its own when it opens (as an instrumented
    HTTP client would)."""

    def __init__(self, inner: ScriptedModel, tracer: trace.Tracer) -> None:
        self.inner = inner
        self.tracer = tracer

    @contextlib.asynccontextmanager
    async def stream(self, request: Any) -> AsyncIterator[Any]:
        with self.tracer.start_as_current_span("provider request"):
            await trio.lowlevel.checkpoint()
        async with self.inner.stream(request) as events:
            yield events


async def test_sequential_batch_and_provider_spans_nest(
    provider: TracerProvider, exporter: InMemorySpanExporter, autojump_clock: Any
) -> None:
    tracer = provider.get_tracer("test")
    inner = ScriptedModel(
        [tool_use(call("a", "slow"), call("b", "fast"), model=MODEL), reply(model=MODEL)]
    )
    model = TracingModel(inner, tracer)
    tools = [worker("slow", 2.0, tracer), worker("fast", 1.0, tracer)]
    config = LoopConfig(
        observer=OpenTelemetry(tracer_provider=provider), tool_execution="sequential"
    )
    result = await run_agent_loop(prompt(), Context(tools=tools), model, config)
    assert result.reason == "stop"
    spans = exporter.get_finished_spans()
    chats = by_name(spans, "chat")
    provider_spans = by_name(spans, "provider request")
    assert [parent_id(p) for p in provider_spans] == [span_id(c) for c in chats]
    a, b = by_name(spans, "execute_tool slow")[0], by_name(spans, "execute_tool fast")[0]
    assert parent_id(by_name(spans, "work a")[0]) == span_id(a)
    assert parent_id(by_name(spans, "work b")[0]) == span_id(b)
    assert a.end_time is not None
    assert b.start_time is not None
    assert a.end_time <= b.start_time  # one after the other
    (run,) = by_name(spans, "invoke_agent trio-agent")
    assert {parent_id(s) for s in (*chats, a, b)} == {span_id(run)}
