"""The model protocol: what the loop asks of a model, and the request it sends."""

from __future__ import annotations

from collections.abc import AsyncIterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from ._messages import Message
from ._output import OutputRequest

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from ._events import AssistantEvent

__all__ = ["REASONING_LEVELS", "Model", "ModelOptions", "ModelRequest", "ToolSpec"]

REASONING_LEVELS = ("minimal", "low", "medium", "high", "xhigh")
"""The levels of ``ModelOptions.reasoning`` that both providers know, least first
(``"off"`` asks for no reasoning)."""


@attrs.frozen(kw_only=True)
class ModelOptions:
    """Per-request options passed through to the model (``None`` = the model's default).

    Attributes:
        model: the model name to ask for, overriding the one the model object was made
            with.
        reasoning: how much the model should reason (``"low"``, ``"medium"``,
            ``"high"``...), for models that support it; ``"off"`` sends nothing.
        max_tokens: the most output tokens of one reply.
        temperature: the sampling temperature.
        extra: more fields for the provider, merged into the request body as they are.
        context_window: the model's context window in tokens, for a context policy
            (``LoopConfig.context``); None looks the model up in a table of known
            models (``trio_agent.context.context_window``). Never sent to the provider.
        cache: prompt caching. None: the provider's default (Anthropic marks cache
            breakpoints unless the model was made with ``prompt_cache=False``; OpenAI
            caches long prompts by itself). False: no cache breakpoints. True: cache
            breakpoints on the system prompt, the tool list and the last user turn
            (Anthropic). A string: breakpoints too, and the cache key OpenAI routes
            requests by (``prompt_cache_key``: requests sharing a long prefix and a key
            hit the same cache). Cache reads and writes are counted in ``Usage``.
    """

    model: str | None = None
    reasoning: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)
    context_window: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(1))
    )
    cache: bool | str | None = None


@attrs.frozen(kw_only=True)
class ToolSpec:
    """What the model is told about a tool: its name, description and JSON Schema.

    Attributes:
        name: the tool's name, as the model calls it.
        description: what the tool does, for the model.
        parameters: the JSON Schema of its arguments.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class ModelRequest:
    """One request to a model. ``messages`` are already converted for the model.

    Attributes:
        system_prompt: the instructions ("" for none).
        messages: the transcript as the model should see it (after
            ``transform_context`` and ``convert_to_llm``); every tool call in it has its
            result.
        tools: the tools the model may call.
        options: the request's options.
        output: what the run asks of the final answer when it wants a structured
            output (the mode and the schema; see :class:`OutputRequest`), else None.
            In ``tool`` mode the final-answer tool is among ``tools``; in ``prompted``
            mode the system prompt asks for the JSON.
    """

    system_prompt: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    options: ModelOptions = attrs.field(factory=ModelOptions)
    output: OutputRequest | None = None


@runtime_checkable
class Model(Protocol):
    """Anything that can stream an assistant reply.

    ``stream(request)`` returns an async context manager whose value is an async iterable
    of :data:`AssistantEvent`. The loop only iterates it; leaving the ``async with`` must
    stop the producer (that is how an abort reaches a provider). A provider doing I/O
    runs its producer in its own task and hands over a memory channel
    (``trio.as_safe_channel``), or, as the HTTP providers do, iterates an async
    generator that never yields inside a cancel scope or nursery and closes it
    (``aclose()``) on leaving; an in-memory model may iterate a plain list.

    A well-behaved stream is ``Start``, block events, then one ``Done`` or ``Error``
    carrying the final message. The loop survives any other shape: a stream that
    ends without a terminal event, or raises, becomes an ``error`` reply keeping the partial
    content.
    """

    def stream(
        self, request: ModelRequest
    ) -> AbstractAsyncContextManager[AsyncIterable[AssistantEvent]]:
        """Stream the reply to ``request``.

        Returns:
            An async context manager whose value is an async iterable of assistant
            events. Leaving it, early or not, must stop whatever produces them.
        """
        ...
