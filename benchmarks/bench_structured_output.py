"""What structured output costs per run: a typical 10-field nested output, structured by
trio-agent's one check, next to ``cattrs.structure`` alone.

Not part of ``trio-agent bench``. Run from the root of a checkout::

    .venv/bin/python -m benchmarks.bench_structured_output            # 7 repeats
    .venv/bin/python -m benchmarks.bench_structured_output --repeats 3 --n 500

The output type is an attrs class of ten fields (strings, an int, a float, a bool, an
enum, a ``Literal``, an optional note, a nested address, a list of three nested lines),
answered as plain JSON data. Interleaved per repeat, medians of the time per answer:

- **cattrs.structure alone**: a default ``cattrs.Converter().structure(data, Invoice)`` —
  no validation, no error paths (the floor).
- **check (tool mode)**: ``OutputPlan.check``: validation against the schema
  (jsonschema-rs) then the strict converter — what a final-answer call's arguments go
  through.
- **check_text (text modes)**: ``OutputPlan.check_text``: JSON text parsed, then the same.
- **per run**: a whole ``run_agent_loop`` (scripted model, no event consumer) without
  ``output_type`` answering with the JSON text; the same with ``output_type`` in
  prompted mode (the same reply, now judged); and in tool mode, where the reply is the
  final-answer call instead (its arguments streamed as JSON and parsed by the loop, the
  call answered with a result message). The plan is compiled by the first run and
  reused (``plan_output`` keeps it).
"""

from __future__ import annotations

import argparse
import enum
import json
import statistics
import time
from typing import Any, Literal

import attrs
import cattrs
import trio

from trio_agent import AssistantMessage, Context, OutputMode, Text, ToolCall, run_agent_loop
from trio_agent._core._output import OutputPlan, StructuredOutput
from trio_agent.testing import ScriptedModel


class Status(enum.Enum):
    DRAFT = "draft"
    SENT = "sent"
    PAID = "paid"


@attrs.frozen
class Address:
    street: str
    city: str
    country: str = "FR"


@attrs.frozen
class Line:
    item: str
    quantity: int
    unit_price: float


@attrs.frozen
class Invoice:
    """An invoice (ten fields, two of them nested)."""

    number: str
    customer: str
    issued: str
    total: float
    lines: list[Line]
    billing: Address
    status: Status
    currency: Literal["EUR", "USD"] = "EUR"
    paid: bool = False
    note: str | None = None


DATA: dict[str, Any] = {
    "number": "2026-114",
    "customer": "Ada Lovelace",
    "issued": "2026-12-03",
    "total": 29.0,
    "lines": [
        {"item": "gear", "quantity": 2, "unit_price": 12.5},
        {"item": "lever", "quantity": 1, "unit_price": 4.0},
        {"item": "crank", "quantity": 3, "unit_price": 0.0},
    ],
    "billing": {"street": "12 Analytical Row", "city": "London", "country": "UK"},
    "status": "sent",
    "currency": "EUR",
    "paid": False,
    "note": None,
}
TEXT = json.dumps(DATA)


def _per_answer(fn: Any, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def _runs(n: int, mode: OutputMode | None) -> float:
    """Seconds per run: ``mode`` None answers in text without ``output_type``; ``tool``
    with the final-answer call; ``prompted`` with the same text as the plain run."""
    call = ToolCall(id="f1", name="final_result", arguments=DATA)
    answer = (
        AssistantMessage(content=(call,), stop_reason="tool_use")
        if mode == "tool"
        else AssistantMessage(content=(Text(text=TEXT),), stop_reason="stop")
    )
    context = Context()
    spec = None if mode is None else StructuredOutput(Invoice, mode=mode)

    async def main() -> float:
        start = time.perf_counter()
        for _ in range(n):
            model = ScriptedModel([answer], keep_requests=False)
            if spec is not None:
                result = await run_agent_loop("go", context, model, output_type=spec)
                assert result.output.total == 29.0
            else:
                plain = await run_agent_loop("go", context, model)
                assert plain.reason == "stop"
        return (time.perf_counter() - start) / n

    return trio.run(main)


def measure(repeats: int, n: int, runs: int) -> dict[str, float]:
    """Median seconds per answer (per run for the run rows), interleaved per repeat."""
    plain = cattrs.Converter()
    plan = OutputPlan(StructuredOutput(Invoice))
    expected = plain.structure(DATA, Invoice)
    assert plan.check(DATA) == expected
    assert plan.check_text(TEXT) == expected
    rows: dict[str, list[float]] = {
        "cattrs.structure alone": [],
        "check (tool mode)": [],
        "check_text (text modes)": [],
        "run, tool mode": [],
        "run, prompted mode": [],
        "run without": [],
    }
    for _ in range(repeats):
        rows["cattrs.structure alone"].append(
            _per_answer(lambda: plain.structure(DATA, Invoice), n)
        )
        rows["check (tool mode)"].append(_per_answer(lambda: plan.check(DATA), n))
        rows["check_text (text modes)"].append(_per_answer(lambda: plan.check_text(TEXT), n))
        rows["run, tool mode"].append(_runs(runs, "tool"))
        rows["run, prompted mode"].append(_runs(runs, "prompted"))
        rows["run without"].append(_runs(runs, None))
    return {name: statistics.median(samples) for name, samples in rows.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--n", type=int, default=2000, help="answers per sample")
    parser.add_argument("--runs", type=int, default=300, help="runs per sample")
    args = parser.parse_args(argv)
    result = measure(args.repeats, args.n, args.runs)
    floor = result["cattrs.structure alone"]
    print("| per answer | µs | × cattrs.structure |")
    print("|---|---:|---:|")
    for name in ("cattrs.structure alone", "check (tool mode)", "check_text (text modes)"):
        print(f"| {name} | {result[name] * 1e6:.1f} | {result[name] / floor:.1f} |")
    base = result["run without"]
    print()
    print("| per run | µs | added by output_type |")
    print("|---|---:|---:|")
    print(f"| without output_type (a text answer) | {base * 1e6:.0f} | |")
    for name in ("run, prompted mode", "run, tool mode"):
        added = result[name] - base
        print(
            f"| {name[5:]}, same answer | {result[name] * 1e6:.0f} | {added * 1e6:.0f} "
            f"({added / floor:.1f}× cattrs.structure) |"
        )


if __name__ == "__main__":
    main()
