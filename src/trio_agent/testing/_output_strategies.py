"""Hypothesis strategies: output types built while the test runs, and values of them.

Theory of operation
-------------------
:func:`output_types` draws a type from a small grammar and builds it for real: an attrs
class, a dataclass or a ``TypedDict`` with random field names, each field's type drawn
from ``int``, ``float``, ``str``, ``bool``, ``X | None``, ``list[X]``, ``Literal[...]``,
an enum built on the spot, or another generated class (to a bounded depth); some fields
have a default (a factory for a list or a class), which in a ``TypedDict`` is a key that
may be left out. Fields with a default come after the others, as Python requires.

Each draw is an :class:`OutputShape`: the type (``tp``), a strategy of its values
(``values``: a value leaves a defaulted field out now and then, so the default is used)
and, per field, what it holds — so that a test can corrupt a value where it knows the
path (:func:`corruption_sites`): the places a required field can be removed from, and
the places a value can be replaced by one of a wrong JSON type.

Values are JSON-safe: finite floats, text without surrogates. Shrinking goes toward a
class of one ``int`` field.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import keyword
import string
import typing
from typing import Any, Final, Literal, NotRequired, TypedDict

import attrs
from hypothesis import strategies as st

__all__ = [
    "FieldShape",
    "OutputShape",
    "corruption_sites",
    "output_types",
]

Kind = Literal[
    "int", "float", "str", "bool", "optional", "list", "literal", "enum", "class", "union"
]


@attrs.frozen(eq=False)
class OutputShape:
    """A generated type and what a test needs to know about it.

    Attributes:
        tp: the type (for a class: the class itself).
        values: a strategy of its values.
        kind: what it is (``int``, ..., ``optional``, ``list``, ``literal``, ``enum``,
            ``class``, ``union``: of classes, tagged by a ``"type"`` property).
        item: the type inside an ``optional`` or a ``list``.
        members: a ``union`` 's classes.
        fields: a ``class`` 's fields, in declaration order.
        flavour: a ``class`` 's flavour: ``attrs``, ``dataclass`` or ``typeddict``.
    """

    tp: Any
    values: st.SearchStrategy[Any] = attrs.field(repr=False)
    kind: Kind
    item: OutputShape | None = None
    fields: tuple[FieldShape, ...] = ()
    flavour: str = ""
    members: tuple[OutputShape, ...] = ()


@attrs.frozen(eq=False)
class FieldShape:
    """A field of a generated class.

    Attributes:
        name: its name (the JSON property).
        shape: its type.
        required: whether the JSON must hold it (no default; a required key).
    """

    name: str
    shape: OutputShape
    required: bool


_TAG: Final = "type"
_SCALARS: Final[dict[str, tuple[Any, st.SearchStrategy[Any]]]] = {
    "int": (int, st.integers()),
    "float": (float, st.floats(allow_nan=False, allow_infinity=False)),
    "str": (str, st.text(max_size=8)),
    "bool": (bool, st.booleans()),
}

_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True).filter(
    # "type" is the tag of a union of classes, which no member may have as a field.
    lambda n: not keyword.iskeyword(n) and n not in ("self", _TAG)
)
_CLASS_NAMES = st.from_regex(r"[A-Z][a-z]{0,6}", fullmatch=True)
_WORDS = st.text(string.ascii_lowercase, min_size=1, max_size=5)
# Called with names known only at run time (type checkers expect literals).
_ENUM: Final[Any] = enum.Enum
_TYPED_DICT: Final[Any] = TypedDict


def output_types(*, max_depth: int = 2, max_fields: int = 4) -> st.SearchStrategy[OutputShape]:
    """Classes built while the test runs — attrs classes, dataclasses, ``TypedDict`` s
    with random field names and field types drawn from ``int``, ``float``, ``str``,
    ``bool``, ``X | None``, ``list[X]``, ``Literal[...]``, generated enums, nested
    generated classes and unions of them (tagged), some fields with defaults — for
    structured output tests.

    Each draw describes one class: ``tp`` (the class, for ``output_type=``),
    ``values`` (a strategy of its values; a value leaves a defaulted field out now and
    then), ``fields`` (each field's ``name``, ``shape`` and whether it is
    ``required``). Pass a value's unstructured JSON to ``corruption_sites`` to break
    it where the path is known. Values are JSON-safe (finite floats, no surrogates).

    Args:
        max_depth: how deep generated classes nest in one another (1: no nesting).
        max_fields: the most fields one class has (at least one).
    """
    return _classes(max_depth, max_fields)


def _classes(depth: int, max_fields: int) -> st.SearchStrategy[OutputShape]:
    return _class(depth, max_fields)


def _field_types(depth: int, max_fields: int) -> st.SearchStrategy[OutputShape]:
    scalars = st.sampled_from(list(_SCALARS)).map(_scalar)
    leaves = st.one_of(scalars, _literals(), _enums())
    inner = (
        leaves
        if depth <= 1
        else st.one_of(leaves, _classes(depth - 1, max_fields), _unions(depth - 1, max_fields))
    )
    return st.one_of(
        inner,
        inner.filter(lambda s: s.kind != "optional").map(_optional),
        inner.map(_list),
    )


def _scalar(kind: str) -> OutputShape:
    tp, values = _SCALARS[kind]
    return OutputShape(tp=tp, values=values, kind=kind)  # type: ignore[arg-type]


def _optional(item: OutputShape) -> OutputShape:
    return OutputShape(
        tp=item.tp | None,
        values=st.none() | item.values,
        kind="optional",
        item=item,
    )


def _list(item: OutputShape) -> OutputShape:
    return OutputShape(
        tp=list[item.tp],  # type: ignore[name-defined]
        values=st.lists(item.values, max_size=3),
        kind="list",
        item=item,
    )


def _literals() -> st.SearchStrategy[OutputShape]:
    members = st.lists(_WORDS | st.integers(-5, 5), min_size=1, max_size=4, unique=True)
    return members.map(
        lambda m: OutputShape(
            tp=Literal[tuple(m)],
            values=st.sampled_from(m),
            kind="literal",
        )
    )


def _enums() -> st.SearchStrategy[OutputShape]:
    def build(name: str, values: list[Any]) -> OutputShape:
        cls = _ENUM(name, [(f"M{i}", v) for i, v in enumerate(values)])
        return OutputShape(tp=cls, values=st.sampled_from(list(cls)), kind="enum")

    values = st.lists(_WORDS | st.integers(-5, 5), min_size=1, max_size=4, unique=True)
    return st.builds(build, _CLASS_NAMES, values)


def _unions(depth: int, max_fields: int) -> st.SearchStrategy[OutputShape]:
    # Tagged by the class name: the members' names differ. A TypedDict's values are
    # plain dicts, which a union cannot tell apart: members are attrs or dataclasses.
    members = st.lists(
        _class(depth, max_fields, ("attrs", "dataclass")),
        min_size=2,
        max_size=3,
        unique_by=lambda m: m.tp.__name__,
    )
    return members.map(
        lambda ms: OutputShape(
            tp=typing.Union[tuple(m.tp for m in ms)],  # noqa: UP007 - built from a tuple
            values=st.one_of([m.values for m in ms]),
            kind="union",
            members=tuple(ms),
        )
    )


@st.composite
def _class(
    draw: st.DrawFn,
    depth: int,
    max_fields: int,
    flavours: tuple[str, ...] = ("attrs", "dataclass", "typeddict"),
) -> OutputShape:
    names = draw(st.lists(_NAMES, min_size=1, max_size=max_fields, unique=True), label="fields")
    flavour = draw(st.sampled_from(flavours), label="flavour")
    shapes = [draw(_field_types(depth, max_fields), label=name) for name in names]
    defaulted = [draw(st.booleans(), label=f"{name} has a default") for name in names]
    # Fields with a default come last (Python requires it of attrs and dataclasses).
    order = sorted(range(len(names)), key=lambda i: defaulted[i])
    fields = tuple(FieldShape(names[i], shapes[i], not defaulted[i]) for i in order)
    cls_name = draw(_CLASS_NAMES, label="class name")
    if flavour == "typeddict":
        spec = {f.name: f.shape.tp if f.required else NotRequired[f.shape.tp] for f in fields}
        cls: Any = _TYPED_DICT(cls_name, spec)
    else:
        namespace: dict[str, Any] = {"__annotations__": {f.name: f.shape.tp for f in fields}}
        for f in fields:
            if not f.required:
                default = draw(f.shape.values, label=f"{f.name}'s default")
                namespace[f.name] = _default(default, flavour)
        plain = type(cls_name, (), namespace)
        cls = (
            attrs.frozen(plain) if flavour == "attrs" else dataclasses.dataclass(frozen=True)(plain)
        )
    required = {f.name: f.shape.values for f in fields if f.required}
    optional = {f.name: f.shape.values for f in fields if not f.required}
    kwargs = st.fixed_dictionaries(required, optional=optional)
    values = kwargs if flavour == "typeddict" else kwargs.map(lambda kw: cls(**kw))
    return OutputShape(tp=cls, values=values, kind="class", fields=fields, flavour=flavour)


def _default(value: Any, flavour: str) -> Any:
    """A field's default: the value itself when it is immutable, else a factory."""
    if value is None or isinstance(value, int | float | str | enum.Enum):
        return value
    factory = lambda: copy.deepcopy(value)  # noqa: E731 - a factory per default
    if flavour == "attrs":
        return attrs.Factory(factory)
    return dataclasses.field(default_factory=factory)


# --- corrupting a value ---------------------------------------------------------------


Path = list[str | int]


def corruption_sites(shape: OutputShape, data: Any) -> tuple[list[Path], list[tuple[Path, Any]]]:
    """Where the unstructured JSON ``data`` of a value of ``shape`` can be corrupted:
    the paths of the required fields it holds (each can be removed), and the path of
    every value in it below the root with a JSON value no value of its type
    unstructures to (of a wrong JSON type, or not a member), to put in its place.
    A path is a list of names and indexes (``["items", 2, "price"]``)."""
    removable: list[Path] = []
    replaceable: list[tuple[Path, Any]] = []
    _walk(shape, data, [], removable, replaceable)
    return removable, replaceable


_WRONG: Final[dict[str, Any]] = {
    "int": "x",
    "float": "x",
    "bool": "x",
    "str": 12345,
    "list": "x",
    "class": "x",
    "literal": "\u2603",
    "enum": "\u2603",
    "union": "x",
}


def _walk(
    shape: OutputShape,
    data: Any,
    path: Path,
    removable: list[Path],
    replaceable: list[tuple[Path, Any]],
) -> None:
    inner = shape
    while inner.kind == "optional":
        assert inner.item is not None
        inner = inner.item
    if path:
        replaceable.append((path, _WRONG[inner.kind]))
    if data is None:
        return
    if inner.kind == "union":
        inner = next(m for m in inner.members if m.tp.__name__ == data[_TAG])
    if inner.kind == "list":
        assert inner.item is not None
        for i, item in enumerate(data):
            _walk(inner.item, item, [*path, i], removable, replaceable)
    elif inner.kind == "class":
        for f in inner.fields:
            if f.name in data:
                if f.required:
                    removable.append([*path, f.name])
                _walk(f.shape, data[f.name], [*path, f.name], removable, replaceable)
