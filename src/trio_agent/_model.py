"""The model protocol: what the loop asks of a model, and the request it sends."""

from __future__ import annotations

from collections.abc import AsyncIterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from ._messages import Message, describe_value

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from ._events import AssistantEvent

__all__ = ["Model", "ModelOptions", "ModelRequest", "ToolSpec"]


@attrs.frozen(kw_only=True)
class ModelOptions:
    """Per-request options passed through to the model (``None`` = the model's default)."""

    model: str | None = None
    reasoning: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ToolSpec:
    """What the model is told about a tool: its name, description and JSON Schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class ModelRequest:
    """One request to a model. ``messages`` are already converted for the model."""

    system_prompt: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    options: ModelOptions = attrs.field(factory=ModelOptions)


@runtime_checkable
class Model(Protocol):
    """Anything that can stream an assistant reply.

    ``stream(request)`` returns an async context manager whose value is an async iterable
    of :data:`AssistantEvent`. The loop only iterates it; leaving the ``async with`` must
    stop the producer (that is how an abort reaches a provider). A provider doing I/O
    typically runs its producer in its own task and hands over a memory channel
    (``trio.as_safe_channel``); an in-memory model may iterate a plain list.

    A well-behaved stream is ``Start``, block events, then one ``Done`` or ``Error``
    carrying the final message. The loop survives any other shape: a stream that
    ends without a terminal event, or raises, becomes an ``error`` reply keeping the partial
    content.
    """

    def stream(
        self, request: ModelRequest
    ) -> AbstractAsyncContextManager[AsyncIterable[AssistantEvent]]: ...


def check_model(model: object, what: str = "model") -> None:
    """Raises TypeError, naming ``what`` and the value, unless ``model`` has a callable
    ``stream`` (the :class:`Model` protocol): caught where a run or an agent is made,
    not at its first request."""
    if not callable(getattr(model, "stream", None)):
        raise TypeError(
            f"{what} must be a Model (an object with a stream(request) method, such as a "
            f"provider or ScriptedModel), not {describe_value(model)}"
        )
