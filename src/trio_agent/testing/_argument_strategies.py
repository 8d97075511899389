"""Tool arguments drawn from a tool's own JSON Schema (hypothesis-jsonschema).

Theory of operation
-------------------
*Valid* arguments come from ``hypothesis_jsonschema.from_schema(tool.parameters)``, then
go through the very check the loop makes before it runs a call — the tool's
``prepare_arguments`` shim, if any, then :func:`~trio_agent._core._arguments.check_arguments`
(lenient conversion, then jsonschema-rs validation with formats) — and only arguments that
pass it are kept. The two validators rarely disagree (a ``format`` one knows and the
other does not); when they do, the draw is retried, so every value is valid for the loop.

*Invalid* arguments start from a valid draw and break it in one place: a required
property removed, a value replaced by one of the wrong type or out of bounds, an
unexpected property added. Candidate breakages are tried in an order the test case
draws, and the first one the loop's own check rejects (``InvalidArguments``) is
returned — a value the lenient conversion would repair (``"42"`` where an integer is
expected) is never counted as invalid. A schema that accepts every object has no
invalid arguments: drawing them then fails with Hypothesis' ``Unsatisfiable`` or its
``filter_too_much`` health check.

The strategies are cached per tool (tools are hashed by identity), so a test that draws
from the same tool many times canonicalises its schema once.
"""

from __future__ import annotations

import itertools
import json
import weakref
from typing import TYPE_CHECKING, Any, Final, TypeGuard

from hypothesis import assume
from hypothesis import strategies as st

from .._core import InvalidArguments, check_arguments

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from .._core import Tool

__all__ = ["accepts_arguments", "mostly_valid_arguments", "tool_arguments"]

_WRONG: Final[tuple[Any, ...]] = (
    None,
    [[None]],
    {"\x00": None},
    "\x00 not a valid value \x00",
    -(10**30),
    10**30,
    0.5,
    True,
)
"""Replacement values, each the wrong type or out of range for most schemas (the loop's
check decides which ones really are)."""

_MAX_CANDIDATES: Final = 256
"""How many breakages of one valid draw are considered (a large value has many)."""

_UNEXPECTED: Final = "unexpected argument \x00"
"""A property name no tool declares."""

_valid_cache: weakref.WeakKeyDictionary[Tool, st.SearchStrategy[dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)


def accepts_arguments(tool: Tool, arguments: Mapping[str, Any]) -> bool | None:
    """Whether the loop would run ``tool`` with ``arguments``.

    Does what the loop does before a call: the tool's ``prepare_arguments`` shim, then
    :func:`check_arguments`. Not a checkpoint.

    Returns:
        True: the arguments pass; False: the loop's check rejects them (the call would
        get an ``invalid_arguments`` result); None: ``prepare_arguments`` raised (the
        call would get an ``error`` result).
    """
    if tool.prepare_arguments is not None:
        try:
            arguments = tool.prepare_arguments(arguments)
        except Exception:
            return None
    try:
        check_arguments(tool, arguments)
    except InvalidArguments:
        return False
    return True


def _valid(tool: Tool) -> st.SearchStrategy[dict[str, Any]]:
    try:
        return _valid_cache[tool]
    except KeyError:
        pass
    # Imported here: the other strategies need Hypothesis only, not this library.
    try:
        from hypothesis_jsonschema import from_schema
    except ModuleNotFoundError as exc:
        if exc.name != "hypothesis_jsonschema":
            raise
        raise ImportError(
            "arguments drawn from a tool's schema need hypothesis-jsonschema: "
            "pip install 'trio-agent[testing]'"
        ) from exc
    # A plain-JSON copy: hypothesis-jsonschema wants dicts and lists, not any Mapping.
    schema = json.loads(json.dumps(tool.parameters))

    def accepted(value: Any) -> TypeGuard[dict[str, Any]]:
        return type(value) is dict and accepts_arguments(tool, value) is True

    strategy: st.SearchStrategy[dict[str, Any]] = from_schema(schema).filter(accepted)
    _valid_cache[tool] = strategy
    return strategy


def _breakages(value: Any) -> Iterator[Any]:
    """``value`` broken in one place each time: for an object, each property removed or
    replaced by a wrong value, an unexpected property added; for an array, each item
    replaced; recursively, so the break can be deep inside."""
    if type(value) is dict:
        yield {**value, _UNEXPECTED: None}
        for key, inner in value.items():
            rest = {k: v for k, v in value.items() if k != key}
            yield rest
            for wrong in _WRONG:
                yield {**rest, key: wrong}
            for broken in _breakages(inner):
                yield {**value, key: broken}
    elif type(value) is list:
        yield [*value, *_WRONG[:2]]
        if value:
            yield value[1:]
        for i, inner in enumerate(value):
            for wrong in _WRONG:
                yield [*value[:i], wrong, *value[i + 1 :]]
            for broken in _breakages(inner):
                yield [*value[:i], broken, *value[i + 1 :]]


@st.composite
def _invalid(draw: st.DrawFn, tool: Tool) -> dict[str, Any]:
    valid = draw(_valid(tool), label="valid arguments to break")
    candidates = list(itertools.islice(_breakages(valid), _MAX_CANDIDATES))
    assume(candidates)
    start = draw(st.integers(0, len(candidates) - 1), label="breakage")
    for candidate in candidates[start:] + candidates[:start]:
        if accepts_arguments(tool, candidate) is False:
            return dict(candidate)
    assume(False)  # nothing breaks these arguments: draw others
    raise AssertionError("unreachable")


_invalid_cache: weakref.WeakKeyDictionary[Tool, st.SearchStrategy[dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)


def tool_arguments(tool: Tool, *, valid: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments for ``tool``, drawn from its own JSON Schema (``tool.parameters``).

    Works with any :class:`~trio_agent.Tool`, those made by ``@trio_agent.tool``
    included (their ``$defs`` and ``$ref`` are followed).

    Args:
        tool: the tool whose schema the arguments follow.
        valid: True draws arguments the loop accepts: they pass the tool's
            ``prepare_arguments`` shim and the loop's own validation, so a call with them
            runs the tool's body. False draws arguments the loop's validation rejects
            (the call gets an ``invalid_arguments`` result; the body never runs): a valid
            draw broken in one place — a required property missing, a value of the wrong
            type or out of bounds, an unexpected property — never one the lenient
            conversion would repair.

    Raises:
        ImportError: hypothesis-jsonschema is not installed (``pip install
            'trio-agent[testing]'``).
        hypothesis.errors.Unsatisfiable, hypothesis.errors.FailedHealthCheck: (when
            drawing) ``valid=False`` on a schema that accepts every JSON object, or a
            schema nothing satisfies.
        hypothesis_jsonschema errors: (when drawing) a schema it cannot generate from,
            such as a recursive ``$ref``.
    """
    if valid:
        return _valid(tool)
    try:
        return _invalid_cache[tool]
    except KeyError:
        strategy = _invalid_cache[tool] = _invalid(tool)
        return strategy


def mostly_valid_arguments(tool: Tool, invalid_percent: int) -> st.SearchStrategy[dict[str, Any]]:
    """:func:`tool_arguments` for ``tool``, invalid about ``invalid_percent`` % of the
    time; shrinks toward valid arguments."""
    return (
        st.integers(0, 99)
        .map(lambda n: n < 100 - invalid_percent)
        .flatmap(lambda valid: tool_arguments(tool, valid=valid))
    )
