"""Checked by mypy --strict (tests/test_typing.py), never run: the structured output's
type reaches ``AgentRunResult[T].output`` through every entry point."""

from __future__ import annotations

from typing import Any, assert_type

import attrs

from trio_agent import (
    Agent,
    AgentRunResult,
    Context,
    StructuredOutput,
    open_agent_loop,
    run_agent_loop,
)
from trio_agent.testing import ScriptedModel


@attrs.frozen
class Invoice:
    number: str
    total: float


async def check(agent: Agent) -> None:
    model = ScriptedModel()
    ctx = Context()

    plain = await run_agent_loop("x", ctx, model)
    assert_type(plain, AgentRunResult[None])
    assert_type(plain.output, None)

    typed = await run_agent_loop("x", ctx, model, output_type=Invoice)
    assert_type(typed.output, Invoice)

    retried = await run_agent_loop("x", ctx, model, output_type=Invoice, output_retries=4)
    assert_type(retried.output, Invoice)

    listed = await run_agent_loop("x", ctx, model, output_type=list[Invoice])
    assert_type(listed.output, list[Invoice])

    spec = StructuredOutput(Invoice, mode="prompted", retries=3)
    assert_type(spec, StructuredOutput[Invoice])
    via_spec = await run_agent_loop("x", ctx, model, output_type=spec)
    assert_type(via_spec.output, Invoice)

    schema = await run_agent_loop("x", ctx, model, output_type={"type": "object"})
    assert_type(schema.output, Any)

    async with open_agent_loop("x", ctx, model, output_type=Invoice, output_retries=0) as run:
        async for _ in run.events:
            pass
    if run.result is not None:
        assert_type(run.result.output, Invoice)

    prompted = await agent.prompt("x", output_type=Invoice)
    assert_type(prompted.output, Invoice)
    prompted_retried = await agent.prompt("x", output_type=spec, output_retries=3)
    assert_type(prompted_retried.output, Invoice)
    assert_type(agent.output_retries, int)
    again = await agent.continue_()
    assert_type(again.output, Any)
