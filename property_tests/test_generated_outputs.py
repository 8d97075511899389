"""Structured output over GENERATED types: any class the grammar builds, any value of it,
any corruption, every asking mode.

Theory of operation
-------------------
``trio_agent.testing.output_types`` builds a class while the test runs — attrs, a
dataclass or a ``TypedDict``; random field names; fields of ``int``, ``float``, ``str``,
``bool``, ``X | None``, ``list[X]``, ``Literal[...]``, a generated enum, another
generated class or a (tagged) union of them; some with defaults — and a strategy of its
values. The value's
unstructured JSON is the good answer. A scripted model gives ``k`` corrupted answers,
then the good one. A corruption is one of: a required field removed (at any depth), a
value replaced by one of a wrong JSON type (at any depth), bad JSON, or the JSON text
cut short — in tool mode the last two are the final-answer call's argument text
(``ToolCall.raw_arguments``, as a provider keeps it), in the other modes the reply's
text. The retries are given as ``output_retries=``.

Whatever was drawn:

- each answer sent back names the path of what was wrong (``items[2].price: ...``, or
  ``$`` for text that is not JSON) in what the model is sent next;
- ``k <= retries``: the run ends ``stop`` with ``result.output == value``;
- ``k > retries``: the run ends ``output_invalid`` after ``retries + 1`` answers, its
  error naming the last failure's path, and reading ``output`` raises — never an
  unvalidated value;
- always: the derived schema is a valid JSON Schema that the value's JSON satisfies;
  every run invariant of ``assert_run_invariants`` holds (each final-answer call
  has its result; the transcript is paired at every request and at the end).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kit.output import Corruption, run_corrupted
from trio_agent import (
    StructuredOutput,
    json_schema,
)
from trio_agent._core import plan_output
from trio_agent._core._output import output_converter
from trio_agent.testing import corruption_sites, output_types

if TYPE_CHECKING:
    from trio.testing import MockClock

    from trio_agent.testing._output_strategies import OutputShape

# Each example builds its classes and runs a whole loop: the thorough profile's count
# is capped so that the test stays inside the suite's per-test timeout.
with_clock = settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    max_examples=min(settings.default.max_examples, 800),
)
MODES = st.sampled_from(["tool", "prompted", "native"])


def render(path: list[str | int]) -> str:
    """A path as the error messages write it: ``items[2].price``; ``$`` is the root."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out if out and not out.startswith("[") else f"${out}"


@st.composite
def corruptions(draw: st.DrawFn, shape: OutputShape, good: Any, mode: str) -> Corruption:
    removable, replaceable = corruption_sites(shape, good)
    kinds = ["bad_json", "truncated"]
    if replaceable:
        kinds.insert(0, "wrong_type")
    if removable:
        kinds.insert(0, "remove")
    kind = draw(st.sampled_from(kinds), label="corruption")
    bad = json.loads(json.dumps(good))
    if kind == "remove":
        path = draw(st.sampled_from(removable), label="removed")
        _parent(bad, path).pop(path[-1])
        return Corruption(bad, None, f"{render(path)}: required field missing")
    if kind == "wrong_type":
        path, wrong = draw(st.sampled_from(replaceable), label="replaced")
        _parent(bad, path)[path[-1]] = wrong
        return Corruption(bad, None, f"{render(path)}: ")
    text = json.dumps(good)
    if kind == "bad_json":
        text = "{" + text
    else:
        text = text[: draw(st.integers(0, len(text) - 1), label="cut at")]
    said = "$: malformed argument JSON" if mode == "tool" else "$: the answer"
    return Corruption(None, text, said)


def _parent(data: Any, path: list[str | int]) -> Any:
    for part in path[:-1]:
        data = data[part]
    return data


@with_clock
@given(data=st.data(), shape=output_types(), mode=MODES, retries=st.integers(0, 2))
async def test_any_generated_type_any_value_any_corruption(
    autojump_clock: MockClock, data: st.DataObject, shape: OutputShape, mode: str, retries: int
) -> None:
    value = data.draw(shape.values, label="value")
    plan_output(shape.tp, ())  # (tagged unions get their tags in the converter)
    good = output_converter.unstructure(value, shape.tp)
    # The schema is a valid JSON Schema, and the value's JSON is valid against it.
    schema = json_schema(shape.tp)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(good, schema)
    k = data.draw(st.integers(0, retries + 1), label="corrupted answers")
    bad = [data.draw(corruptions(shape, good, mode), label=f"corruption {i}") for i in range(k)]
    spec = StructuredOutput(shape.tp, mode=mode)  # type: ignore[arg-type]
    result = await run_corrupted(mode, spec, good, bad, retries, output_retries=retries)
    if k <= retries:
        assert result.output == value
