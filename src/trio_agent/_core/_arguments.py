"""Tool arguments: schema-driven lenient conversion, then strict validation.

``check_arguments(tool, raw)`` returns the arguments to pass to ``tool.execute`` or raises
:class:`InvalidArguments` whose ``text`` is the error result, in pi's format::

    Validation failed for tool "<name>":
      - <path>: <message>

    Received arguments:
    {...}

Before validation the arguments go through the lenient conversion of
:mod:`._conversion` (``"42"`` → 42 where an integer is expected, never anything lossy).
Arguments that already validate need no conversion (the conversion never touches a value
that could be valid), so they take a fast path: one ``is_valid`` call. Validation uses
jsonschema-rs with every error collected; the compiled validator and converter are cached
per :class:`Tool` (tools are hashed by identity), and a remote ``$ref`` is never fetched.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import jsonschema_rs

from ._conversion import Converter
from ._formats import format_checks

if TYPE_CHECKING:
    from ._tools import Tool

__all__ = [
    "InvalidArguments",
    "check_arguments",
    "check_structured_content",
    "compile_parameters",
    "convert_arguments",
]

MAX_ECHO: Final = 2000
"""How many characters of the received arguments an error result repeats."""
MAX_ERRORS: Final = 50
"""How many validation errors an error result lists (the rest are counted)."""
MAX_MESSAGE: Final = 300
"""How many characters of one validation message an error result keeps (messages
quote the offending value, which may be large)."""


class InvalidArguments(Exception):
    """The arguments do not validate; ``text`` is the tool result to send back."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


# --- compiled schemas ------------------------------------------------------------------


class _Compiled:
    """A tool's schema as plain JSON data, with its validator (or why it has none) and,
    for a parameters schema, its lenient converter."""

    __slots__ = ("converter", "problem", "validator")

    def __init__(self, parameters: Mapping[str, Any], *, convert: bool = True) -> None:
        self.validator: jsonschema_rs.Validator | None = None
        self.problem: str | None = None
        self.converter: Converter | None = None
        try:
            schema = _plain(parameters)
            # offline: a remote $ref is an error here, never a network request at run time.
            # An output schema's formats (date-time, duration...) accept what the
            # structured-output converter reads and writes (a naive date-time too).
            self.validator = jsonschema_rs.validator_for(
                schema,
                validate_formats=True,
                offline=True,
                formats=None if convert else _OUTPUT_FORMATS,
            )
        except (
            jsonschema_rs.ValidationError,
            jsonschema_rs.ReferencingError,
            ValueError,
            TypeError,
        ) as exc:
            self.problem = _first_line(str(exc))
        else:
            if convert:
                self.converter = Converter(schema)


_OUTPUT_FORMATS: Final = format_checks()

_compiled: weakref.WeakKeyDictionary[Tool, _Compiled] = weakref.WeakKeyDictionary()
_compiled_output: weakref.WeakKeyDictionary[Tool, _Compiled] = weakref.WeakKeyDictionary()


def _compiled_for(tool: Tool) -> _Compiled:
    try:
        return _compiled[tool]
    except KeyError:
        pass
    compiled = _Compiled(tool.parameters)
    _compiled[tool] = compiled
    return compiled


def _compiled_output_for(tool: Tool, schema: Mapping[str, Any]) -> _Compiled:
    try:
        return _compiled_output[tool]
    except KeyError:
        pass
    compiled = _Compiled(schema, convert=False)
    _compiled_output[tool] = compiled
    return compiled


def compile_parameters(tool: Tool) -> None:
    """Compile and cache ``tool``'s validators (its parameters schema, and its output
    schema if it has one) now rather than on its first call.

    Raises:
        ValueError: a schema is not a valid JSON Schema, or has a ``$ref`` that cannot
            be resolved locally.
    """
    problem = _compiled_for(tool).problem
    if problem is not None:
        raise ValueError(f'invalid parameters schema for tool "{tool.name}": {problem}')
    if tool.output_schema is not None:
        problem = _compiled_output_for(tool, tool.output_schema).problem
        if problem is not None:
            raise ValueError(f'invalid output schema for tool "{tool.name}": {problem}')


# --- checking --------------------------------------------------------------------------


def check_arguments(tool: Tool, raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """Convert ``raw`` leniently, then validate it against ``tool.parameters``.

    Not a checkpoint (pure computation). ``raw`` is never mutated.

    Returns:
        ``raw`` itself when it is valid as is, else a new converted mapping.

    Raises:
        InvalidArguments: the (converted) arguments fail validation — every error is
            listed — or the tool's own schema is broken.
    """
    compiled = _compiled_for(tool)
    validator, converter = compiled.validator, compiled.converter
    if validator is None or converter is None:
        raise InvalidArguments(
            f'Tool "{tool.name}" has an invalid parameters schema: {compiled.problem}'
        )
    try:
        if validator.is_valid(raw):
            return raw
    except ValueError:
        pass  # not plain JSON data: the slow path below copies it
    candidate: Mapping[str, Any] = converter.convert(raw)
    try:
        errors = list(validator.iter_errors(candidate))
    except ValueError:
        # Not plain JSON data (a non-dict mapping, a set...): copy what can be copied.
        try:
            candidate = _plain(candidate)
        except TypeError as exc:
            raise InvalidArguments(
                _failure(tool.name, [f"  - root: arguments are not JSON data ({exc})"], raw)
            ) from None
        errors = list(validator.iter_errors(candidate))
    if not errors:
        return candidate
    raise InvalidArguments(_failure(tool.name, _error_lines(errors), raw))


def check_structured_content(tool: Tool, value: Any) -> str | None:
    """Validate ``value``, a result's structured content, against ``tool.output_schema``
    (strictly: no conversion). Not a checkpoint.

    Returns:
        None when it matches (or the tool declares no output schema); else the text of
        the error result, in the format of an invalid-arguments result: one
        ``  - <path>: <message>`` line per mismatch, then the value received.
    """
    schema = tool.output_schema
    if schema is None:
        return None
    compiled = _compiled_output_for(tool, schema)
    validator = compiled.validator
    if validator is None:
        return f'Tool "{tool.name}" has an invalid output schema: {compiled.problem}'
    try:
        errors = list(validator.iter_errors(value))
    except ValueError:
        try:
            errors = list(validator.iter_errors(_plain(value)))
        except TypeError as exc:
            lines = [f"  - root: structured content is not JSON data ({exc})"]
            return _failure(tool.name, lines, value, _OUTPUT)
    if not errors:
        return None
    return _failure(tool.name, _error_lines(errors), value, _OUTPUT)


def convert_arguments(schema: Mapping[str, Any], raw: Any) -> Any:
    """The lenient conversion alone (without validation), for one schema.

    Returns ``raw`` itself when nothing needed converting. Not cached: for repeated use,
    go through :func:`check_arguments`, which keeps the prepared schema per tool.
    """
    return Converter(_plain(schema)).convert(raw)


def _error_lines(errors: list[jsonschema_rs.ValidationError]) -> list[str]:
    lines = []
    for err in errors[:MAX_ERRORS]:
        lines.append(f"  - {_error_path(err)}: {_clip(err.message, MAX_MESSAGE)}")
    if len(errors) > MAX_ERRORS:
        lines.append(f"  - … and {len(errors) - MAX_ERRORS} more errors")
    return lines


def _error_path(err: jsonschema_rs.ValidationError) -> str:
    # pi's rule: the instance path without its leading slash; at the root, the missing
    # property of a `required` error, else "root".
    if err.instance_path:
        return "/".join(str(p) for p in err.instance_path)
    kind = err.kind
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.Required):
        return str(kind.property)
    return "root"


_ARGUMENTS: Final = ('Validation failed for tool "{name}":', "Received arguments:")
_OUTPUT: Final = (
    'Structured content of tool "{name}" does not match its output schema:',
    "Received structured content:",
)


def _failure(name: str, lines: list[str], raw: Any, texts: tuple[str, str] = _ARGUMENTS) -> str:
    head, received = texts
    return "\n".join([head.format(name=name), *lines, "", received, _echo(raw)])


def _echo(arguments: Any) -> str:
    try:
        text = json.dumps(_jsonish(arguments), indent=2, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(arguments)
    if len(text) > MAX_ECHO:
        text = f"{text[:MAX_ECHO]}… ({len(text) - MAX_ECHO} more characters)"
    return text


def _jsonish(value: Any) -> Any:
    # json.dumps only knows dicts; any other mapping is shown as one.
    if isinstance(value, Mapping) and not isinstance(value, dict):
        return {k: _jsonish(v) for k, v in value.items()}
    return value


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}…"


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0]


def _plain(value: Any) -> Any:
    """``value`` as plain JSON data (dicts, lists, str, int, float, bool, None).

    Returns ``value`` itself when it already is. Raises TypeError for anything that is
    not JSON data.
    """
    t = type(value)
    if t is str or t is int or t is float or t is bool or value is None:
        return value
    if t is dict or isinstance(value, Mapping):
        out: dict[str, Any] = {}
        changed = t is not dict
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"object key {k!r} is not a string")
            p = _plain(v)
            changed = changed or p is not v
            out[k] = p
        return out if changed else value
    if t is list or t is tuple:
        items = [_plain(v) for v in value]
        if t is list and all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items
    if isinstance(value, int | float | str):  # subclasses such as str enums
        return value
    raise TypeError(f"{t.__name__} is not JSON data")
