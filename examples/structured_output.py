"""Extract an attrs class from an email: a run that ends in a typed value.

    python examples/structured_output.py

``output_type=Invoice`` derives a JSON Schema from the class (field docs become
descriptions), asks the model for it (here as a final-answer tool: the scripted model
says nothing about native structured output), validates the answer against the schema
and structures it with one strict cattrs converter. The model's first answer has a
price as text: it is sent back naming the path, and the second answer is accepted. The
model is scripted, so this runs offline; ``model.requests`` shows what it was sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import trio

from trio_agent import (
    AssistantMessage,
    Context,
    OutputUpdate,
    ToolCall,
    ToolResultMessage,
    run_agent_loop,
)
from trio_agent.testing import ScriptedModel

if TYPE_CHECKING:
    from collections.abc import Mapping

EMAIL = """From: billing@acme.example
Invoice 2026-114 for Ada Lovelace: 2 gears at 12.50, 1 lever at 4.00."""


@attrs.frozen
class Line:
    """One line of an invoice.

    Attributes:
        item: what was sold.
        quantity: how many.
        unit_price: the price of one, in euros.
    """

    item: str
    quantity: int
    unit_price: float


@attrs.frozen
class Invoice:
    """An invoice found in an email."""

    number: str
    customer: str
    lines: list[Line]
    paid: bool = False


def answer(call_id: str, arguments: Mapping[str, Any]) -> AssistantMessage:
    call = ToolCall(id=call_id, name="final_result", arguments=arguments)
    return AssistantMessage(content=(call,), stop_reason="tool_use")


async def main() -> None:
    lines = [
        {"item": "gear", "quantity": 2, "unit_price": 12.5},
        {"item": "lever", "quantity": 1, "unit_price": "4.00"},  # a string: refused
    ]
    first = {"number": "2026-114", "customer": "Ada Lovelace", "lines": lines}
    fixed = {**first, "lines": [lines[0], {**lines[1], "unit_price": 4.0}]}
    model = ScriptedModel([answer("c1", first), answer("c2", fixed)])
    updates: list[OutputUpdate] = []

    def watch(event: object) -> None:
        if isinstance(event, OutputUpdate):
            updates.append(event)

    context = Context(system_prompt="Extract the invoice.")
    result = await run_agent_loop(EMAIL, context, model, on_event=watch, output_type=Invoice)
    invoice = result.output  # an Invoice, for mypy too
    print(result.reason, f"after {result.steps} requests")
    sent_back = model.requests[1].messages[-1]
    assert isinstance(sent_back, ToolResultMessage)
    print("sent back:", sent_back.text.splitlines()[1].strip())
    print(invoice)
    total = sum(line.quantity * line.unit_price for line in invoice.lines)
    print(f"total: {total:.2f}")
    print("streamed updates:", len(updates))


if __name__ == "__main__":
    trio.run(main)
