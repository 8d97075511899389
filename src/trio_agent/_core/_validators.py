"""The attrs validators and converters of the public values' fields.

One idiom for every value a user builds (``Context``, ``LoopConfig``, ``Tool``, the
provider and server settings...): its fields are checked by attrs validators and
converters when the value is built (and, for a mutable value such as the ``Agent``, when
a field is assigned), so a wrong value is refused where it enters, with an error naming
the class, the field and what was given. attrs' own validators (``ge``, ``optional``)
serve where their messages do; the ones here say more (``Tool.timeout must be a number
of seconds, above zero, or None; not -1``).

The checks of what a run or an agent is *given* (prompts, queued messages, what a hook
returns) are in ``_inputs``, built from these.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ._messages import MESSAGE_TYPES, Message

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["as_history", "describe_value", "is_str", "one_of", "seconds"]


def describe_value(value: object) -> str:
    """``value``'s type and a short repr, for error messages (``bytes b'hi'``)."""
    text = repr(value)
    if len(text) > 60:
        text = f"{text[:60]}…"
    return f"{type(value).__name__} {text}"


def is_str(instance: Any, attribute: Any, value: Any) -> None:
    """An attrs validator: the value is a ``str`` (a ``TypeError`` naming the field)."""
    if not isinstance(value, str):
        raise TypeError(
            f"{type(instance).__name__}.{attribute.name} must be a str, not {describe_value(value)}"
        )


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


NOT_A_SEQUENCE = (str, bytes, bytearray, memoryview)
"""Iterables that are never a sequence of messages (or of anything a run takes)."""

_MESSAGE_TYPE_SET = frozenset(MESSAGE_TYPES)


def as_history(value: object, what: str) -> tuple[Message, ...]:
    """``value`` — a transcript (``Context.messages``, an agent's messages, what a hook
    returned, what a writer is given) — as a tuple of messages; the converter of the
    transcript fields.

    Only the types are checked (the free-form values of prompts and queued messages are
    checked too, by ``_inputs``: those are new to the transcript).

    Raises:
        TypeError: not a sequence (a ``str``, None...), or an item that is not a message;
            the message starts with ``what``.
    """
    if isinstance(value, NOT_A_SEQUENCE) or not isinstance(value, Iterable):
        raise TypeError(f"{what} must be a sequence of messages, not {describe_value(value)}")
    out = value if type(value) is tuple else tuple(value)
    if not set(map(type, out)) <= _MESSAGE_TYPE_SET:  # the usual case, checked in C
        for i, message in enumerate(out):
            if not isinstance(message, MESSAGE_TYPES):
                raise TypeError(
                    f"{what}[{i}] is {describe_value(message)}, not a message (UserMessage, "
                    "AssistantMessage, ToolResultMessage or CustomMessage; for text, "
                    "UserMessage.text(...))"
                )
    return out
