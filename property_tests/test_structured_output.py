"""Structured output, for any value and any corruption of it, in every asking mode.

Theory of operation
-------------------
A value is drawn for one of a few output types (an attrs class holding a list of nested
attrs classes, a ``Literal``, an enum and optional fields; a ``TypedDict``). Its
unstructured JSON — what a model that got it right sends — is the good answer. A
scripted model gives ``k`` corrupted answers, then the good one. A corruption is one of:
a required field removed, a field of the wrong type (at the top or nested, in a list),
bad JSON, or the text cut short (in tool mode: the final-answer call's argument text).

Whatever was drawn:

- ``k <= retries``: the run ends ``stop`` with ``result.output == value`` (equal after a
  round trip through real JSON text), after exactly ``k`` answers were sent back, each
  message naming the path of what was wrong;
- ``k > retries``: the run ends ``output_invalid`` after ``retries + 1`` answers, and
  reading ``output`` raises — never an unvalidated value;
- always: every run invariant of ``assert_run_invariants`` holds (the transcript is
  paired at every request and at the end, the events are well formed).

An abort or an outer cancel at any of the retried requests leaves the transcript paired
as well.
"""

from __future__ import annotations

import enum
import json
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

import attrs
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kit.output import Corruption, answer_in, run_corrupted
from trio_agent import (
    AgentEvent,
    Context,
    OutputError,
    StructuredOutput,
    check_transcript,
    open_agent_loop,
    run_agent_loop,
)
from trio_agent._core._output import output_converter
from trio_agent.testing import ScriptedModel, assert_run_invariants

if TYPE_CHECKING:
    from trio.testing import MockClock

with_clock = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


class Size(enum.Enum):
    S = "s"
    M = "m"
    L = "l"


@attrs.frozen
class Line:
    sku: str
    price: float
    quantity: int = 1


@attrs.frozen
class Order:
    """An order."""

    customer: str
    lines: list[Line]
    size: Size
    channel: Literal["web", "phone"] = "web"
    note: str | None = None


# Functional form: the class form under `from __future__ import annotations` files
# NotRequired keys as required on Python 3.11.
Ticket = TypedDict(  # noqa: UP013
    "Ticket", {"title": str, "priority": int, "labels": list[str], "owner": NotRequired[str]}
)

finite = st.floats(allow_nan=False, allow_infinity=False, width=32)
lines = st.builds(Line, sku=st.text(max_size=8), price=finite, quantity=st.integers(-5, 99))
orders = st.builds(
    Order,
    customer=st.text(max_size=12),
    lines=st.lists(lines, max_size=3),
    size=st.sampled_from(Size),
    channel=st.sampled_from(["web", "phone"]),
    note=st.none() | st.text(max_size=10),
)
tickets = st.fixed_dictionaries(
    {
        "title": st.text(max_size=12),
        "priority": st.integers(0, 5),
        "labels": st.lists(st.text(max_size=5), max_size=3),
    },
    optional={"owner": st.text(max_size=8)},
)
CASES = st.one_of(orders.map(lambda v: (Order, v)), tickets.map(lambda v: (Ticket, v)))
MODES = st.sampled_from(["tool", "prompted", "native"])

REQUIRED = {Order: ["customer", "lines", "size"], Ticket: ["title", "priority", "labels"]}
WRONG_TYPE = {  # field: a value of the wrong type, and the words of the error
    "customer": (12, "expected a string"),
    "size": ("xl", "expected one of"),
    "title": (["x"], "expected a string"),
    "priority": ("high", "expected an integer"),
}


@st.composite
def corruptions(draw: st.DrawFn, tp: Any, good: dict[str, Any], mode: str) -> Corruption:
    kinds = ["remove", "wrong_type"]
    if tp is Order and good["lines"]:
        kinds.append("nested")
    kinds += ["bad_json", "truncated"]
    kind = draw(st.sampled_from(kinds))
    bad = json.loads(json.dumps(good))
    if kind == "remove":
        name = draw(st.sampled_from(REQUIRED[tp]))
        del bad[name]
        return Corruption(bad, None, f"{name}: required field missing")
    if kind == "wrong_type":
        name = draw(st.sampled_from([n for n in REQUIRED[tp] if n in WRONG_TYPE]))
        bad[name], words = WRONG_TYPE[name]
        return Corruption(bad, None, f"{name}: {words}")
    if kind == "nested":
        i = draw(st.integers(0, len(bad["lines"]) - 1))
        bad["lines"][i]["price"] = "cheap"
        return Corruption(bad, None, f"lines[{i}].price: expected a number")
    # In tool mode the text is the final-answer call's argument text, as a provider
    # keeps it (``ToolCall.raw_arguments``).
    text = json.dumps(good)
    if kind == "bad_json":
        said = "$: malformed argument JSON" if mode == "tool" else "$: the answer is not valid JSON"
        return Corruption(None, "{" + text, said)
    cut = draw(st.integers(0, len(text) - 1))
    said = "$: malformed argument JSON" if mode == "tool" else "$: the answer"
    return Corruption(None, text[:cut], said)


@with_clock
@given(data=st.data(), case=CASES, mode=MODES, retries=st.integers(0, 3))
async def test_any_value_any_corruption_any_mode(
    autojump_clock: MockClock, data: st.DataObject, case: tuple[Any, Any], mode: str, retries: int
) -> None:
    tp, value = case
    good = output_converter.unstructure(value, tp)
    k = data.draw(st.integers(0, retries + 1), label="corrupted answers")
    bad = [data.draw(corruptions(tp, good, mode), label=f"corruption {i}") for i in range(k)]
    spec = StructuredOutput(tp, mode=mode, retries=retries)  # type: ignore[arg-type]
    result = await run_corrupted(mode, spec, good, bad, retries)
    if k <= retries:
        # Equal after a round trip through real JSON text.
        assert result.output == output_converter.structure(json.loads(json.dumps(good)), tp)


@with_clock
@given(case=CASES, mode=MODES, data=st.data())
async def test_abort_during_the_retries_keeps_the_transcript_paired(
    autojump_clock: MockClock, case: tuple[Any, Any], mode: str, data: st.DataObject
) -> None:
    tp, value = case
    good = output_converter.unstructure(value, tp)
    retries = 3
    bad = [data.draw(corruptions(tp, good, mode), label=f"corruption {i}") for i in range(3)]
    model = ScriptedModel([answer_in(mode, c.value, c.text, i) for i, c in enumerate(bad)])
    step = data.draw(st.integers(1, 2), label="aborted request")
    outer = data.draw(st.booleans(), label="an outer cancel (else abort())")
    pause = model.pause_at(step, 0)
    events: list[AgentEvent] = []
    context = Context()
    spec = StructuredOutput(tp, mode=mode, retries=retries)  # type: ignore[arg-type]
    with trio.fail_after(100):
        if outer:
            async with trio.open_nursery() as nursery:
                scope = trio.CancelScope()

                async def go() -> None:
                    with scope:
                        await run_agent_loop(
                            "go", context, model, on_event=events.append, output_type=spec
                        )

                nursery.start_soon(go)
                await pause.reached.wait()
                scope.cancel()
            end = events[-1]
            assert end.type == "agent_end"
            assert end.reason == "aborted"  # type: ignore[union-attr]
            check_transcript(end.messages)  # type: ignore[union-attr]
            return
        async with open_agent_loop("go", context, model, output_type=spec) as run:
            async with trio.open_nursery() as nursery:

                async def drain() -> None:
                    async for event in run.events:
                        events.append(event)

                nursery.start_soon(drain)
                await pause.reached.wait()
                run.abort("enough")
    result = run.result
    assert result is not None
    assert result.reason == "aborted"
    assert_run_invariants(result, events, model.requests, context)
    with pytest.raises(OutputError):
        _ = result.output
