"""Small helpers shared by the loop, the batch and the Agent.

``maybe_await`` lets a hook be sync or async, ``hook_returned`` checks what it
returned; ``make_result`` builds a tool result and checks its content;
``representative`` picks the one exception to raise for a group.
"""

from __future__ import annotations

import contextlib
import time
from collections import abc
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from ._messages import (
    Image,
    Text,
    ToolCall,
    ToolResultMessage,
    describe_value,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = [
    "NO_SCOPE",
    "hook_returned",
    "is_str",
    "make_result",
    "maybe_await",
    "one_of",
    "representative",
    "result_content",
    "result_message",
    "seconds",
]


T = TypeVar("T")

NO_SCOPE = contextlib.nullcontext()
"""Stands in for a cancel scope a run does not need (``with scope or NO_SCOPE:``)."""


async def maybe_await(value: Any) -> Any:
    """``value``, awaited first when it is awaitable (a hook may be sync or async).

    Checkpoints only when ``value`` is awaitable and the awaitable does.
    """
    if hasattr(value, "__await__"):
        return await value
    return value


def hook_returned(hook: str, value: object, kind: type[T]) -> T | None:
    """``value``, what the hook named ``hook`` returned, when it is None or a ``kind``.

    Raises:
        TypeError: anything else, naming the hook and the value.
    """
    if value is None or isinstance(value, kind):
        return value
    raise TypeError(f"{hook} returned {describe_value(value)}; expected None or {kind.__name__}")


def is_str(instance: Any, attribute: Any, value: Any) -> None:
    """An attrs validator: the value is a ``str`` (a ``TypeError`` naming the field)."""
    if not isinstance(value, str):
        raise TypeError(
            f"{type(instance).__name__}.{attribute.name} must be a str, not {describe_value(value)}"
        )


def result_content(content: str | Sequence[Text | Image]) -> tuple[Text | Image, ...]:
    """``content`` as result blocks, checked where a tool (or a hook) hands it over.

    Raises:
        TypeError: ``content`` is not a ``str`` or a sequence of ``Text``/``Image``
            blocks with ``str`` fields (bytes, a dict, a list holding a str...). Such a
            value would make the transcript unloadable, so it becomes that call's error.
    """
    if isinstance(content, str):
        return (Text(text=content),)
    given: object = content  # checked at run time, whatever the annotations say
    if not isinstance(given, list | tuple) and (
        not isinstance(given, abc.Sequence) or isinstance(given, bytes | bytearray)
    ):
        raise TypeError(
            f"tool result content must be a str or a sequence of Text/Image blocks, "
            f"not {type(given).__name__}"
        )
    for i, block in enumerate(content):
        # The annotations say what a block should be; this checks what it is.
        fields: tuple[object, ...]
        if type(block) is Text:
            fields = (block.text, "" if block.signature is None else block.signature)
        elif type(block) is Image:
            fields = (block.data, block.mime_type)
        else:
            raise TypeError(
                f"tool result content[{i}] is a {type(block).__name__}, not a Text or Image block"
            )
        if not all(isinstance(f, str) for f in fields):
            raise TypeError(
                f"tool result content[{i}]: a {type(block).__name__} whose fields are not all str"
            )
    return tuple(content)


def make_result(
    call: ToolCall,
    text: str | Sequence[Text | Image],
    *,
    is_error: bool,
    details: Any = None,
) -> ToolResultMessage:
    return result_message(call, result_content(text), is_error=is_error, details=details)


def result_message(
    call: ToolCall,
    content: tuple[Text | Image, ...],
    *,
    is_error: bool,
    details: Any = None,
) -> ToolResultMessage:
    """The result of ``call`` with ``content`` already checked (see :func:`result_content`)."""
    return ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=content,
        details=details,
        is_error=is_error,
        timestamp=time.time(),
    )


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for inner in exc.exceptions:
            out.extend(_leaves(inner))
        return out
    return [exc]


def representative(exc: BaseException) -> BaseException:
    """The one exception to raise for a (possibly grouped) failure.

    Order: a non-``Exception`` (KeyboardInterrupt...) first, then an ``Exception``, then
    ``Cancelled`` — so no library error and no Cancelled ever reaches a caller wrapped.
    """
    leaves = _leaves(exc)
    for leaf in leaves:
        if not isinstance(leaf, Exception | trio.Cancelled):
            return leaf
    for leaf in leaves:
        if isinstance(leaf, Exception):
            return leaf
    return leaves[0]


def seconds(*, optional: bool, zero: bool = False) -> Callable[[Any, Any, Any], None]:
    """An attrs validator for a duration: a number of seconds above zero (``zero``: or
    zero), or None when ``optional``. NaN, negative numbers, bools and strings are a
    ``ValueError`` naming the field when the object is built, instead of a deadline
    that fires at once or never."""

    def check(_instance: Any, attribute: Any, value: Any) -> None:
        if value is None and optional:
            return
        if (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and (value > 0 or (zero and value == 0))
        ):
            return
        wanted = "zero or more" if zero else "above zero"
        raise ValueError(
            f"{type(_instance).__name__}.{attribute.name} must be a number of seconds, "
            f"{wanted}{', or None' if optional else ''}; not {value!r}"
        )

    return check


def one_of(*choices: str) -> Callable[[Any, Any, Any], None]:
    """An attrs validator: the value is one of ``choices`` (a ``ValueError`` naming the
    field and the choices otherwise)."""

    def check(instance: Any, attribute: Any, value: Any) -> None:
        if value not in choices:
            raise ValueError(
                f"{type(instance).__name__}.{attribute.name} must be one of "
                f"{', '.join(map(repr, choices))}; not {value!r}"
            )

    return check
