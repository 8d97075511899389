"""JSON Schema from Python types: :func:`json_schema`, and its strict form for
OpenAI-style structured output (:func:`strict_json_schema`).

Theory of operation. :func:`json_schema` walks the type itself (attrs classes,
dataclasses, ``TypedDict``, enums, ``Literal``, unions, ``Optional``, lists, tuples,
sets, ``dict[str, X]``, primitives); each named class becomes one ``$defs`` entry
referenced by ``$ref``, and the top-level class is inlined at the root when nothing else
refers to it; a type written as a string (dates, UUIDs, decimals, bytes...) takes its
schema from the one table in ``_formats`` that the converter reads too. The walk is ours
rather than ``msgspec.json.schema`` (which the ``@tool`` decorator uses for parameters)
for two reasons: msgspec refuses a union of two attrs
classes or dataclasses, which structured output must describe (a tagged union), and it
ignores attrs field metadata, where field descriptions live. The schema is built to
match what :data:`output_converter` (one strict cattrs converter) accepts: field names
as cattrs reads them, a union of classes tagged by a ``"type"`` property holding the
class name, enums by value — so a value that validates against the schema structures.

:func:`strict_json_schema` rewrites a schema into what OpenAI's strict mode accepts:
every object closed (``additionalProperties: false``) with every property required, the
optional ones made nullable, and the keywords strict mode does not support dropped (a
``format`` outside its list, ``contentEncoding``: noted in the description instead).
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import inspect
import json
import types
import typing
from collections.abc import Mapping, MutableSequence, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Final, Literal

import attrs

from ._docstrings import ATTRIBUTE_SECTIONS, parse_docstring
from ._formats import string_format_of

__all__ = ["TAG", "drop_strict_nulls", "json_schema", "strict_json_schema", "tagged_unions"]

TAG: Final = "type"
"""The property that tags each member of a union of classes: its class name."""

_PRIMITIVES: Final[dict[Any, dict[str, Any]]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    None: {"type": "null"},
}


def json_schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema of ``tp``, as plain JSON data (dicts, lists, strings...).

    Handled: ``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``; ``list[X]``,
    ``Sequence[X]``, ``tuple[X, ...]``, ``tuple[X, Y]`` (``prefixItems``), ``set[X]``
    and ``frozenset[X]`` (``uniqueItems``); ``dict[str, X]`` and ``Mapping[str, X]``;
    ``Literal[...]``; enums (by value); ``X | None`` and other unions;
    ``Annotated[X, ...]`` (as ``X``); ``NewType``; attrs classes, dataclasses and
    ``TypedDict`` s, nested at any depth and recursive.

    Values written as JSON strings (read and written so by the structured-output
    converter):

    - ``datetime.datetime``: ``{"type": "string", "format": "date-time"}`` (ISO 8601,
      with an offset or without: a naive value stays naive);
    - ``datetime.date``: ``"format": "date"``; ``datetime.time``: ``"format": "time"``;
    - ``datetime.timedelta``: ``"format": "duration"`` (ISO 8601: ``P1DT2H30M``,
      ``-PT1.5S``; years and months are refused);
    - ``uuid.UUID``: ``"format": "uuid"``;
    - ``decimal.Decimal``: a string with a decimal-number ``pattern`` (``"-12.50"``,
      ``"1.5e3"``), exact, never a JSON number (finite values only);
    - ``bytes``: ``"contentEncoding": "base64"`` (standard base64);
    - ``pathlib.Path`` and ``PurePath``: ``"format": "path"`` (not checked).

    A class becomes an object schema under ``$defs`` (its name as ``title``, the summary
    of its docstring as ``description``); its fields are the properties, named as the
    attribute is (cattrs' rule), required when they have no default, with their
    default (when it is JSON data) and a ``description`` taken from the field's metadata
    (``attrs.field(metadata={"description": ...})``, or the dataclass field's) or else
    from the class docstring's ``Attributes:`` section. A ``TypedDict`` 's required keys
    are its required properties. A union of two or more classes is tagged: each member
    gets a required ``"type"`` property holding its class name (``{"type": "Cat", ...}``).

    The class ``tp`` itself is inlined at the root (with ``$defs`` for the classes it
    uses) unless it refers to itself.

    Raises:
        TypeError: a type with no JSON Schema here (a plain class, ``complex``, a
            dict with non-``str`` keys...), or a class in a tagged union with
            a field named ``type``; the message names the type.
    """
    walker = _Walker()
    root = walker.schema(tp)
    defs = walker.defs
    ref = root.get("$ref")
    if ref is not None and len(root) == 1:
        # The root class inline; its definition stays only if it refers to itself.
        name = ref.rsplit("/", 1)[-1]
        root = dict(defs[name]) if name in walker.referenced_inside else defs.pop(name)
    if defs:
        root = {**root, "$defs": defs}
    return root


def tagged_unions(tp: Any) -> list[Any]:
    """The unions of two or more classes inside ``tp`` (each is tagged: see
    :func:`json_schema`), for the converter to configure."""
    walker = _Walker()
    walker.schema(tp)
    return walker.unions


class _Walker:
    def __init__(self) -> None:
        self.defs: dict[str, dict[str, Any]] = {}
        self.names: dict[Any, str] = {}
        self.referenced_inside: set[str] = set()
        self.unions: list[Any] = []
        self.depth = 0

    def schema(self, tp: Any) -> dict[str, Any]:
        self.depth += 1
        try:
            return self._schema(tp)
        finally:
            self.depth -= 1

    def _schema(self, tp: Any) -> dict[str, Any]:
        if tp in _PRIMITIVES:
            return dict(_PRIMITIVES[tp])
        if tp is Any or tp is object:
            return {}
        written = string_format_of(tp)
        if written is not None:
            return dict(written.schema)
        supertype = getattr(tp, "__supertype__", None)
        if supertype is not None:  # NewType
            return self.schema(supertype)
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is typing.Annotated:
            return self.schema(args[0])
        if origin in (typing.Required, typing.NotRequired):
            return self.schema(args[0])
        if origin is Literal:
            values = list(args)
            for v in values:
                if not isinstance(v, str | int | bool) and v is not None:
                    raise TypeError(f"no JSON Schema for Literal value {v!r} in {tp!r}")
            return {"const": values[0]} if len(values) == 1 else {"enum": values}
        if origin in (typing.Union, types.UnionType):
            return self._union(tp, args)
        if origin in (list, Sequence, MutableSequence) or (origin is tuple and _homogeneous(args)):
            item = args[0] if args else Any
            return {"type": "array", "items": self.schema(item)}
        if origin is tuple:
            items = [self.schema(a) for a in args]
            return {
                "type": "array",
                "prefixItems": items,
                "minItems": len(items),
                "maxItems": len(items),
            }
        if origin in (set, frozenset, AbstractSet):
            item = args[0] if args else Any
            return {"type": "array", "items": self.schema(item), "uniqueItems": True}
        if origin in (dict, Mapping):
            key, value = args if args else (str, Any)
            if key is not str:
                raise TypeError(f"no JSON Schema for {tp!r}: JSON object keys are strings")
            return {"type": "object", "additionalProperties": self.schema(value)}
        if tp in (list, tuple, set, frozenset):
            return {"type": "array"}
        if tp is dict:
            return {"type": "object"}
        if isinstance(tp, type):
            if issubclass(tp, enum.Enum) or _is_class(tp):
                return {"$ref": f"#/$defs/{self._define(tp)}"}
        raise TypeError(f"no JSON Schema for {tp!r}")

    def _union(self, tp: Any, args: tuple[Any, ...]) -> dict[str, Any]:
        classes = [a for a in args if isinstance(a, type) and _is_class(a)]
        tagged = len(classes) >= 2
        if tagged and tp not in self.unions:
            self.unions.append(tp)
        options: list[dict[str, Any]] = []
        for arg in args:
            if tagged and arg in classes:
                options.append(self._tagged(arg))
            else:
                options.append(self.schema(arg))
        return {"anyOf": options}

    def _tagged(self, cls: type) -> dict[str, Any]:
        """A class as a member of a tagged union: its object schema, inline, plus the
        tag (no ``allOf``: strict mode does not take it)."""
        base = self.defs[self._define(cls)]
        props = base.get("properties", {})
        if TAG in props:
            raise TypeError(
                f"{cls.__qualname__} is in a union of classes, tagged by a {TAG!r} property,"
                f" so it cannot have a field named {TAG!r}"
            )
        out = {k: v for k, v in base.items() if k not in ("properties", "required")}
        out["properties"] = {TAG: {"const": cls.__name__}, **copy.deepcopy(props)}
        out["required"] = [TAG, *base.get("required", ())]
        return out

    def _define(self, cls: type) -> str:
        name = self.names.get(cls)
        if name is not None:
            if self.depth > 1:
                self.referenced_inside.add(name)
            return name
        name = cls.__name__
        n = 2
        while name in self.defs:
            name = f"{cls.__name__}{n}"
            n += 1
        self.names[cls] = name
        self.defs[name] = {}  # reserved: a recursive field refers to it
        summary, field_docs = parse_docstring(inspect.getdoc(cls), sections=ATTRIBUTE_SECTIONS)
        if cls.__doc__ is None or _inherited_doc(cls):
            summary, field_docs = "", {}
        out: dict[str, Any] = {"title": cls.__name__}
        if summary:
            out["description"] = summary
        if issubclass(cls, enum.Enum):
            values = [m.value for m in cls]
            for v in values:
                if not isinstance(v, str | int) or isinstance(v, bool):
                    raise TypeError(f"no JSON Schema for enum {cls.__qualname__}: value {v!r}")
            out["enum"] = values
        else:
            out.update(self._object(cls, field_docs))
        self.defs[name] = out
        return name

    def _object(self, cls: type, docs: dict[str, str]) -> dict[str, Any]:
        try:
            hints = typing.get_type_hints(cls, include_extras=True)
        except NameError as exc:
            raise TypeError(f"cannot resolve the annotations of {cls.__qualname__}: {exc}") from exc
        properties: dict[str, Any] = {}
        required: list[str] = []
        for name, default, description in _fields(cls, hints):
            prop = self.schema(hints[name])
            if default is not _NO_DEFAULT:
                jsonable = _jsonable_default(default)
                if jsonable is not _NO_DEFAULT:
                    prop["default"] = jsonable
            elif not _optional_key(cls, name):
                required.append(name)
            description = description or docs.get(name)
            if description:
                prop = {"description": description, **prop}
            properties[name] = prop
        out: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            out["required"] = required
        return out


_NO_DEFAULT: Final = object()


def _fields(cls: type, hints: dict[str, Any]) -> list[tuple[str, Any, str | None]]:
    """(name, default or _NO_DEFAULT, description from metadata) per field."""
    if attrs.has(cls):
        out = []
        for a in attrs.fields(cls):
            if not a.init:
                continue
            default: Any = _NO_DEFAULT
            if isinstance(a.default, attrs.Factory):  # type: ignore[arg-type]
                default = _FACTORY
            elif a.default is not attrs.NOTHING:
                default = a.default
            out.append((a.name, default, _description(a.metadata)))
        return out
    if dataclasses.is_dataclass(cls):
        out = []
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = _FACTORY
            else:
                default = _NO_DEFAULT
            out.append((f.name, default, _description(f.metadata)))
        return out
    # A TypedDict: no defaults; optional keys are not required.
    return [(name, _NO_DEFAULT, None) for name in hints]


_FACTORY: Final = object()
"""A default made by a factory: the field is optional, its default is not shown."""


def _optional_key(cls: type, name: str) -> bool:
    """Whether ``name`` is a key a ``TypedDict`` may leave out, as Python (and so the
    converter) says. Before Python 3.12 a ``TypedDict`` defined under ``from __future__
    import annotations`` counts its ``NotRequired`` keys as required; the functional
    form (``TypedDict("T", {...})``) does not have that problem."""
    return name in getattr(cls, "__optional_keys__", frozenset())


def _description(metadata: Mapping[Any, Any]) -> str | None:
    value = metadata.get("description")
    return value if isinstance(value, str) else None


def _jsonable_default(value: Any) -> Any:
    if value is _FACTORY:
        return _NO_DEFAULT
    if isinstance(value, enum.Enum):
        value = value.value
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return _NO_DEFAULT


def _is_class(tp: type) -> bool:
    return attrs.has(tp) or dataclasses.is_dataclass(tp) or typing.is_typeddict(tp)


def _homogeneous(args: tuple[Any, ...]) -> bool:
    return not args or (len(args) == 2 and args[1] is Ellipsis)


def _inherited_doc(cls: type) -> bool:
    # dataclasses give a class without a docstring one like "Point(x: int, y: int)".
    doc = cls.__doc__ or ""
    return dataclasses.is_dataclass(cls) and doc.startswith(f"{cls.__name__}(")


# --- strict mode ---------------------------------------------------------------------

_STRICT_UNSUPPORTED: Final = frozenset(
    {
        "default",
        "uniqueItems",
        "prefixItems",
        "contains",
        "minContains",
        "maxContains",
        "unevaluatedItems",
        "unevaluatedProperties",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "examples",
        "contentEncoding",
        "contentMediaType",
    }
)
"""Keywords OpenAI's strict mode refuses (or did refuse), or does not list: dropped.
They only narrow what is valid; the value is still validated against the full schema
afterwards."""

_STRICT_FORMATS: Final = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
"""The string formats OpenAI's strict mode supports; any other ``format`` is dropped."""


def strict_json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` rewritten to satisfy OpenAI's strict structured-output rules.

    Every object gets ``additionalProperties: false`` and lists all its properties in
    ``required``; a property that was optional becomes nullable (``anyOf`` with
    ``{"type": "null"}``), so a model answering in strict mode sends ``null`` for it
    (structured output drops those again, so that the field's default applies). Keywords strict mode
    does not support (``default``, ``uniqueItems``, ``prefixItems``, ``minLength``,
    ``contentEncoding``...) are dropped, and so is a ``format`` other than the ones it
    supports (``date-time``, ``time``, ``date``, ``duration``, ``email``, ``hostname``,
    ``ipv4``, ``ipv6``, ``uuid``): a dropped ``format`` or ``contentEncoding`` is noted
    in the description instead (``(contentEncoding: base64)``), and a tuple's
    ``prefixItems`` become ``items`` any member may match. The root must be an object.

    Returns a new schema; ``schema`` is not changed.

    Raises:
        ValueError: the schema cannot be made strict: its root is not an object, or an
            object has free-form properties (``dict[str, X]``, ``additionalProperties``
            other than false).
    """
    out = copy.deepcopy(dict(schema))
    if out.get("type") != "object":
        raise ValueError("strict mode needs an object at the root of the schema")
    _strict(out, "#")
    return out


def _strict(node: Any, where: str) -> None:
    if isinstance(node, list):
        for i, item in enumerate(node):
            _strict(item, f"{where}/{i}")
        return
    if not isinstance(node, dict):
        return
    _drop_unsupported(node)
    extra = node.get("additionalProperties")
    if extra not in (None, False):
        raise ValueError(f"strict mode cannot describe free-form properties (at {where})")
    props = node.get("properties")
    if node.get("type") == "object" or props is not None:
        if props is None:
            raise ValueError(f"strict mode cannot describe a free-form object (at {where})")
        required = set(node.get("required", ()))
        for name, prop in props.items():
            if name not in required:
                props[name] = _nullable(prop)
        node["required"] = list(props)
        node["additionalProperties"] = False
    for key, value in node.items():
        if key in ("properties", "$defs"):
            for name, sub in value.items():
                _strict(sub, f"{where}/{key}/{name}")
        elif key in ("items", "anyOf"):
            _strict(value, f"{where}/{key}")


def _drop_unsupported(node: dict[str, Any]) -> None:
    """Drop what strict mode does not take from one schema node. A tuple's
    ``prefixItems`` become ``items`` any of its members may match (strict mode wants an
    array's items typed); a dropped hint a model needs to write the value right (a
    ``format`` strict mode lacks, a ``contentEncoding``) is kept in the description."""
    prefix = node.get("prefixItems")
    if isinstance(prefix, list) and "items" not in node and prefix:
        members: list[Any] = []
        for member in prefix:
            if member not in members:
                members.append(member)
        node["items"] = members[0] if len(members) == 1 else {"anyOf": members}
    hints = [f"{key}: {node[key]}" for key in ("contentEncoding",) if key in node]
    fmt = node.get("format")
    if fmt is not None and fmt not in _STRICT_FORMATS:
        del node["format"]
        hints.append(f"format: {fmt}")
    for key in _STRICT_UNSUPPORTED & node.keys():
        del node[key]
    if hints:
        said = node.get("description")
        note = f"({', '.join(hints)})"
        node["description"] = f"{said} {note}" if isinstance(said, str) and said else note


def _nullable(prop: Any) -> dict[str, Any]:
    if not isinstance(prop, dict):
        return {"anyOf": [prop, {"type": "null"}]}
    if _allows_null(prop):
        return prop
    if "anyOf" in prop and len(prop) == 1:
        return {"anyOf": [*prop["anyOf"], {"type": "null"}]}
    description = prop.get("description")
    inner = {k: v for k, v in prop.items() if k != "description"}
    out: dict[str, Any] = {"anyOf": [inner, {"type": "null"}]}
    if description is not None:
        out = {"description": description, **out}
    return out


def _allows_null(prop: Mapping[str, Any]) -> bool:
    t = prop.get("type")
    if t == "null" or (isinstance(t, list) and "null" in t):
        return True
    return any(isinstance(o, dict) and o.get("type") == "null" for o in prop.get("anyOf", ()))


def drop_strict_nulls(value: Any, schema: Mapping[str, Any]) -> Any:
    """``value`` (an answer to :func:`strict_json_schema` of ``schema``) with every
    ``null`` that strict mode put in place of an optional property removed, so that the
    property's default applies: a ``null`` is dropped where ``schema`` has the property
    optional and not nullable. Returns ``value`` itself when nothing was dropped."""
    return _undo(value, schema, schema.get("$defs", {}))


def _resolve(node: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _resolve(defs.get(ref[len("#/$defs/") :], {}), defs)
    return node


def _undo(value: Any, node: Mapping[str, Any], defs: Mapping[str, Any]) -> Any:
    node = _resolve(node, defs)
    if isinstance(value, list):
        items = node.get("items")
        if not isinstance(items, dict):
            return value
        new = [_undo(v, items, defs) for v in value]
        return value if all(a is b for a, b in zip(new, value, strict=True)) else new
    if not isinstance(value, dict):
        return value
    if "anyOf" in node:
        member = _member(value, node["anyOf"], defs)
        return value if member is None else _undo(value, member, defs)
    props: Mapping[str, Any] = node.get("properties", {})
    required = set(node.get("required", ()))
    if not props:
        return value
    out: dict[str, Any] = {}
    changed = False
    for key, item in value.items():
        prop = props.get(key)
        if prop is None:
            out[key] = item
            continue
        prop = _resolve(prop, defs)
        if item is None and key not in required and not _allows_null(prop):
            changed = True
            continue
        new = _undo(item, prop, defs)
        changed = changed or new is not item
        out[key] = new
    return out if changed else value


def _member(
    value: dict[str, Any], options: Sequence[Any], defs: Mapping[str, Any]
) -> Mapping[str, Any] | None:
    """The object member of a union that ``value`` belongs to: by its tag, else the
    only object member."""
    objects: list[Mapping[str, Any]] = [
        o for o in options if _resolve(o, defs).get("type") == "object"
    ]
    tag = value.get(TAG)
    for option in objects:
        const = _resolve(option, defs).get("properties", {}).get(TAG, {}).get("const")
        if const is not None and const == tag:
            return option
    return objects[0] if len(objects) == 1 else None
