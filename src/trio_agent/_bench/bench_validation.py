"""Tool-argument preparation: lenient conversion + strict validation, per call.

A realistic coding-tool schema (path, offset/limit, enum flags, a nested object, an
array of ``$ref`` ranges). Measured, in arguments per second (median of the repeats):

* ``valid``: arguments that validate as sent — the common case, one ``is_valid`` call;
* ``convert``: arguments a model typically gets wrong in a fixable way (``"10"`` for an
  integer, ``"true"`` for a boolean, an array sent as JSON text), converted then
  validated;
* ``invalid``: arguments that stay invalid, down to the finished error text;
* ``decorated``: an ``@tool`` function's arguments checked and converted to its
  annotated types (attrs instances, tuples), as its ``execute`` does;
* ``floor``: a bare compiled ``jsonschema_rs`` validator's ``is_valid`` on the valid
  arguments: nothing can be cheaper than that.

``python -m trio_agent._bench.bench_validation [--repeats N]``; the suite calls :func:`run`.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from typing import TYPE_CHECKING, Any, Literal

import attrs
import jsonschema_rs
import trio

from trio_agent import Tool, ToolCall, ToolContext, tool
from trio_agent._core import InvalidArguments, check_arguments

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["main", "run"]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "file to read, relative to the root"},
        "offset": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]},
        "limit": {"type": "integer", "minimum": 1, "default": 2000},
        "flags": {
            "type": "array",
            "items": {"enum": ["line_numbers", "follow_symlinks", "binary"]},
        },
        "context": {
            "type": "object",
            "properties": {"before": {"type": "integer"}, "after": {"type": "integer"}},
            "additionalProperties": False,
        },
        "ranges": {"type": "array", "items": {"$ref": "#/$defs/Range"}},
        "case_sensitive": {"type": "boolean", "default": True},
    },
    "required": ["path"],
    "additionalProperties": False,
    "$defs": {
        "Range": {
            "type": "object",
            "properties": {"start": {"type": "integer"}, "end": {"type": "integer"}},
            "required": ["start"],
        }
    },
}

VALID: dict[str, Any] = {
    "path": "src/trio_agent/_run/_loop.py",
    "offset": 120,
    "limit": 80,
    "flags": ["line_numbers"],
    "context": {"before": 2, "after": 2},
    "ranges": [{"start": 1, "end": 10}, {"start": 40}],
    "case_sensitive": False,
}

FIXABLE: dict[str, Any] = {
    "path": "src/trio_agent/_run/_loop.py",
    "offset": "120",
    "limit": "80",
    "flags": '["line_numbers"]',
    "context": {"before": "2", "after": 2},
    "ranges": [{"start": "1", "end": 10}, {"start": 40}],
    "case_sensitive": "false",
}

BROKEN: dict[str, Any] = {
    "offset": "1.5",
    "limit": 0,
    "flags": ["colour"],
    "context": {"before": "two"},
    "case_sensitive": "no",
}


@attrs.frozen
class Range:
    start: int
    end: int | None = None


@attrs.frozen
class Context:
    before: int = 0
    after: int = 0


# It must never suspend (see _decorated), hence no await.
async def _read(  # noqa: ASYNC124
    path: str,
    offset: int | None = None,
    limit: int = 2000,
    flags: tuple[Literal["line_numbers", "follow_symlinks", "binary"], ...] = (),
    context: Context | None = None,
    ranges: tuple[Range, ...] = (),
    case_sensitive: bool = True,
) -> str:
    return path


def _decorated() -> Callable[[], object]:
    read = tool(_read)
    call = ToolCall(id="c1", name="read", arguments=VALID)
    ctx = ToolContext(call=call, report=_no_progress)

    # The whole of the decorated tool's execute: validate (the fast path), convert to the
    # annotated types, call. `_read` never suspends, so one send() runs it to the end
    # without an event loop.
    def once() -> object:
        coro = read.execute(call, VALID, ctx)
        try:
            coro.send(None)  # type: ignore[attr-defined]
        except StopIteration as stop:
            return stop.value
        raise AssertionError("the tool suspended")

    return once


async def _no_progress(partial: object) -> None:
    await trio.lowlevel.checkpoint()
    raise AssertionError("the benchmark tool reports no progress")


def _cases() -> dict[str, Callable[[], object]]:
    ours = Tool(name="read", description="", parameters=SCHEMA, execute=_never)
    validator = jsonschema_rs.validator_for(SCHEMA)

    def valid() -> object:
        return check_arguments(ours, VALID)

    def convert() -> object:
        return check_arguments(ours, FIXABLE)

    def invalid() -> object:
        try:
            check_arguments(ours, BROKEN)
        except InvalidArguments as exc:
            return exc.text
        raise AssertionError("BROKEN validated")

    def floor() -> object:
        return validator.is_valid(VALID)

    # Sanity: the workloads do what their names say.
    assert valid() is VALID
    converted = convert()
    assert converted is not FIXABLE
    assert converted == VALID
    assert floor() is True
    decorated = _decorated()
    assert decorated() == VALID["path"]
    return {
        "floor": floor,
        "valid": valid,
        "convert": convert,
        "invalid": invalid,
        "decorated": decorated,
    }


async def _never(call: object, args: object, ctx: object) -> str:
    await trio.lowlevel.checkpoint()
    raise AssertionError("the benchmark never executes the tool")


def _loops_for(fn: Callable[[], object], budget: float = 0.05) -> int:
    """How many calls make one repeat last about ``budget`` seconds."""
    n = 1
    while True:
        start = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - start >= budget / 10 or n >= 1 << 24:
            return max(1, int(n * budget / max(time.perf_counter() - start, 1e-9)))
        n *= 2


def run(repeats: int) -> dict[str, Any]:
    """Measure every case ``repeats`` times (interleaved); medians in calls per second.

    Returns:
        ``{"<case>_per_s": float, ...}`` for ``floor``, ``valid``, ``convert``,
        ``invalid`` and ``decorated``, ``"<case>_ratio"``: how many times the floor's
        rate the case's cost is (floor rate / case rate), and ``"repeats"``.
    """
    cases = _cases()
    loops = {name: _loops_for(fn) for name, fn in cases.items()}
    rates: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(max(1, repeats)):
        # Alternate the order so drift hits every case alike.
        order = list(cases) if r % 2 == 0 else list(reversed(cases))
        for name in order:
            fn, n = cases[name], loops[name]
            gc.collect()
            start = time.perf_counter()
            for _ in range(n):
                fn()
            rates[name].append(n / (time.perf_counter() - start))
    out: dict[str, Any] = {"repeats": max(1, repeats)}
    floor = statistics.median(rates["floor"])
    for name, values in rates.items():
        rate = statistics.median(values)
        out[f"{name}_per_s"] = rate
        if name != "floor":
            out[f"{name}_ratio"] = floor / rate
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=7, help="repeats per case (default 7)")
    args = parser.parse_args(argv)
    figures = run(args.repeats)
    print(f"tool-argument preparation, medians of {figures['repeats']} repeats")
    print(f"{'case':<10} {'arguments/s':>14} {'µs each':>9} {'× floor':>8}")
    for name in ("floor", "valid", "convert", "invalid", "decorated"):
        rate = figures[f"{name}_per_s"]
        ratio = figures.get(f"{name}_ratio", 1.0)
        print(f"{name:<10} {rate:>14,.0f} {1e6 / rate:>9.2f} {ratio:>8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
