"""Tools: what the model can call, and what a call gets and gives back."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs

from ._messages import Image, Text, ToolCall
from ._validators import one_of, seconds

__all__ = ["MAX_RESULT_CHARS", "Approval", "Tool", "ToolContext", "ToolOutput", "needs_approval"]

MAX_RESULT_CHARS = 50_000
"""How many characters of a tool's output its result keeps by default: the ``bash``
tool's cap, and an MCP server's default ``max_result_chars``."""


@attrs.frozen(kw_only=True)
class ToolOutput:
    """What a tool returns. A plain ``str`` return is the same as ``ToolOutput(content=s)``.

    Attributes:
        content: text, or blocks of text and images, sent back to the model.
        details: JSON data for the application, not sent to the model. Checked when the
            tool returns: a value a transcript writer cannot encode (an arbitrary
            object, a ``Decimal``, a circular structure) makes the call's result an
            error naming it, instead of failing the writer later. Sets, bytes, paths
            and datetimes are written as JSON lists and strings.
        terminate: ask the loop to stop after this batch (it stops only when every
            result of the batch asks, and nothing is queued).
        is_error: report a failure while keeping ``details`` (raising an exception is
            the other way to fail; it carries only a message).
        structured_content: the result as JSON data for programs, beside ``content``
            (which the model reads: put its text rendering there). Kept as the result
            message's ``structured_content``. Checked when the tool returns, as
            ``details`` is, and against the tool's ``output_schema`` when it declares
            one and the result is not an error.
    """

    content: str | Sequence[Text | Image]
    details: Any = None
    terminate: bool = False
    is_error: bool = False
    structured_content: Any = None


@attrs.define(eq=False)
class ToolContext:
    """Given to ``Tool.execute``: who is calling, and a way to report progress.

    Attributes:
        call: the call being executed, as the model declared it (raw arguments).
    """

    call: ToolCall
    _report: Callable[[Any], Awaitable[None]] = attrs.field(alias="report", repr=False)

    @property
    def call_id(self) -> str:
        """The call's id (``call.id``)."""
        return self.call.id

    @property
    def tool_name(self) -> str:
        """The called tool's name (``call.name``)."""
        return self.call.name

    async def report_progress(self, partial: Any) -> None:
        """Emit a ``ToolExecutionUpdate`` for this call.

        Backpressured: waits until the update is handed to the event sink. A call made
        after the tool finished is ignored. This is a checkpoint.
        """
        await self._report(partial)

    def _validated(self, tool: Tool) -> Mapping[str, Any] | None:
        """The arguments the run already validated against ``tool``'s schema for this
        call, so that ``tool.execute`` need not validate them again; None when the run
        did not (a context built by hand, another tool's call)."""
        return None


Execute = Callable[[ToolCall, Mapping[str, Any], ToolContext], Awaitable["ToolOutput | str"]]


Approval: TypeAlias = Literal["never", "always"] | Callable[[Mapping[str, Any]], bool | str | None]
"""``Tool.approval``: whether a call waits for a decision before it runs. A callable is
given the call's validated arguments and returns True (or a non-empty ``str``: the
reason shown to whoever decides) to make the call wait, False or None to let it run."""


def _check_approval(_instance: Any, _attribute: Any, value: Any) -> None:
    if value not in ("never", "always") and not callable(value):
        raise ValueError(
            f"Tool.approval must be 'never', 'always' or a callable of the arguments, not {value!r}"
        )


def needs_approval(tool: Tool, args: Mapping[str, Any]) -> tuple[bool, str | None]:
    """Whether a call of ``tool`` with the validated ``args`` waits for a decision, and
    the reason to show. Raises what the ``approval`` callable raises."""
    approval = tool.approval
    if approval == "never":
        return False, None
    if approval == "always":
        return True, None
    assert callable(approval)
    answer = approval(args)
    if isinstance(answer, str):
        return bool(answer), answer or None
    return bool(answer), None


_NAME = re.compile(r"[A-Za-z0-9_-]+")


def check_tool_name(name: object, what: str) -> None:
    """Raises ValueError, naming ``what``, unless ``name`` is letters, digits, ``_`` and
    ``-``: what the model APIs (OpenAI, Anthropic) accept as a tool's name. A name
    outside it fails every request that lists the tool, so it is refused when the tool
    (or the prefix of a server's tools) is given."""
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise ValueError(
            f"{what} must be letters, digits, '_' and '-' only (the name the model calls "
            f"the tool by, as the model APIs accept it), not {name!r}"
        )


def _check_name(_instance: Any, _attribute: Any, name: Any) -> None:
    check_tool_name(name, "Tool.name")


def _check_parameters(_instance: Any, _attribute: Any, parameters: Any) -> None:
    if not isinstance(parameters, Mapping):
        raise TypeError(
            f"Tool.parameters must be a JSON Schema object (a dict), not "
            f"{type(parameters).__name__} {parameters!r:.60}"
        )


def _check_output(_instance: Any, _attribute: Any, schema: Any) -> None:
    if schema is not None and not isinstance(schema, Mapping):
        raise TypeError(
            f"Tool.output_schema must be a JSON Schema (a dict) or None, not "
            f"{type(schema).__name__} {schema!r:.60}"
        )


@attrs.frozen(kw_only=True, eq=False)
class Tool:
    """A tool the model may call (compared and hashed by identity).

    Attributes:
        name: the exact name the model uses.
        description: told to the model.
        parameters: a JSON Schema object for the arguments.
        execute: ``async (call, args, ctx) -> ToolOutput | str``; raising an
            ``Exception`` makes an error result whose text is the message.
        label: a human-friendly name for displays.
        execution_mode: ``"sequential"`` makes every batch this tool is in run one call
            at a time.
        prepare_arguments: a shim run on the raw arguments before validation (for
            example to accept an old argument name).
        timeout: seconds; overrides ``LoopConfig.tool_timeout`` for this tool.
        output_schema: a JSON Schema of the ``structured_content`` of its successful
            results (not sent to the model). A successful result whose structured
            content does not match it becomes an error result listing each mismatch
            with its path (``  - items/2/price: ...``); one without structured content
            is not checked. A schema that is not valid JSON Schema makes every
            successful result with structured content an error saying so.
        approval: ``"always"``: every call waits for a decision before it runs (asked
            of ``LoopConfig.approver`` if set, else deferred: the run ends ``deferred``
            and ``resume`` answers it); a callable decides per call from the validated
            arguments (True or a non-empty ``str``, the reason shown, makes the call
            wait); ``"never"`` (default): calls run.
    """

    name: str = attrs.field(validator=_check_name)
    description: str
    parameters: Mapping[str, Any] = attrs.field(validator=_check_parameters)
    execute: Execute = attrs.field(repr=False)
    label: str | None = None
    execution_mode: Literal["parallel", "sequential"] = attrs.field(
        default="parallel", validator=one_of("parallel", "sequential")
    )
    prepare_arguments: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = attrs.field(
        default=None, repr=False
    )
    timeout: float | None = attrs.field(default=None, validator=seconds(optional=True))
    output_schema: Mapping[str, Any] | None = attrs.field(default=None, validator=_check_output)
    approval: Approval = attrs.field(default="never", validator=_check_approval, repr=False)


def as_tools(tools: object, where: str) -> tuple[Tool, ...]:
    """``tools`` as a tuple of :class:`Tool`, checked when it is given.

    Raises:
        TypeError: ``tools`` is not an iterable of ``Tool`` (a plain function, a single
            tool...); the message names ``where`` and points at ``@trio_agent.tool``.
    """
    if isinstance(tools, Tool):
        raise TypeError(f"{where} takes a sequence of tools, not one Tool: wrap it, (tool,)")
    if isinstance(tools, str | bytes) or not isinstance(tools, Iterable):
        raise TypeError(f"{where} takes a sequence of tools, not {type(tools).__name__}")
    out = tools if type(tools) is tuple else tuple(tools)
    names: set[str] = set()
    for i, tool in enumerate(out):
        if not isinstance(tool, Tool):
            name = getattr(tool, "__qualname__", None) or type(tool).__name__
            raise TypeError(
                f"{where}[{i}] is {name!r}, not a Tool: decorate an annotated async "
                "function with @trio_agent.tool, or build a trio_agent.Tool(...)"
            )
        if tool.name in names:
            raise ValueError(
                f"{where}[{i}] is a second tool named {tool.name!r}: the model calls tools "
                "by name, so each name must be used once"
            )
        names.add(tool.name)
    return out
