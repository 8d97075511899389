"""Cost in USD from the genai-prices table: ``Usage.cost``, ``AgentRunResult.cost``, the
``max_cost`` budget (in a run and across a fleet task's resumption), and the results
that show it."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import trio

from trio_agent import (
    AssistantMessage,
    Context,
    LoopConfig,
    Text,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    check_transcript,
    run_agent_loop,
)
from trio_agent.testing import ScriptedModel

genai_prices = pytest.importorskip(
    "genai_prices", reason="genai-prices (the cost extra, in the test extra) prices the runs"
)


def table(model: str, provider: str) -> Any:
    """The table's per-million prices for ``model`` (read from a one-token calculation)."""
    return genai_prices.calc_price(
        genai_prices.Usage(input_tokens=1), model, provider_id=provider
    ).model_price


def test_usage_cost_is_the_tables_price_with_cache_tokens_priced_as_such() -> None:
    usage = Usage(
        input_tokens=10_000, output_tokens=2_000, cache_read_tokens=50_000, cache_write_tokens=4_000
    )
    p = table("claude-haiku-4-5", "anthropic")  # flat prices (no tiers by size)
    expected = (
        10_000 * float(p.input_mtok)
        + 2_000 * float(p.output_mtok)
        + 50_000 * float(p.cache_read_mtok)
        + 4_000 * float(p.cache_write_mtok)
    ) / 1e6
    cost = usage.cost("claude-haiku-4-5", "anthropic")
    assert cost == pytest.approx(expected, rel=1e-12)
    # Cached tokens are cheaper than fresh ones: pricing them all as input would be more.
    assert cost < Usage(input_tokens=64_000, output_tokens=2_000).cost(
        "claude-haiku-4-5", "anthropic"
    )


@pytest.mark.parametrize(
    ("provider", "model", "table_provider"),
    [
        ("openai", "gpt-4.1", "openai"),
        ("openai-responses", "gpt-5-mini", "openai"),
        ("gemini", "gemini-2.5-flash", "google"),
    ],
)
def test_provider_names_map_onto_the_table(provider: str, model: str, table_provider: str) -> None:
    p = table(model, table_provider)
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    expected = float(p.input_mtok) + float(p.output_mtok)
    assert usage.cost(model, provider) == pytest.approx(expected)


def test_unknown_models_and_providers_cost_none_never_a_guess() -> None:
    usage = Usage(input_tokens=100, output_tokens=10)
    assert usage.cost("no-such-model-7b", "openai") is None
    assert usage.cost("gpt-4.1", "llama.cpp") is None
    assert usage.cost("", "openai") is None
    # No tokens counted: nothing to pay, whatever the model.
    assert Usage().cost("no-such-model-7b", "nowhere") == 0.0


def test_without_genai_prices_the_cost_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices", None)  # import fails: not installed
    assert Usage(input_tokens=100).cost("gpt-4.1", "openai") is None


def reply(text: str, usage: Usage, model: str = "gpt-4.1", provider: str = "openai") -> Any:
    return AssistantMessage(
        content=(Text(text=text),), stop_reason="stop", usage=usage, model=model, provider=provider
    )


def calls(n: int, usage: Usage, model: str = "gpt-4.1") -> AssistantMessage:
    return AssistantMessage(
        content=(ToolCall(id=f"c{n}", name="noop", arguments={}),),
        stop_reason="tool_use",
        usage=usage,
        model=model,
        provider="openai",
    )


async def _noop(call: ToolCall, args: Any, ctx: Any) -> str:
    return "ok"


NOOP = Tool(name="noop", description="Nothing.", parameters={"type": "object"}, execute=_noop)
STEP = Usage(input_tokens=200_000, output_tokens=10_000)


async def run(model: ScriptedModel, config: LoopConfig | None = None) -> Any:
    with trio.fail_after(10):
        return await run_agent_loop(
            [UserMessage.text("go")], Context(tools=(NOOP,)), model, config=config
        )


async def test_a_runs_cost_sums_its_replies() -> None:
    other = Usage(input_tokens=1000, output_tokens=50, cache_read_tokens=3000)
    model = ScriptedModel([calls(1, STEP), reply("done", other, "claude-sonnet-4-5", "anthropic")])
    result = await run(model)
    assert result.reason == "stop"
    assert result.cost == pytest.approx(
        STEP.cost("gpt-4.1", "openai") + other.cost("claude-sonnet-4-5", "anthropic")
    )


async def test_a_run_with_an_unknown_model_has_no_cost() -> None:
    result = await run(ScriptedModel([calls(1, STEP), reply("done", STEP, "mystery-1")]))
    assert result.cost is None


async def test_max_cost_ends_the_run_with_usage_limit() -> None:
    step_cost = STEP.cost("gpt-4.1", "openai")
    assert step_cost is not None
    model = ScriptedModel([calls(n, STEP) for n in range(10)])
    result = await run(model, LoopConfig(max_cost=step_cost * 2.5))
    # Three replies: after two the budget is not spent, after three it is.
    assert result.reason == "usage_limit"
    assert model.request_count == 3
    assert result.cost >= step_cost * 2.5
    check_transcript(result.transcript)
    assert type(result.transcript[-1]) is ToolResultMessage


async def test_max_cost_with_a_reply_that_cannot_be_priced_ends_the_run() -> None:
    model = ScriptedModel([calls(n, STEP, model="mystery-1") for n in range(5)])
    result = await run(model, LoopConfig(max_cost=100.0))
    assert result.reason == "usage_limit"
    assert model.request_count == 1


async def test_a_budget_not_reached_lets_the_run_finish() -> None:
    model = ScriptedModel([calls(1, STEP), reply("done", STEP)])
    result = await run(model, LoopConfig(max_cost=1000.0))
    assert result.reason == "stop"


def test_max_cost_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_cost"):
        LoopConfig(max_cost=0)


def test_a_resumed_fleet_task_gets_what_is_left_of_its_budget() -> None:
    from trio_agent.fleet._worker import _limits_left

    step_cost = STEP.cost("gpt-4.1", "openai")
    assert step_cost is not None
    before = [UserMessage.text("go"), calls(1, STEP)]
    left = _limits_left(LoopConfig(max_cost=step_cost * 3), before, 1)
    assert not isinstance(left, str)
    assert left.max_cost == pytest.approx(step_cost * 2)
    assert _limits_left(LoopConfig(max_cost=step_cost), before, 1) == "usage_limit"


def test_fleet_results_keep_the_cost() -> None:
    from trio_agent.fleet import TaskResult

    result = TaskResult(
        id="t",
        reason="stop",
        steps=1,
        usage=STEP,
        wall_time=0.1,
        error=None,
        transcript="transcripts/t.jsonl",
        cost=1.25,
    )
    assert TaskResult.from_json(result.to_json()) == result
    old_line = {k: v for k, v in result.to_json().items() if k != "cost"}
    assert TaskResult.from_json(old_line).cost is None


async def test_a_fleet_records_and_sums_the_cost(tmp_path: Any) -> None:
    from tests.kit.fleet import result_lines
    from trio_agent.fleet import FleetTask, TaskSetup, run_fleet

    def factory(task: FleetTask) -> TaskSetup:
        model = "mystery-1" if task.id == "unpriced" else "gpt-4.1"
        return TaskSetup(model=ScriptedModel([reply("done", STEP, model)]))

    priced = [FleetTask(id=f"t{n}", prompt="go") for n in range(3)]
    with trio.fail_after(20):
        summary = await run_fleet(priced, factory, out=tmp_path / "a", fsync=False)
    one = STEP.cost("gpt-4.1", "openai")
    assert summary.cost == pytest.approx(3 * one)
    assert [line["cost"] for line in result_lines(tmp_path / "a")] == [pytest.approx(one)] * 3
    mixed = [*priced, FleetTask(id="unpriced", prompt="go")]
    with trio.fail_after(20):
        summary = await run_fleet(mixed, factory, out=tmp_path / "b", fsync=False)
    assert summary.cost is None
