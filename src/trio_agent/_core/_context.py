"""What a context policy is (``LoopConfig.context``) and how a run recognises a request
the provider refused as too long. The policies themselves are in
``trio_agent.context``."""

from __future__ import annotations

import re
from typing import Final, Protocol, runtime_checkable

import attrs

from . import _events as ev
from ._messages import AssistantMessage, Message
from ._model import Model, ModelOptions
from ._tools import Tool

__all__ = [
    "CONTEXT_OVERFLOW",
    "ContextPolicy",
    "ContextRequest",
    "ContextView",
    "is_context_overflow",
]

CONTEXT_OVERFLOW: Final = "context overflow"
"""How a provider of this package starts the ``error_message`` of a reply whose request
it recognised as refused for being longer than the model's context window (from the
API's documented error: OpenAI's ``context_length_exceeded``, Anthropic's ``prompt is too
long``)."""

# The documented overflow texts of other OpenAI-compatible servers and proxies, for
# models that do not mark their error replies.
_OVERFLOW_TEXTS: Final = re.compile(
    r"context[_ ]length[_ ]exceeded|prompt is too long|maximum context length is \d+"
    r"|exceeds? the (?:model's )?context window|context window exceeds"
    r"|input is too long for requested model",
    re.IGNORECASE,
)


def is_context_overflow(message: Message) -> bool:
    """Whether ``message`` is an ``error`` reply saying the request was too long for the
    model's context window: its ``error_message`` starts with ``"context overflow"``
    (what this package's providers write), or holds one of the documented overflow
    texts of OpenAI-compatible servers."""
    if type(message) is not AssistantMessage or message.stop_reason != "error":
        return False
    text = message.error_message or ""
    return text.startswith(CONTEXT_OVERFLOW) or _OVERFLOW_TEXTS.search(text) is not None


@attrs.frozen(kw_only=True)
class ContextRequest:
    """What a context policy is told about the request it shapes.

    Attributes:
        system_prompt: the request's instructions (they count against the window).
        tools: the tools the request offers (their schemas count too).
        model: the model the request goes to (a policy that summarises may use it).
        options: the request's options (``context_window``, ``max_tokens``, ``model``).
        overflow: the provider refused the run's last request as too long: compact
            harder than the policy's limits ask.
    """

    system_prompt: str
    tools: tuple[Tool, ...]
    model: Model
    options: ModelOptions
    overflow: bool = False


@attrs.frozen(kw_only=True)
class ContextView:
    """What a context policy answers: the messages the request shows the model.

    Attributes:
        messages: the view (the transcript itself when nothing is compacted).
        compacted: the event to report when this view compacts the history in a way not
            reported before (a new cut, a new summary); None otherwise.
    """

    messages: tuple[Message, ...]
    compacted: ev.ContextCompacted | None = None


@runtime_checkable
class ContextPolicy(Protocol):
    """A context policy: shapes the history each request shows the model, so that long
    runs fit the model's context window (``LoopConfig.context``; the policies are in
    ``trio_agent.context``).

    ``compact`` is called before each request with the whole transcript; it never
    changes the transcript. It may await (a summary is a model request of its own); a
    cancel (an abort) stops it like any step of the run.
    """

    async def compact(self, messages: tuple[Message, ...], request: ContextRequest) -> ContextView:
        """The view of ``messages`` to send. Must keep every tool call with its
        results, right after it."""
        ...
