"""Structured output: a run that ends in a typed value, validated and structured.

Theory of operation. :class:`StructuredOutput` names the type (or a plain JSON Schema),
how the model is asked for it (the mode) and how many times an invalid answer is sent
back. :class:`OutputPlan` compiles it once: the schema from :func:`json_schema` (a
schema whose root is not an object — a list, a primitive, a union — is wrapped as the
``response`` property of an object, since tool arguments and OpenAI's strict mode need
an object), its jsonschema-rs validator, and its strict form when it has one.

An answer — a final-answer tool call's arguments, or the reply's text in the prompted
and native modes — is checked in one place, :meth:`OutputPlan.check`, in three steps:
JSON text is parsed (a code fence around it is tolerated); the value is validated
against the schema (every error listed with its path, ``items[2].price: expected a
number``); then it is structured into the type by one strict cattrs converter
(:data:`output_converter`, built from the transcripts' strict converter: ``"1"`` is not
an int). Validating first means the model hears about every problem at once, in the
schema's words; cattrs only builds the value (its own errors, rare after validation,
are reported with paths the same way).

The modes (:data:`OutputMode`):

- ``tool``: the request carries a final-answer tool (``final_result`` unless named
  otherwise) whose parameters are the schema; the model answers by calling it, and the
  call always gets a result (accepted, or the errors) — the transcript stays paired.
  A final-answer call whose argument text is not a JSON object (malformed, cut short)
  is kept with that text (``ToolCall.raw_arguments``, by the providers) and judged
  like any invalid answer: its result names the JSON problem, and it counts against
  the retries.
- ``native``: the provider's own structured output (OpenAI-compatible
  ``response_format`` with a strict ``json_schema``; Anthropic's ``output_config``); the
  reply's text is the answer.
- ``prompted``: the schema goes into the system prompt with the instruction to answer
  with JSON only; the reply's text is the answer.
- ``auto``: what the model says it does best (its ``structured_output`` attribute:
  ``OpenAIChat`` says ``native``, ``AnthropicMessages`` ``tool``); ``tool`` for a model
  that says nothing (``ScriptedModel``, your own).
"""

from __future__ import annotations

import functools
import json
import re
import typing
from collections.abc import Iterable, Mapping
from types import NoneType
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, TypeAlias, overload

import attrs
import jiter
import jsonschema_rs
from cattrs.strategies import configure_tagged_union
from typing_extensions import TypeVar

from . import _events as ev
from ._blocks import argument_problem
from ._errors import AgentUsageError, OutputError
from ._events import AgentRunResult, NoOutput
from ._formats import expected_string
from ._schema import (
    TAG,
    _is_class,
    drop_strict_nulls,
    json_schema,
    strict_json_schema,
    tagged_unions,
)
from ._serde import parse_json, strict_converter, structure_errors
from ._tools import Tool, ToolContext, ToolOutput

if TYPE_CHECKING:
    from ._messages import ToolCall

__all__ = [
    "DEFAULT_OUTPUT_TOOL",
    "DEFAULT_RETRIES",
    "NO_OUTPUT",
    "AnswerStream",
    "OutputFailure",
    "OutputMode",
    "OutputPlan",
    "OutputRequest",
    "StructuredOutput",
    "answering_tool",
    "as_structured_output",
    "check_retries",
    "output_converter",
    "partial_json",
    "plan_output",
]

T = TypeVar("T")

OutputMode: TypeAlias = Literal["auto", "native", "tool", "prompted"]
"""How the model is asked for a structured output (see :class:`StructuredOutput`)."""

DEFAULT_OUTPUT_TOOL: Final = "final_result"
"""The name of the final-answer tool when none is given."""

_WRAP: Final = "response"
"""The property a schema whose root is not an object is wrapped in."""

_MODES: Final = ("auto", "native", "tool", "prompted")

DEFAULT_RETRIES: Final = 2
"""How many times an invalid answer is sent back when nothing says otherwise."""


def check_retries(value: object, what: str) -> int:
    """``value`` as a retry count (an ``int`` >= 0; ``what`` names it in the error).

    Raises:
        ValueError: not an int (a bool is not one), or negative.
    """
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{what} must be an int >= 0; not {value!r}")
    return value


class StructuredOutput(Generic[T]):
    """What a run must end with: a value of ``type``, and how to ask the model for it.

    ``output_type=X`` on a run or a prompt is ``StructuredOutput(X)``; build one to pick
    the mode, the retries or the final-answer tool's name::

        output_type=StructuredOutput(Invoice, mode="prompted", retries=3)

    Args:
        type: an attrs class, a dataclass, a ``TypedDict``, a primitive, ``list[...]``,
            ``Literal[...]``, a union (of attrs classes: tagged by a ``"type"`` property
            holding the class name), or a plain JSON Schema (a ``dict``): the output is
            then the validated JSON value as it is.
        mode: ``"auto"`` (default: what the model does best), ``"native"`` (the
            provider's structured output), ``"tool"`` (a final-answer tool the model
            must call) or ``"prompted"`` (JSON asked for in the system prompt).
        retries: how many times an invalid answer is sent back with what was wrong
            before the run ends ``output_invalid``. None (the default) means the
            ``output_retries=`` of the run or prompt, else 2 (three answers in all);
            given here and as a different ``output_retries=`` is an
            ``AgentUsageError``.
        name: the final-answer tool's name (tool mode), and the schema's name in a
            native request.
        description: the final-answer tool's description (default: the type's
            docstring summary, else a sentence asking for the final answer).

    Raises:
        TypeError: ``type`` has no JSON Schema (see :func:`json_schema`).
        ValueError: an unknown mode, negative retries, or an empty name.
    """

    __slots__ = ("_retries_given", "description", "mode", "name", "retries", "type")

    @overload
    def __init__(
        self: StructuredOutput[T],
        type: type[T],
        *,
        mode: OutputMode = "auto",
        retries: int | None = None,
        name: str = DEFAULT_OUTPUT_TOOL,
        description: str | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self: StructuredOutput[Any],
        type: Any,
        *,
        mode: OutputMode = "auto",
        retries: int | None = None,
        name: str = DEFAULT_OUTPUT_TOOL,
        description: str | None = None,
    ) -> None: ...

    def __init__(
        self,
        type: Any,
        *,
        mode: OutputMode = "auto",
        retries: int | None = None,
        name: str = DEFAULT_OUTPUT_TOOL,
        description: str | None = None,
    ) -> None:
        if mode not in _MODES:
            raise ValueError(
                f"StructuredOutput.mode must be one of {', '.join(map(repr, _MODES))}; not {mode!r}"
            )
        self._retries_given = retries is not None
        if retries is None:
            retries = DEFAULT_RETRIES
        check_retries(retries, "StructuredOutput.retries")
        if not isinstance(name, str) or not name:
            raise ValueError(f"StructuredOutput.name must be a non-empty str; not {name!r}")
        self.type = type
        self.mode: OutputMode = mode
        self.retries = retries
        self.name = name
        self.description = description

    def _with_retries(self, retries: int) -> StructuredOutput[T]:
        """A copy whose retries are ``retries`` (given: they are no default any more)."""
        return StructuredOutput(
            self.type,
            mode=self.mode,
            retries=retries,
            name=self.name,
            description=self.description,
        )

    def __repr__(self) -> str:
        return (
            f"StructuredOutput({self.type!r}, mode={self.mode!r}, retries={self.retries}, "
            f"name={self.name!r})"
        )


@attrs.frozen(kw_only=True)
class OutputRequest:
    """What a request asks of the model's final answer (``ModelRequest.output``).

    A provider reads it to shape the request: in ``native`` mode it asks for JSON
    matching ``schema`` (``strict_schema`` where the API has a strict mode); in ``tool``
    mode the request's tools hold the final-answer tool ``name``, and a provider may
    require a tool call (``tool_choice``); ``prompted`` needs nothing (the system
    prompt asks).

    Attributes:
        mode: ``native``, ``tool`` or ``prompted``.
        name: the final-answer tool's name, and the schema's name.
        description: what the answer is, for the model.
        schema: the answer's JSON Schema (an object at the root).
        strict_schema: the schema rewritten for strict mode (every property required,
            optional ones nullable, ``additionalProperties: false``); None when the
            schema cannot be made strict (free-form objects).
    """

    mode: Literal["native", "tool", "prompted"]
    name: str
    description: str
    schema: Mapping[str, Any]
    strict_schema: Mapping[str, Any] | None = None


class _Missing(NoOutput):
    def error(self, result: AgentRunResult[Any]) -> Exception:
        why = f": {result.error_message}" if result.error_message else ""
        return OutputError(f"the run ended ({result.reason}) without a valid output{why}")

    def __repr__(self) -> str:
        return "<no output>"


NO_OUTPUT: Final = _Missing()
"""The output of a run that asked for one and ended without a valid one."""


output_converter: Final = strict_converter()
"""The one converter structured output is structured with (strict primitives; each
union of classes it meets is configured as tagged, once)."""

_configured: set[Any] = set()


def _configure(tp: Any) -> None:
    for union in tagged_unions(tp):
        if union in _configured:
            continue
        members = typing.get_args(union)
        classes = tuple(m for m in members if _is_class(m))
        if len(classes) == len(members):
            configure_tagged_union(
                union, output_converter, tag_name=TAG, tag_generator=lambda c: c.__name__
            )
        else:
            # ``A | B | None`` (or ``| int``...): the classes are tagged as their own
            # union; the other members stand beside it (a JSON object is one of the
            # classes, anything else one of the others).
            _configure_beside(union, classes, tuple(m for m in members if m not in classes))
        _configured.add(union)


def _configure_beside(union: Any, classes: tuple[type, ...], others: tuple[Any, ...]) -> None:
    tagged: Any = typing.Union[classes]  # noqa: UP007 - built from a tuple
    if tagged not in _configured:
        configure_tagged_union(
            tagged, output_converter, tag_name=TAG, tag_generator=lambda c: c.__name__
        )
        _configured.add(tagged)
    nullable = NoneType in others
    plain = tuple(o for o in others if o is not NoneType)
    rest: Any = typing.Union[plain] if plain else NoneType  # noqa: UP007

    def structure(value: Any, _: Any) -> Any:
        if isinstance(value, dict):
            return output_converter.structure(value, tagged)
        if value is None and nullable:
            return None
        return output_converter.structure(value, rest)

    runtime = tuple(c for c in classes if not typing.is_typeddict(c))  # (no isinstance)

    def unstructure(value: Any) -> Any:
        if isinstance(value, runtime):
            return output_converter.unstructure(value, tagged)
        return output_converter.unstructure(value)

    output_converter.register_structure_hook(union, structure)
    output_converter.register_unstructure_hook(union, unstructure)


def write_output(value: Any, tp: Any) -> Any:
    """``value``, of type ``tp``, as the JSON data its schema (:func:`json_schema` of
    ``tp``) describes: written by :data:`output_converter`, so a union of classes is
    tagged and dates, decimals and the like are the strings the schema names. What a
    ``@tool`` with a structured return type gives as ``structured_content``."""
    _configure(tp)
    return output_converter.unstructure(value, tp)


class OutputFailure(Exception):
    """An answer that is not a valid output; ``lines`` say what was wrong, one problem
    each (``items[2].price: expected a number``)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("; ".join(lines))
        self.lines = lines


_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n(.*?)\n?\s*```\s*$", re.DOTALL)
_TYPE_WORDS: Final = {
    "number": "a number",
    "integer": "an integer",
    "string": "a string",
    "boolean": "true or false",
    "object": "a JSON object",
    "array": "an array",
    "null": "null",
}
MAX_LINES: Final = 20
"""How many problems one retry message lists (the rest are counted)."""


class OutputPlan:
    """A :class:`StructuredOutput` compiled: schema, validator, converter.

    Raises:
        TypeError: the type has no JSON Schema.
        ValueError: a JSON Schema given as a dict is not a valid schema.
    """

    __slots__ = (
        "__dict__",  # for the cached properties
        "_requests",
        "_validator",
        "schema",
        "spec",
        "strict_schema",
        "wrapped",
    )

    def __init__(self, spec: StructuredOutput[Any]) -> None:
        self.spec = spec
        self._requests: dict[str, OutputRequest] = {}
        tp = spec.type
        if isinstance(tp, Mapping):
            schema = json.loads(json.dumps(dict(tp)))
        else:
            schema = json_schema(tp)
            _configure(tp)
        self.wrapped = schema.get("type") != "object"
        if self.wrapped:
            defs = schema.pop("$defs", None)
            schema = {"type": "object", "properties": {_WRAP: schema}, "required": [_WRAP]}
            if defs is not None:
                schema["$defs"] = defs
        self.schema: dict[str, Any] = schema
        try:
            self._validator = jsonschema_rs.validator_for(schema, offline=True)
        except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError) as exc:
            raise ValueError(f"invalid output schema: {str(exc).splitlines()[0]}") from None
        try:
            self.strict_schema: dict[str, Any] | None = strict_json_schema(schema)
        except ValueError:
            self.strict_schema = None

    def resolve(self, model: object) -> Literal["native", "tool", "prompted"]:
        """The mode a request to ``model`` uses: the spec's, or for ``auto`` the
        model's ``structured_output`` attribute (``tool`` when it has none)."""
        mode = self.spec.mode
        if mode != "auto":
            return mode
        said = getattr(model, "structured_output", "tool")
        if said == "native" or said == "prompted":
            return "native" if said == "native" else "prompted"
        return "tool"

    def request(self, mode: Literal["native", "tool", "prompted"]) -> OutputRequest:
        """What a request in ``mode`` carries (see :class:`OutputRequest`); one value
        per mode, built once."""
        asked = self._requests.get(mode)
        if asked is None:
            asked = self._requests[mode] = OutputRequest(
                mode=mode,
                name=self.spec.name,
                description=self.description,
                schema=self.schema,
                strict_schema=self.strict_schema,
            )
        return asked

    @property
    def description(self) -> str:
        """The final-answer tool's description."""
        if self.spec.description is not None:
            return self.spec.description
        own = self.schema.get("description")
        if self.wrapped:
            own = self.schema["properties"][_WRAP].get("description")
        text = "Give your final answer by calling this tool with it as the arguments."
        return f"{own}\n\n{text}" if isinstance(own, str) and own else text

    @functools.cached_property
    def instructions(self) -> str:
        """The system prompt's addition in prompted mode (built once)."""
        schema = json.dumps(self.schema, ensure_ascii=False)
        return (
            "Give your final answer as a JSON value matching this JSON Schema, and "
            f"nothing else (no prose around it):\n{schema}"
        )

    # --- checking an answer ----------------------------------------------------------

    def check_text(self, text: str, *, strict: bool = False) -> Any:
        """The output from a reply's text (prompted and native modes).

        ``strict``: the answer followed the strict schema (its ``null`` s for absent
        optional fields are dropped first). Pure; not a checkpoint.

        Raises:
            OutputFailure: not JSON, not valid against the schema, or not structurable.
        """
        fenced = _FENCE.match(text)
        if fenced is not None:
            text = fenced.group(1)
        if not text.strip():
            raise OutputFailure(["$: the answer is empty; answer with the JSON value"])
        try:
            value = parse_json(text)
        except ValueError as exc:
            raise OutputFailure([f"$: the answer is not valid JSON ({exc})"]) from None
        return self.check(value, strict=strict)

    def check_call(self, call: ToolCall) -> Any:
        """The output from the final-answer call ``call`` (tool mode): its arguments
        checked (see :meth:`check`). Pure.

        Raises:
            OutputFailure: the call's argument text was not a JSON object (kept as
                ``raw_arguments``: the problem is the parser's, at ``$``), or its
                arguments are not valid.
        """
        raw = call.raw_arguments
        if raw is not None:
            raise OutputFailure([f"$: {argument_problem(raw)}"])
        return self.check(call.arguments)

    def check(self, value: Any, *, strict: bool = False) -> Any:
        """Validate the JSON ``value`` against the schema, then structure it.

        Raises:
            OutputFailure: every schema error with its path, or the converter's.
        """
        if strict and self.strict_schema is not None:
            value = drop_strict_nulls(value, self.schema)
        errors = [e for err in self._validator.iter_errors(value) for e in _within(err)]
        if errors:
            lines = [self._line(e) for e in errors[:MAX_LINES]]
            if len(errors) > MAX_LINES:
                lines.append(f"… and {len(errors) - MAX_LINES} more problems")
            raise OutputFailure(lines)
        if self.wrapped:
            value = value[_WRAP]
        tp = self.spec.type
        if isinstance(tp, Mapping):
            return value
        try:
            return output_converter.structure(value, tp)
        except Exception as exc:  # cattrs reports a tree of failures
            lines = [f"{self._path_text(path)}: {why}" for path, why in structure_errors(exc)]
            raise OutputFailure(lines) from None

    def _line(self, err: jsonschema_rs.ValidationError) -> str:
        path = list(err.instance_path)
        kind = err.kind
        if isinstance(kind, jsonschema_rs.ValidationErrorKind.Required):
            return f"{_render([*path, str(kind.property)], self.wrapped)}: required field missing"
        types = _types_expected(err)
        if types:
            names = list(dict.fromkeys(_TYPE_WORDS.get(str(t), str(t)) for t in types))
            message = f"expected {' or '.join(names)}"
        elif isinstance(kind, jsonschema_rs.ValidationErrorKind.Enum):
            message = f"expected one of {', '.join(json.dumps(o) for o in kind.options)}"
        elif isinstance(kind, jsonschema_rs.ValidationErrorKind.Constant):
            message = f"expected {json.dumps(kind.expected_value)}"
        elif (wanted := expected_string(kind)) is not None:
            message = f"expected {wanted}"
        else:
            message = err.message
            if len(message) > 300:
                message = f"{message[:300]}…"
        return f"{_render(path, self.wrapped)}: {message}"

    def _path_text(self, path: str) -> str:
        # cattrs paths start at "$" ("$.items[2].price"); shown as the schema's are.
        rest = path[1:] if path.startswith("$") else path
        rest = rest[1:] if rest.startswith(".") else rest
        return rest or "$"

    # --- what the model is told ------------------------------------------------------

    def retry_text(self, failure: OutputFailure, mode: str) -> str:
        """The message that sends an invalid answer back, listing what was wrong."""
        listed = "\n".join(f"  - {line}" for line in failure.lines)
        if mode == "tool":
            again = f"Call {self.spec.name} again with the corrected answer."
        else:
            again = "Answer again with the corrected JSON value only."
        return f"Your final answer was not valid:\n{listed}\n{again}"

    def missing_call_text(self) -> str:
        """What a reply that did not call the final-answer tool (tool mode) is told."""
        return (
            f"You must give your final answer by calling the {self.spec.name} tool "
            "with it as the arguments."
        )

    def missing_call(self) -> OutputFailure:
        """The failure of a reply that did not call the final-answer tool."""
        return OutputFailure([f"$: the reply did not call {self.spec.name}"])

    def partial(self, text: str) -> Any:
        """The value the JSON ``text`` streamed so far holds, best effort (see
        :func:`partial_json`); unwrapped when the schema was wrapped. None when nothing
        can be made of it yet."""
        value = partial_json(text)
        if self.wrapped:
            return value.get(_WRAP) if isinstance(value, dict) else None
        return value


_ALTERNATIVES: Final = (
    jsonschema_rs.ValidationErrorKind.AnyOf,
    jsonschema_rs.ValidationErrorKind.OneOfNotValid,
)


def _within(err: jsonschema_rs.ValidationError) -> list[jsonschema_rs.ValidationError]:
    """The errors that say what is wrong where: for a value that matches none of a
    union's alternatives (``X | None``, a tagged union) but is plainly meant as one of
    them, that alternative's own errors, at their own paths (``billing.zip: expected a
    string``, not ``billing: ... is not valid under any of the schemas``); else
    ``err`` itself. An alternative is ruled out when the value is not of its JSON type
    or does not carry its tag; it is plainly meant when it is the only one left."""
    if not isinstance(err.kind, _ALTERNATIVES):
        return [err]
    path = list(err.instance_path)
    left = [alt for alt in err.kind.context if alt and not any(_rules_out(e, path) for e in alt)]
    if len(left) != 1:
        return [err]
    return [e for inner in left[0] for e in _within(inner)]


def _types_expected(err: jsonschema_rs.ValidationError) -> list[Any]:
    """The JSON types ``err`` says the value should have had: a type error's, or, for a
    union whose every alternative wants another type, all of theirs (``expected a JSON
    object or null``); empty for any other error."""
    kind = err.kind
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.Type):
        return list(kind.types)
    if not isinstance(kind, _ALTERNATIVES):
        return []
    path = list(err.instance_path)
    types: list[Any] = []
    for alt in kind.context:
        mismatch = [e for e in alt if list(e.instance_path) == path and _types_expected(e)]
        if not mismatch:
            return []
        types += _types_expected(mismatch[0])
    return types


def _rules_out(err: jsonschema_rs.ValidationError, path: list[Any]) -> bool:
    """Whether ``err``, of one alternative of the union at ``path``, shows that the
    value was not meant as that alternative: not of its type, or another class's tag."""
    at = list(err.instance_path)
    kind = err.kind
    if at == path:
        return isinstance(kind, jsonschema_rs.ValidationErrorKind.Type)
    return at == [*path, TAG] and isinstance(
        kind, jsonschema_rs.ValidationErrorKind.Constant | jsonschema_rs.ValidationErrorKind.Enum
    )


def _render(path: list[Any], wrapped: bool) -> str:
    """``["items", 2, "price"]`` as ``items[2].price`` (``$`` for the root)."""
    if wrapped and path and path[0] == _WRAP:
        path = path[1:]
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    if not out or out.startswith("["):
        out = f"${out}"
    return out


# --- partial JSON ----------------------------------------------------------------------

_OPENING_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?")


def partial_json(text: str) -> Any:
    """The value a prefix of JSON text holds so far, best effort; None when nothing can
    be made of it yet.

    An open string is kept as far as it goes, open arrays and objects are closed, and a
    trailing part that cannot be completed (a key without its value, ``tru``, ``1.``) is
    left out — so a form can fill in as an answer streams. An opening code fence is
    skipped. Parsed by jiter's partial mode (the JSON parser of pydantic-core). Pure.
    """
    text = text.strip()
    fenced = _OPENING_FENCE.match(text)
    if fenced is not None:
        text = text[fenced.end() :].rstrip("`").rstrip()
    if not text:
        return None
    try:
        return jiter.from_json(text.encode(), partial_mode="trailing-strings")
    except ValueError:
        return None


class AnswerStream:
    """Follows the answer of one reply as it streams, for ``OutputUpdate`` events: the
    final-answer call's argument fragments (tool mode), or the reply's text (the other
    modes)."""

    __slots__ = ("_index", "_last", "_name", "_parts", "_plan")

    def __init__(self, plan: OutputPlan, asked: OutputRequest) -> None:
        self._plan = plan
        self._name = asked.name if asked.mode == "tool" else None
        self._index: int | None = None
        self._parts: list[str] = []
        self._last: Any = None

    def feed(self, event: ev.AssistantEvent) -> ev.OutputUpdate | None:
        """The update ``event`` brings, or None (not a piece of the answer, or nothing
        new can be read). Pure; parses the answer so far (best effort)."""
        t = type(event)
        if self._name is not None:
            if t is ev.ToolCallStart:
                e: Any = event
                if e.name == self._name and self._index is None:
                    self._index = e.index
                return None
            if t is not ev.ToolCallDelta or event.index != self._index:  # type: ignore[union-attr]
                return None
        elif t is not ev.TextDelta:
            return None
        self._parts.append(event.delta)  # type: ignore[union-attr]
        partial = self._plan.partial("".join(self._parts))
        if partial is None or partial == self._last:
            return None
        self._last = partial
        return ev.OutputUpdate(partial=partial)


def answering_tool(asked: OutputRequest, text: str) -> Tool:
    """A tool named as the final-answer tool that answers every call with ``text`` as
    an error result: how a refused answer is sent back from inside a batch (its
    sibling calls run there, and each result keeps its place)."""

    async def execute(  # noqa: ASYNC124 - a tool's execute is async by contract
        call: ToolCall, args: Mapping[str, Any], ctx: ToolContext
    ) -> ToolOutput:
        return ToolOutput(content=text, is_error=True)

    return Tool(
        name=asked.name,
        description=asked.description,
        parameters={"type": "object"},
        execute=execute,
    )


def as_structured_output(
    value: Any, retries: int | None = None, *, default_retries: int = DEFAULT_RETRIES
) -> StructuredOutput[Any] | None:
    """``output_type=`` as given (None, a type, a schema dict or a
    :class:`StructuredOutput`) with ``output_retries=`` (``retries``; None when not
    given) as a :class:`StructuredOutput` (None for None).

    The retries are the one given: ``output_retries=``, or the ``StructuredOutput``'s
    own ``retries=`` — both given must agree; neither given: ``default_retries`` (an
    Agent's ``output_retries``, else 2).

    Raises:
        ValueError: ``retries`` is not an int >= 0.
        AgentUsageError: ``retries`` without an output type, or a ``StructuredOutput``
            whose ``retries=`` says otherwise.
    """
    if retries is not None:
        check_retries(retries, "output_retries")
        if value is None:
            raise AgentUsageError("output_retries= needs output_type=: no output is asked for")
    if isinstance(value, StructuredOutput):
        spec: StructuredOutput[Any] = value
        if not spec._retries_given:
            return spec._with_retries(default_retries if retries is None else retries)
        if retries is not None and retries != spec.retries:
            raise AgentUsageError(
                f"output_retries={retries} contradicts StructuredOutput(..., "
                f"retries={spec.retries}); give the retries once"
            )
        return spec
    if value is None:
        return None
    return StructuredOutput(value, retries=default_retries if retries is None else retries)


def plan_output(
    value: Any,
    tool_names: Iterable[str],
    retries: int | None = None,
    *,
    default_retries: int = DEFAULT_RETRIES,
) -> OutputPlan | None:
    """``output_type=`` and ``output_retries=`` as given (see
    :func:`as_structured_output`), compiled for a run whose tools are named
    ``tool_names`` (None when no output is asked for).

    Raises:
        TypeError: the type has no JSON Schema.
        ValueError: a schema dict that is not a valid JSON Schema, or retries that are
            not an int >= 0.
        AgentUsageError: a tool has the final-answer tool's name, or the retries are
            given twice, differently (or without an output type).
    """
    spec = as_structured_output(value, retries, default_retries=default_retries)
    if spec is None:
        return None
    if spec.name in tool_names:
        raise AgentUsageError(
            f"a tool is named {spec.name!r}, the name of the final-answer tool; "
            "give StructuredOutput(..., name=...) another name"
        )
    tp = spec.type
    try:
        key = (
            json.dumps(tp, sort_keys=True) if isinstance(tp, Mapping) else tp,
            spec.mode,
            spec.retries,
            spec.name,
            spec.description,
        )
        hash(key)
    except (TypeError, ValueError):
        return OutputPlan(spec)  # unhashable or not JSON: compiled for this run only
    plan = _plans.get(key)
    if plan is None:
        plan = OutputPlan(spec)
        if len(_plans) >= MAX_PLANS:
            del _plans[next(iter(_plans))]
        _plans[key] = plan
    return plan


MAX_PLANS: Final = 256
"""How many compiled plans are kept (the oldest goes first): a run asking again for
the same output reuses its schema, validator and strict form."""
_plans: dict[Any, OutputPlan] = {}
