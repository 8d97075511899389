"""``@tool``: a :class:`Tool` from an annotated async function.

Theory of operation. The function's parameters (minus those that receive the
:class:`ToolContext` or the :class:`ToolCall`) become the fields of a private
``msgspec.Struct``; ``msgspec.json.schema`` of that struct is the tool's JSON Schema
(``$defs`` for attrs classes and other named types), and ``msgspec.convert`` of the
validated arguments into the struct gives the values to call the function with — attrs
instances built, lists turned into tuples, floats into ints where annotated. Conversion
happens only after :func:`check_arguments` validated the arguments against that very
schema, so ``strict=False`` can only make exact conversions (``42.0`` → 42); the lossy
ones it would otherwise allow (``"1"`` → True) never get past validation. cattrs is
deliberately not used here: its default coercion is lossy (``"false"`` → True).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import types
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Literal, TypeAlias, overload

import attrs
import msgspec

from ._arguments import InvalidArguments, check_arguments, compile_parameters
from ._docstrings import parse_docstring
from ._messages import ToolCall
from ._output import write_output
from ._schema import json_schema
from ._serde import json_text
from ._tools import Approval, Tool, ToolContext, ToolOutput

__all__ = ["tool"]

ToolFunction: TypeAlias = Callable[..., Awaitable[object]]
"""An async function returning ``str``, :class:`ToolOutput`, or an instance of the
structured type its return annotation names."""
PrepareArguments: TypeAlias = Callable[[Mapping[str, Any]], Mapping[str, Any]]


@overload
def tool(fn: ToolFunction, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    label: str | None = None,
    timeout: float | None = None,
    execution_mode: Literal["parallel", "sequential"] = "parallel",
    prepare_arguments: PrepareArguments | None = None,
    approval: Approval = "never",
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    label: str | None = None,
    timeout: float | None = None,
    execution_mode: Literal["parallel", "sequential"] = "parallel",
    prepare_arguments: PrepareArguments | None = None,
    approval: Approval = "never",
) -> Tool | Callable[[ToolFunction], Tool]:
    """Build a :class:`Tool` from an annotated ``async def`` function.

    Usable bare (``@tool``) or with options (``@tool(name="read", timeout=10)``)::

        @trio_agent.tool
        async def read(path: str, offset: int | None = None, limit: int = 100) -> str:
            '''Read a text file.

            Args:
                path: the file, relative to the workspace.
                offset: first line to show (1-based).
                limit: how many lines to show.
            '''

    * name: the function's name unless ``name`` is given;
    * description: the docstring without its ``Args:`` section, unless ``description``
      is given; each ``Args:`` entry becomes that parameter's ``description``;
    * parameters: a JSON Schema object built from the annotations (str, int, float,
      bool, lists, tuples, dicts, ``Literal``, enums, optional values, attrs classes,
      nested), with defaults; unknown properties are refused;
    * a parameter annotated :class:`ToolContext` (or ``ToolContext | None``), whatever
      its name, receives the call's context, and one annotated :class:`ToolCall`
      receives the call; neither is in the schema.

    The function is called with the validated arguments converted to the annotated
    types, and returns ``str`` or :class:`ToolOutput`. ``label``, ``timeout``,
    ``execution_mode``, ``prepare_arguments`` and ``approval`` are passed to
    :class:`Tool`.

    A return annotation that is an attrs class, a dataclass or a ``TypedDict`` gives the
    tool an ``output_schema`` (that type's JSON Schema). The function then returns an
    instance of it: the result's ``structured_content`` is its JSON data, and its
    content (what the model reads) that data as JSON text. A ``str`` or
    :class:`ToolOutput` it returns instead is taken as it is.

    Raises:
        TypeError: ``fn`` is not an async function, has ``*args``/``**kwargs`` or an
            unannotated parameter, or an annotation has no JSON Schema.
    """

    def build(fn: ToolFunction) -> Tool:
        return _build(
            fn,
            name=name,
            description=description,
            label=label,
            timeout=timeout,
            execution_mode=execution_mode,
            prepare_arguments=prepare_arguments,
            approval=approval,
        )

    if fn is None:
        return build
    return build(fn)


def _build(
    fn: ToolFunction,
    *,
    name: str | None,
    description: str | None,
    label: str | None,
    timeout: float | None,
    execution_mode: Literal["parallel", "sequential"],
    prepare_arguments: PrepareArguments | None,
    approval: Approval = "never",
) -> Tool:
    where = getattr(fn, "__qualname__", repr(fn))
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"@tool needs an async function (async def), got {where}")
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except NameError as exc:  # a string annotation naming something not importable
        raise TypeError(f"@tool cannot resolve the annotations of {where}: {exc}") from exc
    summary, arg_docs = parse_docstring(inspect.getdoc(fn))
    tool_name = name if name is not None else fn.__name__

    plan: list[tuple[str, bool, str | None]] = []  # (name, positional, injected)
    fields: list[tuple[str, Any, Any]] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"@tool cannot describe *args or **kwargs ({where}: {param.name})")
        if param.name not in hints:
            raise TypeError(f"@tool needs an annotation on parameter {param.name!r} of {where}")
        hint = hints[param.name]
        positional = param.kind is param.POSITIONAL_ONLY
        injected = _injected(hint)
        plan.append((param.name, positional, injected))
        if injected is None:
            fields.append(_field(param, hint, arg_docs.get(param.name)))

    returns = hints.get("return")
    output_schema: dict[str, Any] | None = None
    if _structured(returns):
        try:
            output_schema = json_schema(returns)
        except TypeError as exc:
            raise TypeError(f"@tool cannot build an output schema for {where}: {exc}") from exc

    struct = msgspec.defstruct(
        f"{tool_name}_arguments", fields, kw_only=True, forbid_unknown_fields=True
    )
    try:
        parameters = _schema(struct)
    except (TypeError, ValueError, NameError) as exc:
        # NameError: a class whose own string annotations do not resolve.
        raise TypeError(f"@tool cannot build a JSON Schema for {where}: {exc}") from exc

    built: list[Tool] = []

    async def execute(call: ToolCall, args: Mapping[str, Any], ctx: ToolContext) -> Any:
        # Arguments are validated once per call: by the batch that runs this tool, or
        # here when ``execute`` is called directly, so that no call feeds unchecked values
        # to the non-strict conversion below.
        tool = built[0]
        if not isinstance(ctx, ToolContext) or args is not ctx._validated(tool):
            args = check_arguments(tool, args)
        try:
            values = msgspec.convert(
                args if type(args) is dict else dict(args), struct, strict=False
            )
        except msgspec.ValidationError as exc:
            raise InvalidArguments(f'Invalid arguments for tool "{tool_name}": {exc}') from None
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        for pname, is_positional, injected in plan:
            if injected == "ctx":
                value: Any = ctx
            elif injected == "call":
                value = call
            else:
                value = getattr(values, pname)
            if is_positional:
                positional.append(value)
            else:
                keywords[pname] = value
        out = await fn(*positional, **keywords)
        if output_schema is None or isinstance(out, str | ToolOutput):
            return out
        data = write_output(out, returns)
        return ToolOutput(content=json_text(data), structured_content=data)

    execute.__name__ = getattr(fn, "__name__", "execute")
    execute.__qualname__ = where
    execute.__doc__ = fn.__doc__
    execute.__wrapped__ = fn  # type: ignore[attr-defined]  # for introspection tools

    result = Tool(
        name=tool_name,
        description=description if description is not None else summary,
        parameters=parameters,
        execute=execute,
        label=label,
        execution_mode=execution_mode,
        prepare_arguments=prepare_arguments,
        timeout=timeout,
        output_schema=output_schema,
        approval=approval,
    )
    built.append(result)
    compile_parameters(result)
    return result


def _structured(hint: Any) -> bool:
    """Whether a return annotation names a structured type: an attrs class, a dataclass
    or a ``TypedDict`` (not :class:`ToolOutput`, what a tool returns in general)."""
    return (
        isinstance(hint, type)
        and hint is not ToolOutput
        and (attrs.has(hint) or dataclasses.is_dataclass(hint) or typing.is_typeddict(hint))
    )


def _injected(hint: Any) -> str | None:
    if typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        # `ctx: ToolContext | None = None` still means "give me the context".
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(members) == 1:
            hint = members[0]
    if hint is ToolContext:
        return "ctx"
    if hint is ToolCall:
        return "call"
    return None


def _field(param: inspect.Parameter, hint: Any, doc: str | None) -> tuple[str, Any, Any]:
    if doc:
        hint = _annotate(hint, msgspec.Meta(description=doc))
    if param.default is param.empty:
        return (param.name, hint, msgspec.NODEFAULT)
    default = param.default
    if isinstance(default, list | dict | set | bytearray) and default:
        # msgspec refuses a shared mutable default; each call gets its own copy, and the
        # schema still shows the value.
        hint = Annotated[hint, msgspec.Meta(extra_json_schema={"default": _jsonable(default)})]
        return (param.name, hint, msgspec.field(default_factory=lambda: copy.deepcopy(default)))
    return (param.name, hint, default)


def _annotate(hint: Any, meta: msgspec.Meta) -> Any:
    """``hint`` with ``meta`` added *before* its own metadata: msgspec lets the last
    ``Meta`` win, and a description the author wrote in the annotation beats the
    docstring's."""
    if typing.get_origin(hint) is Annotated:
        base, *extras = typing.get_args(hint)
        return Annotated[(base, meta, *extras)]
    return Annotated[hint, meta]


def _jsonable(value: Any) -> Any:
    return msgspec.json.decode(msgspec.json.encode(value))


def _schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """The struct's schema with the arguments object inline at the top."""
    # Through JSON text: msgspec leaves some defaults as Python values (tuples), and the
    # schema must be plain JSON data, exactly what the model will be sent.
    raw = _jsonable(msgspec.json.schema(struct))
    defs: dict[str, Any] = dict(raw.get("$defs", {}))
    key = raw["$ref"].rsplit("/", 1)[-1]
    top: dict[str, Any] = dict(defs.pop(key))
    top.pop("title", None)  # the private struct's name means nothing to the model
    top.setdefault("properties", {})
    if defs:
        top["$defs"] = defs
    return top
