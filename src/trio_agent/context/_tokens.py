"""Token accounting without a tokenizer: the provider's usage when it reports it, an
estimate from characters in between, and the context windows of known models."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Final

from .._core import AssistantMessage, CustomMessage, Image, Text, Thinking, ToolCall

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from .._core import Message, Model, ModelOptions, Tool

__all__ = [
    "CONTEXT_WINDOWS",
    "DEFAULT_RATIO",
    "TokenCounter",
    "context_window",
    "message_chars",
]

DEFAULT_RATIO: Final = 4.0
"""Characters per token before any usage was seen: about right for English text and
code with the tokenizers of OpenAI's and Anthropic's models."""

_IMAGE_CHARS: Final = 1600 * 4
"""What an image counts as: about 1,600 tokens (a large image on either provider)."""
_MESSAGE_CHARS: Final = 16
"""What a message costs beside its content (role, separators)."""

CONTEXT_WINDOWS: Final[Mapping[str, int]] = {
    # OpenAI
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-5": 400_000,
    "gpt-5-mini": 400_000,
    "gpt-5-nano": 400_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    # Anthropic
    "claude-opus-4": 200_000,
    "claude-opus-4-1": 200_000,
    "claude-opus-4-5": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-sonnet-4-5": 200_000,
    "claude-haiku-4-5": 200_000,
    "claude-3-7-sonnet": 200_000,
    "claude-3-5-haiku": 200_000,
}
"""Context windows in tokens of known models, by name. A name with a date or version
suffix (``claude-sonnet-4-5-20250929``) matches its longest listed prefix.
``ModelOptions.context_window`` (or a policy's ``window``) overrides the table."""


def context_window(model: str) -> int | None:
    """The context window in tokens of the model named ``model``, from a table of known
    OpenAI and Anthropic models (an exact name, else the longest listed name it starts
    with followed by ``-``, so dated names match); None when unknown. Set
    ``ModelOptions.context_window`` for another model, or to override the table."""
    if model in CONTEXT_WINDOWS:
        return CONTEXT_WINDOWS[model]
    best = None
    for name, window in CONTEXT_WINDOWS.items():
        if model.startswith(name + "-") and (best is None or len(name) > len(best[0])):
            best = (name, window)
    return None if best is None else best[1]


def window_of(options: ModelOptions, model: Model, override: int | None) -> int | None:
    """The window a request has: ``options.context_window``, else ``override`` (a
    policy's own), else the table's entry for the model named in the options or the
    model object's ``model`` attribute; None when none says."""
    if options.context_window is not None:
        return options.context_window
    if override is not None:
        return override
    name = options.model or getattr(model, "model", None)
    return context_window(name) if isinstance(name, str) else None


def _json_chars(value: object) -> int:
    try:
        return len(json.dumps(value, ensure_ascii=False, default=str))
    except (TypeError, ValueError):
        return len(str(value))


def message_chars(message: Message) -> int:
    """The characters ``message`` shows the model, about: its text, reasoning, calls
    (name and argument JSON), an image as about 1,600 tokens, plus a small overhead.
    A ``CustomMessage`` counts nothing (it is not sent by default). Costs a pass over
    the message's blocks, not over its characters (except a call's arguments)."""
    if type(message) is CustomMessage:
        return 0
    n = _MESSAGE_CHARS
    for block in message.content:
        kind = type(block)
        if kind is Text:
            n += len(block.text)  # type: ignore[union-attr]
        elif kind is Thinking:
            n += len(block.thinking)  # type: ignore[union-attr]
        elif kind is ToolCall:
            assert isinstance(block, ToolCall)
            n += len(block.name) + len(block.id) + _json_chars(block.arguments)
        elif kind is Image:
            n += _IMAGE_CHARS
    return n


def fixed_chars(system_prompt: str, tools: Iterable[Tool]) -> int:
    """The characters every request sends besides its messages: the system prompt and
    each tool's name, description and schema."""
    n = len(system_prompt)
    for t in tools:
        n += len(t.name) + len(t.description) + _json_chars(t.parameters)
    return n


class TokenCounter:
    """Estimates tokens from characters, calibrated by the usage providers report.

    ``ratio`` starts at 4 characters per token. When a reply reports
    its prompt tokens, :meth:`observe` sets the ratio to the characters of the request
    it answered divided by them (bounded to 1.5..6, the range of real tokenizers on
    text, code and JSON), so the next estimates follow the model's real tokenizer for
    this conversation.
    """

    __slots__ = ("ratio", "sent_chars", "sent_len", "sent_tokens")

    def __init__(self, ratio: float = DEFAULT_RATIO) -> None:
        self.ratio = ratio
        """Characters per token."""
        self.sent_len = -1
        """The transcript's length when the last view was sent (-1: none pending)."""
        self.sent_chars = 0
        """That view's characters (system prompt and tools included)."""
        self.sent_tokens = 0
        """That view's estimated tokens."""

    def tokens(self, chars: int) -> int:
        """The estimated tokens of ``chars`` characters."""
        return math.ceil(chars / self.ratio)

    def sent(self, transcript_len: int, chars: int) -> None:
        """A view of ``chars`` characters goes out for a transcript of
        ``transcript_len`` messages (its reply will be the next message)."""
        self.sent_len = transcript_len
        self.sent_chars = chars
        self.sent_tokens = self.tokens(chars)

    def observe(self, messages: tuple[Message, ...]) -> None:
        """Calibrate from the reply to the last view sent, when ``messages`` holds it
        and it reports prompt tokens."""
        i = self.sent_len
        if 0 <= i < len(messages):
            reply = messages[i]
            if type(reply) is AssistantMessage:
                prompt = reply.usage.prompt_tokens
                if prompt > 0 and self.sent_chars > 0:
                    self.ratio = min(6.0, max(1.5, self.sent_chars / prompt))
        self.sent_len = -1
