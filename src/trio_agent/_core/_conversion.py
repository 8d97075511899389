"""Lenient, schema-driven conversion of tool arguments (before strict validation).

Theory of operation. Models often send ``"42"`` for an integer or ``"true"`` for a
boolean, and sometimes a whole array as a JSON string. The arguments are converted,
guided by the tool's JSON Schema, under two rules:

* only a value that cannot be valid where it stands is converted (its JSON type is not
  one the schema allows there), so arguments that already validate are never changed —
  which is what lets :func:`check_arguments` return valid arguments after one
  ``is_valid`` call, without converting at all;
* a conversion must be exact and unambiguous — pi's table, where it loses nothing:

  ==========  ===========================================================
  expected    converted from
  ==========  ===========================================================
  integer     ``"42"``, ``"42.0"``, ``"4.2e1"`` → 42; ``true``/``false`` → 1/0
  number      ``"3.5"`` → 3.5, ``"3"`` → 3; ``true``/``false`` → 1/0
  boolean     ``"true"``/``"false"`` (any case) → bool; ``1``/``0`` → true/false
  string      ``true``/``false`` → ``"true"``/``"false"``; ``42`` → ``"42"``,
              ``4.5`` → ``"4.5"`` (the number's shortest exact text)
  array       a JSON array text → the parsed array
  object      a JSON object text → the parsed object
  ==========  ===========================================================

  Never anything lossy: ``"yes"`` or ``2`` is not a boolean, ``"42.5"`` or 42.5 is not
  an integer, ``null`` is not 0, ``false`` or ``""``, a non-finite number has no text.
  Where several alternatives (``anyOf``, ``oneOf``, a ``type`` list, an untyped
  ``enum``) would take different conversions, nothing is converted.

The schema is compiled once into a graph of :class:`_Node` (one per schema object, local
``$ref``\\s linked, cycles allowed); the walk follows ``properties``,
``patternProperties``, ``additionalProperties``, ``items``/``prefixItems`` (and the
drafts 4–7 tuple form), ``allOf``/``anyOf``/``oneOf`` and ``$ref``. Conversion never
mutates its input: a container is copied only when something inside it changed, and
unchanged parts are shared.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Final
from urllib.parse import unquote

__all__ = ["Converter"]

_MISSING: Final[Any] = object()

_INTEGER_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_NUMBER_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LARGEST_EXPONENT = 400  # beyond this, an integer written as a number is not sensible

_EXACT_TYPES: Final[dict[type, str]] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
    list: "array",
    tuple: "array",
    dict: "object",
}


def json_type(value: Any) -> str | None:
    """The JSON type name of ``value``, or None when it is not JSON data."""
    name = _EXACT_TYPES.get(type(value))
    if name is not None:
        return name
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


def _admits_type(types: tuple[str, ...], actual: str | None, value: Any) -> bool:
    if actual is None or actual in types:
        return True  # (not JSON: left for validation to report)
    if actual == "integer":
        return "number" in types
    if actual == "number":
        return "integer" in types and float(value).is_integer()
    return False


def same(a: Any, b: Any) -> bool:
    """JSON equality: 1 equals 1.0, but true is not 1 and "1" is not 1."""
    if isinstance(a, bool) != isinstance(b, bool) or isinstance(a, str) != isinstance(b, str):
        return False
    try:
        return bool(a == b)
    except Exception:  # exotic values from a prepare_arguments shim
        return False


def _distinct(results: list[Any]) -> list[Any]:
    out: list[Any] = []
    for r in results:
        if not any(same(r, o) for o in out):
            out.append(r)
    return out


# --- exact conversions of one value ----------------------------------------------------


def _coerce(name: str, value: Any) -> Any:
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
            return parsed if type(parsed) is list else _MISSING
        if name == "object":
            parsed = _parse_json(value, "{")
            return parsed if type(parsed) is dict else _MISSING
        return _MISSING
    kind = json_type(value)
    if name == "string":
        if kind == "boolean":
            return "true" if value else "false"
        if kind == "integer":
            return str(int(value))
        if kind == "number" and math.isfinite(value):
            return repr(float(value))  # the shortest text that reads back as this number
        return _MISSING
    if name == "boolean" and kind in ("integer", "number") and value in (0, 1):
        return value == 1
    if name in ("integer", "number") and kind == "boolean":
        return 1 if value else 0
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


# --- the compiled schema ---------------------------------------------------------------


class _Node:
    """One schema object, with what the conversion needs from it precomputed."""

    __slots__ = (
        "all_of",
        "closed",
        "enum",
        "extra",
        "has_children",
        "never",
        "patterns",
        "prefix",
        "props",
        "ref",
        "required",
        "rest",
        "types",
        "unions",
    )

    def __init__(self) -> None:
        self.never = False  # the `false` schema
        self.ref: _Node | None = None
        self.all_of: tuple[_Node, ...] = ()
        self.unions: tuple[tuple[_Node, ...], ...] = ()
        # In schema order: where two conversions are equal (5 and 5.0), the first wins.
        self.types: tuple[str, ...] | None = None
        self.enum: tuple[Any, ...] | None = None  # enum members, or (const,)
        self.props: dict[str, _Node] = {}
        self.patterns: tuple[tuple[re.Pattern[str], _Node], ...] = ()
        self.extra: _Node | None = None  # additionalProperties as a schema
        self.closed = False  # additionalProperties: false (without patternProperties)
        self.required: tuple[str, ...] = ()
        self.prefix: tuple[_Node, ...] = ()
        self.rest: _Node | None = None
        self.has_children = False  # anything to convert inside an object or array


class _Compiler:
    def __init__(self, root: Any) -> None:
        self._root = root
        self._nodes: dict[int, _Node] = {}
        self._keep: list[Any] = []  # keeps compiled schema objects alive: ids stay unique

    def node(self, schema: Any) -> _Node:
        known = self._nodes.get(id(schema))
        if known is not None:
            return known
        node = _Node()
        # Registered before its parts are compiled, so that a $ref cycle ends here.
        self._nodes[id(schema)] = node
        self._keep.append(schema)
        if schema is False:
            node.never = True
        if not isinstance(schema, dict):
            return node
        ref = schema.get("$ref")
        if isinstance(ref, str):
            target = self._resolve(ref)
            if target is not _MISSING:
                node.ref = self.node(target)
        node.all_of = self._list(schema.get("allOf"))
        node.unions = tuple(
            branches for key in ("anyOf", "oneOf") if (branches := self._list(schema.get(key)))
        )
        types = schema.get("type")
        if isinstance(types, str):
            node.types = (types,)
        elif isinstance(types, list):
            node.types = tuple(t for t in types if isinstance(t, str))
        if isinstance(schema.get("enum"), list):
            node.enum = tuple(schema["enum"])
        elif "const" in schema:
            node.enum = (schema["const"],)
        props = schema.get("properties")
        if isinstance(props, dict):
            node.props = {k: self.node(v) for k, v in props.items()}
        patterns = schema.get("patternProperties")
        if isinstance(patterns, dict):
            node.patterns = tuple(
                (compiled, self.node(v))
                for p, v in patterns.items()
                if (compiled := _regex(p)) is not None
            )
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            node.extra = self.node(extra)
        node.closed = extra is False and not patterns
        required = schema.get("required")
        if isinstance(required, list):
            node.required = tuple(k for k in required if isinstance(k, str))
        items = schema.get("items")
        if isinstance(items, list):  # drafts 4-7: a tuple schema, then additionalItems
            node.prefix = self._list(items)
            rest = schema.get("additionalItems")
        else:
            node.prefix = self._list(schema.get("prefixItems"))
            rest = items
        if isinstance(rest, dict):
            node.rest = self.node(rest)
        node.has_children = bool(
            node.props or node.patterns or node.extra or node.prefix or node.rest
        )
        return node

    def _list(self, schemas: Any) -> tuple[_Node, ...]:
        if not isinstance(schemas, list):
            return ()
        return tuple(self.node(s) for s in schemas)

    def _resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return _MISSING  # remote: never fetched (validation reports it)
        target = self._root
        pointer = unquote(ref[1:])
        if not pointer:
            return target
        if not pointer.startswith("/"):
            return _MISSING  # an anchor ("#name"): not followed
        for token in pointer[1:].split("/"):
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and token in target:
                target = target[token]
            elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
                target = target[int(token)]
            else:
                return _MISSING
        return target


def _regex(pattern: str) -> re.Pattern[str] | None:
    # JSON Schema regexes are ECMA-262; Python's re agrees on the common subset, and a
    # pattern it cannot compile converts nothing (validation still checks it).
    try:
        return re.compile(pattern)
    except re.error:
        return None


# --- the walk --------------------------------------------------------------------------


class Converter:
    """The lenient conversion for one schema (plain JSON data), compiled once."""

    __slots__ = ("_root",)

    def __init__(self, schema: Any) -> None:
        self._root = _Compiler(schema).node(schema)

    def convert(self, value: Any) -> Any:
        """``value`` converted for the schema; ``value`` itself when nothing changed.

        Pure computation; ``value`` is never mutated.
        """
        try:
            return _convert(self._root, value, ())
        except RecursionError:
            # Nested deeper than the interpreter allows: validate it unconverted.
            return value


def _convert(node: _Node, value: Any, refs: tuple[_Node, ...]) -> Any:
    """``value`` converted for ``node``.

    ``refs`` are the ``$ref`` targets followed since the walk last went down into a child
    value: following one of them again would loop without progress.
    """
    target = node.ref
    if target is not None and target not in refs:
        value = _convert(target, value, (*refs, target))
    for sub in node.all_of:
        value = _convert(sub, value, refs)
    for branches in node.unions:
        value = _union(branches, value, refs)
    kind = json_type(value)
    if node.types is not None:
        if not _admits_type(node.types, kind, value):
            found = _distinct(
                [c for name in node.types if (c := _coerce(name, value)) is not _MISSING]
            )
            if len(found) != 1:
                return value  # impossible or ambiguous: validation reports it
            value = found[0]
            kind = json_type(value)
    elif node.enum is not None:
        value = _enum(node.enum, value)
        kind = json_type(value)
    if not node.has_children:
        return value
    if kind == "object":
        return _object(node, value)
    if kind == "array":
        return _array(node, value)
    return value


def _enum(members: tuple[Any, ...], value: Any) -> Any:
    # An untyped enum (a Literal): "1" may stand for the one member 1.
    if any(same(value, m) for m in members):
        return value
    found = []
    for m in members:
        kind = json_type(m)
        if kind is None or kind in ("array", "object"):
            continue
        c = _coerce(kind, value)
        if c is not _MISSING and same(c, m):
            found.append(m)
    found = _distinct(found)
    return found[0] if len(found) == 1 else value


def _object(node: _Node, value: Mapping[str, Any]) -> Any:
    out: dict[str, Any] | None = None
    for key, item in value.items():
        new = item
        sub = node.props.get(key)
        matched = sub is not None
        if sub is not None:
            new = _convert(sub, new, ())
        for pattern, psub in node.patterns:
            if isinstance(key, str) and pattern.search(key):
                matched = True
                new = _convert(psub, new, ())
        if not matched and node.extra is not None:
            new = _convert(node.extra, new, ())
        if new is not item and out is None:
            out = dict(value)
        if out is not None:
            out[key] = new
    return value if out is None else out


def _array(node: _Node, value: list[Any] | tuple[Any, ...]) -> Any:
    out: list[Any] | None = None
    prefix = node.prefix
    for i, item in enumerate(value):
        sub = prefix[i] if i < len(prefix) else node.rest
        if sub is None:
            break
        new = _convert(sub, item, ())
        if new is not item and out is None:
            out = list(value)
        if out is not None:
            out[i] = new
    return value if out is None else out


def _union(branches: tuple[_Node, ...], value: Any, refs: tuple[_Node, ...]) -> Any:
    admitting = [b for b in branches if _admits(b, value, refs)]
    if len(admitting) > 1:
        # Several alternatives fit the value's type; a discriminating property may still
        # say which one is meant. Otherwise nothing is converted.
        admitting = [b for b in admitting if not _excluded(b, value, refs)]
        return _convert(admitting[0], value, refs) if len(admitting) == 1 else value
    if admitting:
        return _convert(admitting[0], value, refs)
    found = []
    for branch in branches:
        new = _convert(branch, value, refs)
        if new is not value and _admits(branch, new, refs):
            found.append(new)
    found = _distinct(found)
    return found[0] if len(found) == 1 else value


def _admits(node: _Node, value: Any, refs: tuple[_Node, ...]) -> bool:
    """Whether ``value`` could be valid for ``node`` as far as types go."""
    if node.never:
        return False
    target = node.ref
    if target is not None:
        if target in refs:
            # Back where this walk started without consuming the value: this path adds
            # no alternative; the others decide.
            return False
        if not _admits(target, value, (*refs, target)):
            return False
    if node.types is not None and not _admits_type(node.types, json_type(value), value):
        return False
    if node.enum is not None and not any(same(value, m) for m in node.enum):
        return False
    if not all(_admits(sub, value, refs) for sub in node.all_of):
        return False
    return all(any(_admits(b, value, refs) for b in branches) for branches in node.unions)


def _excluded(node: _Node, value: Any, refs: tuple[_Node, ...]) -> bool:
    """Whether an object ``value`` visibly belongs to another alternative than ``node``:
    a discriminating ``const``/``enum`` property differs, a required property is
    missing, or a property is not allowed."""
    if not isinstance(value, Mapping):
        return False
    target = node.ref
    if target is not None and target not in refs:
        if _excluded(target, value, (*refs, target)):
            return True
    if any(k not in value for k in node.required):
        return True
    if node.closed and any(k not in node.props for k in value):
        return True
    for key, sub in node.props.items():
        if sub.enum is not None and key in value and not _admits(sub, value[key], ()):
            return True
    return False
