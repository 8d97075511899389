"""Tool arguments: schema-driven lenient conversion, then strict validation.

``check_arguments(tool, raw)`` returns the arguments to pass to ``tool.execute`` or raises
:class:`InvalidArguments` whose ``text`` is the error result, in pi's format::

    Validation failed for tool "<name>":
      - <path>: <message>

    Received arguments:
    {...}

Theory of operation. Models often send ``"42"`` for an integer or ``"true"`` for a
boolean, and sometimes a whole array as a JSON string. Before strict validation the
arguments are converted, guided by the tool's JSON Schema, under two rules:

* only a value that cannot be valid where it stands is converted (its JSON type is not
  one the schema allows there), so arguments that already validate are never changed —
  which is also why valid arguments can take the fast path (one ``is_valid`` call) and
  skip conversion altogether;
* a conversion must be exact and unambiguous: ``"42"`` → 42, ``"3.5"`` → 3.5,
  ``"true"``/``"false"`` → bool, ``42`` → ``"42"`` for a string, a JSON array/object
  text → the parsed value; never ``"yes"`` → bool, ``"42.5"`` → integer, ``null`` → 0 or
  ``""``. Where several alternatives (``anyOf``, ``oneOf``, a ``type`` list) would
  accept different conversions, nothing is converted.

The walk follows ``properties``, ``patternProperties``, ``additionalProperties``,
``items``/``prefixItems``, ``allOf``/``anyOf``/``oneOf`` and local ``$ref``\\s (``#/...``).
Validation uses jsonschema-rs with every error collected; the compiled validator is cached
per :class:`Tool` (tools are hashed by identity) and never fetches a remote ``$ref``.
"""

from __future__ import annotations

import json
import re
import weakref
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote

import jsonschema_rs

if TYPE_CHECKING:
    from ._tools import Tool

__all__ = ["InvalidArguments", "check_arguments", "compile_parameters", "convert_arguments"]

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
    """A tool's schema as plain JSON data, with its validator (or why it has none)."""

    __slots__ = ("converter", "problem", "validator")

    def __init__(self, parameters: Mapping[str, Any]) -> None:
        self.validator: jsonschema_rs.Validator | None = None
        self.problem: str | None = None
        schema = _plain(parameters)
        self.converter = _Converter(schema)
        try:
            # offline: a remote $ref is an error here, never a network request at run time.
            self.validator = jsonschema_rs.validator_for(
                schema, validate_formats=True, offline=True
            )
        except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as exc:
            self.problem = _first_line(str(exc))


_compiled: weakref.WeakKeyDictionary[Tool, _Compiled] = weakref.WeakKeyDictionary()


def _compiled_for(tool: Tool) -> _Compiled:
    try:
        return _compiled[tool]
    except KeyError:
        pass
    compiled = _Compiled(tool.parameters)
    _compiled[tool] = compiled
    return compiled


def compile_parameters(tool: Tool) -> None:
    """Compile and cache ``tool``'s validator now rather than on its first call.

    Raises:
        ValueError: the schema is not a valid JSON Schema, or has a ``$ref`` that cannot
            be resolved locally.
    """
    problem = _compiled_for(tool).problem
    if problem is not None:
        raise ValueError(f'invalid parameters schema for tool "{tool.name}": {problem}')


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
    validator = compiled.validator
    if validator is None:
        raise InvalidArguments(
            f'Tool "{tool.name}" has an invalid parameters schema: {compiled.problem}'
        )
    try:
        if validator.is_valid(raw):
            return raw
    except ValueError:
        # Not plain JSON data (a non-dict mapping, a set...): the slow path copies it.
        pass
    candidate = compiled.converter.convert_root(raw)
    try:
        plain: Mapping[str, Any] = _plain(candidate)
    except TypeError as exc:
        raise InvalidArguments(
            _failure(tool.name, [f"  - root: arguments are not JSON data ({exc})"], raw)
        ) from None
    errors = list(validator.iter_errors(plain))
    if not errors:
        return plain
    raise InvalidArguments(_failure(tool.name, _error_lines(errors), raw))


def convert_arguments(schema: Mapping[str, Any], raw: Any) -> Any:
    """The lenient conversion alone (without validation), for one schema.

    Returns ``raw`` itself when nothing needed converting. Not cached: for repeated use,
    go through :func:`check_arguments`, which keeps the prepared schema per tool.
    """
    return _Converter(_plain(schema)).convert_root(raw)


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


def _failure(name: str, lines: list[str], raw: Any) -> str:
    head = f'Validation failed for tool "{name}":'
    return "\n".join([head, *lines, "", "Received arguments:", _echo(raw)])


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
            if type(k) is not str:
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


# --- conversion ------------------------------------------------------------------------

_MISSING: Final[Any] = object()

_INTEGER_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_NUMBER_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LARGEST_EXPONENT = 400  # beyond this a "number" cannot be an exact, sensible integer


def _json_type(value: Any) -> str | None:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return None


def _admits_type(name: Any, value: Any) -> bool:
    """Whether JSON Schema type ``name`` accepts ``value``'s type."""
    actual = _json_type(value)
    if actual is None:
        return True  # not JSON: leave it to validation to report
    if name == actual:
        return True
    if name == "number":
        return actual == "integer"
    if name == "integer":
        return actual == "number" and float(value).is_integer()
    return False


def _same(a: Any, b: Any) -> bool:
    """JSON equality: 1 equals 1.0, but true is not 1 and "1" is not 1."""
    if isinstance(a, bool) != isinstance(b, bool) or isinstance(a, str) != isinstance(b, str):
        return False
    try:
        return bool(a == b)
    except Exception:  # exotic values from a prepare_arguments shim
        return False


def _parse_json(text: str, opening: str) -> Any:
    stripped = text.strip()
    if not stripped.startswith(opening):
        return _MISSING
    try:
        return json.loads(stripped, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return _MISSING


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _coerce(name: Any, value: Any) -> Any:
    """``value`` converted exactly to JSON type ``name``, or ``_MISSING``."""
    if isinstance(value, str):
        if name == "integer":
            return _text_to_integer(value.strip())
        if name == "number":
            return _text_to_number(value.strip())
        if name == "boolean":
            word = value.strip().lower()
            return True if word == "true" else False if word == "false" else _MISSING
        if name == "array":
            parsed = _parse_json(value, "[")
            return parsed if isinstance(parsed, list) else _MISSING
        if name == "object":
            parsed = _parse_json(value, "{")
            return parsed if isinstance(parsed, dict) else _MISSING
        return _MISSING
    if name == "string" and type(value) is int:
        return str(value)
    return _MISSING


def _text_to_integer(text: str) -> Any:
    try:
        if _INTEGER_TEXT.fullmatch(text):
            return int(text)
        if _NUMBER_TEXT.fullmatch(text):
            # "42.0" and "4.2e1" are exactly 42; "42.5" is not an integer.
            number = Decimal(text)
            if abs(number.adjusted()) <= _LARGEST_EXPONENT and number == number.to_integral():
                return int(number)
    except (ValueError, InvalidOperation):  # over int's digit limit
        pass
    return _MISSING


def _text_to_number(text: str) -> Any:
    if not _NUMBER_TEXT.fullmatch(text):
        return _MISSING
    if _INTEGER_TEXT.fullmatch(text):
        return _text_to_integer(text)
    number = float(text)
    if number in (float("inf"), float("-inf")):
        return _MISSING
    return number


def _distinct(results: list[Any]) -> list[Any]:
    out: list[Any] = []
    for r in results:
        if not any(_same(r, o) for o in out):
            out.append(r)
    return out


class _Converter:
    """The lenient conversion for one (plain JSON) schema."""

    __slots__ = ("_root",)

    def __init__(self, root: Any) -> None:
        self._root = root

    def convert_root(self, value: Any) -> Any:
        try:
            return self.convert(self._root, value, frozenset())
        except RecursionError:
            # A value nested deeper than the interpreter allows: validate it unconverted.
            return value

    # Schema navigation

    def _resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return _MISSING  # remote: never fetched; validation reports it
        node = self._root
        pointer = unquote(ref[1:])
        if not pointer:
            return node
        if not pointer.startswith("/"):
            return _MISSING  # an anchor ("#name"): not followed
        for token in pointer[1:].split("/"):
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                return _MISSING
        return node

    def _follow(self, schema: Any, refs: frozenset[str]) -> tuple[Any, frozenset[str]]:
        """``schema``'s ``$ref`` target (chains followed), or ``_MISSING``."""
        ref = schema.get("$ref")
        if not isinstance(ref, str) or ref in refs:
            return _MISSING, refs
        return self._resolve(ref), refs | {ref}

    # The walk

    def convert(self, schema: Any, value: Any, refs: frozenset[str]) -> Any:
        """``value`` converted for ``schema`` (``value`` itself if nothing changed).

        ``refs`` are the ``$ref``\\s followed since the walk last descended into a child
        value; following one again would loop without progress.
        """
        if not isinstance(schema, dict):
            return value  # a boolean schema, or garbage the validator will report
        target, seen = self._follow(schema, refs)
        if target is not _MISSING:
            value = self.convert(target, value, seen)
        for sub in schema.get("allOf") or ():
            value = self.convert(sub, value, refs)
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                value = self._union(branches, value, refs)
        types = schema.get("type")
        if types is not None:
            names = types if isinstance(types, list) else [types]
            if not any(_admits_type(n, value) for n in names):
                found = _distinct([c for n in names if (c := _coerce(n, value)) is not _MISSING])
                if len(found) != 1:
                    return value  # impossible or ambiguous: validation reports it
                value = found[0]
        elif "enum" in schema or "const" in schema:
            value = self._enum(schema, value)
        return self._children(schema, value)

    def _enum(self, schema: dict[str, Any], value: Any) -> Any:
        # An untyped enum (a Literal): "1" may stand for the one member 1.
        members = schema["enum"] if "enum" in schema else [schema["const"]]
        if not isinstance(members, list) or any(_same(value, m) for m in members):
            return value
        found = _distinct(
            [
                m
                for m in members
                if not isinstance(m, list | dict)
                and (c := _coerce(_json_type(m), value)) is not _MISSING
                and _same(c, m)
            ]
        )
        return found[0] if len(found) == 1 else value

    def _children(self, schema: dict[str, Any], value: Any) -> Any:
        if isinstance(value, Mapping):
            return self._object(schema, value)
        if isinstance(value, list | tuple):
            return self._array(schema, value)
        return value

    def _object(self, schema: dict[str, Any], value: Mapping[str, Any]) -> Any:
        props = schema.get("properties")
        patterns = schema.get("patternProperties")
        extra = schema.get("additionalProperties")
        if not isinstance(props, dict):
            props = {}
        if not isinstance(patterns, dict):
            patterns = {}
        if not isinstance(extra, dict):
            extra = None
        if not (props or patterns or extra):
            return value
        out: dict[str, Any] | None = None
        for key, item in value.items():
            new = item
            sub = props.get(key, _MISSING)
            matched = sub is not _MISSING
            if matched:
                new = self.convert(sub, new, frozenset())
            for pattern, psub in patterns.items():
                if isinstance(key, str) and _search(pattern, key):
                    matched = True
                    new = self.convert(psub, new, frozenset())
            if not matched and extra is not None:
                new = self.convert(extra, new, frozenset())
            if new is not item and out is None:
                out = dict(value)
            if out is not None:
                out[key] = new
        return value if out is None else out

    def _array(self, schema: dict[str, Any], value: list[Any] | tuple[Any, ...]) -> Any:
        items = schema.get("items")
        prefix: Any
        rest: Any
        if isinstance(items, list):  # drafts 4-7: a tuple schema, then additionalItems
            prefix, rest = items, schema.get("additionalItems")
        else:
            prefix, rest = schema.get("prefixItems"), items
        if not isinstance(prefix, list):
            prefix = []
        if not isinstance(rest, dict):
            rest = None
        if not prefix and rest is None:
            return value
        out: list[Any] | None = None
        for i, item in enumerate(value):
            sub = prefix[i] if i < len(prefix) else rest
            if sub is None:
                break
            new = self.convert(sub, item, frozenset())
            if new is not item and out is None:
                out = list(value)
            if out is not None:
                out[i] = new
        return value if out is None else out

    # Alternatives

    def _union(self, branches: list[Any], value: Any, refs: frozenset[str]) -> Any:
        admitting = [b for b in branches if self._admits(b, value, refs)]
        if len(admitting) > 1:
            # Several alternatives fit the value's type; a discriminating property may
            # still say which one is meant. Otherwise nothing is converted.
            admitting = [b for b in admitting if not self._excluded(b, value, refs)]
            return self.convert(admitting[0], value, refs) if len(admitting) == 1 else value
        if admitting:
            return self.convert(admitting[0], value, refs)
        found = []
        for branch in branches:
            new = self.convert(branch, value, refs)
            if new is not value and self._admits(branch, new, refs):
                found.append(new)
        found = _distinct(found)
        return found[0] if len(found) == 1 else value

    def _admits(self, schema: Any, value: Any, refs: frozenset[str]) -> bool:
        """Whether ``value`` could be valid for ``schema`` as far as types go."""
        if schema is False:
            return False
        if not isinstance(schema, dict):
            return True
        ref = schema.get("$ref")
        if isinstance(ref, str):
            if ref in refs:
                # Back where this walk started without consuming the value: this path
                # adds no alternative; the others decide.
                return False
            target = self._resolve(ref)
            if target is not _MISSING and not self._admits(target, value, refs | {ref}):
                return False
        types = schema.get("type")
        if types is not None:
            names = types if isinstance(types, list) else [types]
            if not any(_admits_type(n, value) for n in names):
                return False
        if "const" in schema and not _same(value, schema["const"]):
            return False
        members = schema.get("enum")
        if isinstance(members, list) and not any(_same(value, m) for m in members):
            return False
        if not all(self._admits(s, value, refs) for s in schema.get("allOf") or ()):
            return False
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                if not any(self._admits(b, value, refs) for b in branches):
                    return False
        return True

    def _excluded(self, schema: Any, value: Any, refs: frozenset[str]) -> bool:
        """Whether an object ``value`` visibly belongs to another alternative than
        ``schema``: a discriminating ``const``/``enum`` property differs, a required
        property is missing, or a property is not allowed."""
        if not isinstance(schema, dict) or not isinstance(value, Mapping):
            return False
        target, seen = self._follow(schema, refs)
        if target is not _MISSING and self._excluded(target, value, seen):
            return True
        required = schema.get("required")
        if isinstance(required, list) and any(k not in value for k in required):
            return True
        props = schema.get("properties")
        if not isinstance(props, dict):
            props = {}
        if schema.get("additionalProperties") is False and not schema.get("patternProperties"):
            if any(k not in props for k in value):
                return True
        for key, sub in props.items():
            if key in value and isinstance(sub, dict) and ("const" in sub or "enum" in sub):
                if not self._admits(sub, value[key], frozenset()):
                    return True
        return False


_patterns: dict[str, re.Pattern[str] | None] = {}


def _search(pattern: str, key: str) -> bool:
    # JSON Schema regexes are ECMA-262; Python's re agrees on the common subset, and a
    # pattern it cannot compile simply converts nothing.
    compiled = _patterns.get(pattern, _MISSING)
    if compiled is _MISSING:
        try:
            compiled = re.compile(pattern)
        except re.error:
            compiled = None
        if len(_patterns) < 1024:
            _patterns[pattern] = compiled
    return compiled is not None and compiled.search(key) is not None
