"""Content blocks and messages: the transcript's vocabulary.

All classes are frozen, keyword-only attrs classes; sequences are tuples. Each carries a
wire tag as a class attribute (``type`` for blocks, ``role`` for messages) so that a
transcript round-trips through JSON exactly. Don't subclass these: the unions are closed.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal, TypeAlias

import attrs

from ._cost import price

__all__ = [
    "AssistantMessage",
    "ContentBlock",
    "CustomMessage",
    "Image",
    "Message",
    "StopReason",
    "Text",
    "Thinking",
    "Tokens",
    "ToolCall",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
]

StopReason: TypeAlias = Literal["stop", "length", "tool_use", "error", "aborted"]
"""Why the model stopped producing one assistant message (``AssistantMessage.stop_reason``).

- ``stop``: the model finished its answer.
- ``length``: it hit its output token limit (the reply is cut short).
- ``tool_use``: it asks for the tool calls in its content.
- ``error``: the model or its transport failed; ``error_message`` says how.
- ``aborted``: the run was aborted or interrupted while the reply streamed.

A reply ending ``length``, ``error`` or ``aborted`` keeps the content it had, and any tool
call in it gets a *skipped* result instead of running.
"""


def _now() -> float:
    return time.time()


def _tuple(value: Any) -> tuple[Any, ...]:
    return value if type(value) is tuple else tuple(value)


@attrs.frozen(kw_only=True)
class Text:
    """A piece of text, in any message.

    Attributes:
        type: ``"text"``, the tag in JSON.
        text: the text.
        signature: an opaque provider token, kept as is and sent back with the block;
            None when there is none.
    """

    type: ClassVar[Literal["text"]] = "text"
    text: str
    signature: str | None = None


@attrs.frozen(kw_only=True)
class Thinking:
    """The model's reasoning, in an assistant message.

    Attributes:
        type: ``"thinking"``, the tag in JSON.
        thinking: the reasoning text (opaque provider data when ``redacted``).
        signature: the provider's opaque signature of the block, sent back with it;
            None when there is none.
        redacted: whether the provider withheld the reasoning, leaving only opaque data.
    """

    type: ClassVar[Literal["thinking"]] = "thinking"
    thinking: str
    signature: str | None = None
    redacted: bool = False


@attrs.frozen(kw_only=True)
class Image:
    """An image, in a user or tool-result message.

    Attributes:
        type: ``"image"``, the tag in JSON.
        data: the image file's bytes, base64-encoded.
        mime_type: its media type, like ``image/png``.
    """

    type: ClassVar[Literal["image"]] = "image"
    data: str
    mime_type: str


@attrs.frozen(kw_only=True)
class ToolCall:
    """A tool call the model declared, in an assistant message.

    Its result is the ``ToolResultMessage`` with the same id, which the loop places
    right after the assistant message, in declaration order.

    Attributes:
        type: ``"tool_call"``, the tag in JSON.
        id: the call's id, unique in the transcript (the loop renames an id the model
            reused: ``call_0`` becomes ``call_0~2``).
        name: the name of the tool to call.
        arguments: the arguments, a JSON object as the model sent it. Don't mutate it.
        raw_arguments: the argument text as the model sent it when it was not a JSON
            object (malformed or cut-short JSON); ``arguments`` is then empty and the
            call never runs: its result is an error naming the JSON problem. None for a
            well-formed call. Providers keep such a call only for the final-answer tool
            of a structured output (it is sent back so the model can correct it); any
            other call with malformed arguments fails the reply.
    """

    type: ClassVar[Literal["tool_call"]] = "tool_call"
    id: str
    name: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict)
    raw_arguments: str | None = None


ContentBlock: TypeAlias = Text | Thinking | Image | ToolCall
"""Any content block; each message class says which it may hold."""


@attrs.frozen(kw_only=True)
class Usage:
    """Token counts of one reply (or, summed with ``+``, of several).

    Counts are what the provider reported; a provider that reports none leaves zeros.

    Attributes:
        input_tokens: prompt tokens read without the cache (cached ones excluded).
        output_tokens: tokens the model produced.
        cache_read_tokens: prompt tokens read from the provider's prompt cache.
        cache_write_tokens: prompt tokens written to the provider's prompt cache.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        """The two counts summed, field by field (one of them :data:`NO_USAGE`: the
        other, no new object)."""
        if not isinstance(other, Usage):
            return NotImplemented
        if other is NO_USAGE:
            return self
        if self is NO_USAGE:
            return other
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )

    def cost(self, model: str, provider: str = "") -> float | None:
        """These tokens' price in USD on ``model`` served by ``provider`` (a provider
        name such as ``openai``, ``anthropic``, ``gemini``), cache reads and writes
        priced as such, from the ``genai-prices`` table (the ``cost`` extra).

        Returns None — never a guess — when the table knows no such model or provider,
        or ``genai-prices`` is not installed; 0.0 when no tokens were counted.
        """
        return price(self, model, provider)

    @property
    def prompt_tokens(self) -> int:
        """Every prompt token: input plus cache read and write."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def total(self) -> int:
        """Every token counted, cached ones included."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )


def total_cost(messages: Iterable[Message]) -> float | None:
    """The summed price in USD of the assistant messages among ``messages``, each priced
    by its own model and provider (see ``Usage.cost``); None if any of them cannot be
    priced."""
    total = 0.0
    for message in messages:
        if type(message) is AssistantMessage:
            cost = price(message.usage, message.model, message.provider)
            if cost is None:
                return None
            total += cost
    return total


def sum_usage(messages: Iterable[Message]) -> Usage:
    """The ``Usage`` of the assistant messages among ``messages``, summed field by field
    (plain integer sums: cheap enough to run over a whole run at its end). Nothing
    counted is :data:`NO_USAGE` itself (no new object)."""
    i = o = r = w = 0
    for m in messages:
        if type(m) is AssistantMessage:
            u = m.usage
            if u is NO_USAGE:
                continue
            i += u.input_tokens
            o += u.output_tokens
            r += u.cache_read_tokens
            w += u.cache_write_tokens
    if not (i or o or r or w):
        return NO_USAGE
    return Usage(input_tokens=i, output_tokens=o, cache_read_tokens=r, cache_write_tokens=w)


NO_USAGE = Usage()
"""No tokens counted (one shared, immutable instance)."""


MAX_TOKEN_ID = 2**32 - 1
"""The largest token id a transcript stores (ids are written as unsigned 32-bit
integers; every tokenizer's vocabulary is far smaller)."""


def _token_ids(value: Any) -> tuple[int, ...]:
    ids = value if type(value) is tuple else tuple(value)
    for i in ids:
        if type(i) is not int:
            raise TypeError(f"a token id must be an int, got {type(i).__name__}")
    if ids and (min(ids) < 0 or max(ids) > MAX_TOKEN_ID):
        raise ValueError(f"token ids must be between 0 and {MAX_TOKEN_ID}")
    return ids


def _logprobs(value: Any) -> tuple[float, ...]:
    values = tuple(float(v) if type(v) is int else v for v in value)
    for v in values:
        if type(v) is not float:
            raise TypeError(f"a log-probability must be a float, got {type(v).__name__}")
    return values


@attrs.frozen(kw_only=True)
class Tokens:
    """The exact tokens behind one reply, as the inference server reported them.

    Filled in by a provider asked to capture tokens (``OpenAIChat(..., tokens=True)``
    against vLLM or SGLang), only on a reply that finished (``Done``): a reply that
    failed or was aborted carries none. Stored in the transcript with the message,
    packed (see the transcript format), and read back exactly.

    Attributes:
        prompt_ids: the ids of the whole prompt the server rendered for the request
            (system prompt, tools, history, with the chat template's own tokens).
        completion_ids: the ids the model generated, in order.
        logprobs: the log-probability of each completion id under the policy that
            sampled it (as many as ``completion_ids``), or ``()`` if not reported.
        model_version: the model the server reported serving the request (its
            ``model`` field; a server that names each weights update differently
            reports the version here); None if it reported none.

    Raises:
        TypeError: an id is not an ``int`` or a log-probability not a number.
        ValueError: an id is negative or above 2**32 - 1, or there are
            log-probabilities but not one per completion id.
    """

    prompt_ids: tuple[int, ...] = attrs.field(converter=_token_ids)
    completion_ids: tuple[int, ...] = attrs.field(converter=_token_ids)
    logprobs: tuple[float, ...] = attrs.field(default=(), converter=_logprobs)
    model_version: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.logprobs and len(self.logprobs) != len(self.completion_ids):
            raise ValueError(
                f"{len(self.logprobs)} log-probabilities for {len(self.completion_ids)} "
                "completion ids (expected one per id, or none)"
            )


@attrs.frozen(kw_only=True)
class UserMessage:
    """What the user (or the application on their behalf) said.

    Attributes:
        role: ``"user"``, the tag in JSON.
        content: the text and image blocks (a list is converted to a tuple).
        timestamp: when the message was made (seconds since the epoch).
    """

    role: ClassVar[Literal["user"]] = "user"
    content: tuple[Text | Image, ...] = attrs.field(converter=_tuple)
    timestamp: float = attrs.field(factory=_now)

    @classmethod
    def text(cls, text: str, *, timestamp: float | None = None) -> UserMessage:
        """A user message holding one :class:`Text` block."""
        if timestamp is None:
            return cls(content=(Text(text=text),))
        return cls(content=(Text(text=text),), timestamp=timestamp)


@attrs.frozen(kw_only=True)
class AssistantMessage:
    """One finished (or, in a ``MessageUpdate``, partial) reply of the model.

    Attributes:
        role: ``"assistant"``, the tag in JSON.
        content: the text, thinking and tool-call blocks, in the order streamed.
        stop_reason: why the model stopped (see ``StopReason``).
        usage: the tokens this reply cost, as the provider reported them.
        model: the model that answered, as the provider names it ("" if unknown).
        provider: the provider that served it (``openai``, ``anthropic``...; "" if
            unknown).
        error_message: what failed, when ``stop_reason`` is ``error`` or ``aborted``;
            None otherwise.
        timestamp: when the reply was made (seconds since the epoch).
        tokens: the exact token ids (and log-probabilities) behind the reply, when the
            provider was asked to capture them; None otherwise (and in transcripts
            written without them).
    """

    role: ClassVar[Literal["assistant"]] = "assistant"
    content: tuple[Text | Thinking | ToolCall, ...] = attrs.field(converter=_tuple)
    stop_reason: StopReason
    usage: Usage = NO_USAGE  # immutable, so one shared instance (none made per message)
    model: str = ""
    provider: str = ""
    error_message: str | None = None
    timestamp: float = attrs.field(factory=_now)
    tokens: Tokens | None = None

    @functools.cached_property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls, in declaration order (computed once)."""
        return tuple([b for b in self.content if type(b) is ToolCall])

    @property
    def text(self) -> str:
        """All text blocks joined (thinking excluded)."""
        return "".join(b.text for b in self.content if type(b) is Text)


@attrs.frozen(kw_only=True)
class ToolResultMessage:
    """The result of one tool call, paired with it by ``tool_call_id``.

    Attributes:
        role: ``"tool_result"``, the tag in JSON.
        tool_call_id: the id of the ``ToolCall`` this answers.
        tool_name: the name of the tool that was called.
        content: what the model reads: text and image blocks.
        details: JSON data for the application (never sent to the model); None if
            the tool gave none.
        structured_content: the result as JSON data, for programs (never sent to the
            model: ``content`` is what the model reads, usually its text rendering);
            when the tool declares an ``output_schema`` and the call succeeded, it
            matches that schema. None if the tool gave none. Written to a transcript
            only when set, so transcripts written before it existed load unchanged.
        is_error: whether the call failed; the model sees the content either way.
        timestamp: when the result was made (seconds since the epoch).
    """

    role: ClassVar[Literal["tool_result"]] = "tool_result"
    tool_call_id: str
    tool_name: str
    content: tuple[Text | Image, ...] = attrs.field(converter=_tuple)
    details: Any = None
    structured_content: Any = None
    is_error: bool = False
    timestamp: float = attrs.field(factory=_now)

    @property
    def text(self) -> str:
        """All text blocks joined."""
        return "".join(b.text for b in self.content if type(b) is Text)


@attrs.frozen(kw_only=True)
class CustomMessage:
    """An application's own entry in the transcript (a note, a UI marker...).

    Never sent to the model unless ``LoopConfig.convert_to_llm`` turns it into a message
    the model understands. ``content`` and ``details`` must be JSON values: anything else
    is refused where the message enters a run (``TypeError``).

    Attributes:
        role: ``"custom"``, the tag in JSON.
        kind: what sort of entry this is, the application's name for it.
        content: the entry's JSON data.
        details: more JSON data, for the application.
        timestamp: when the message was made (seconds since the epoch).
    """

    role: ClassVar[Literal["custom"]] = "custom"
    kind: str
    content: Any = None
    details: Any = None
    timestamp: float = attrs.field(factory=_now)


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage | CustomMessage
"""Any message of a transcript, told apart by its ``role``."""


MESSAGE_TYPES = (UserMessage, AssistantMessage, ToolResultMessage, CustomMessage)
"""The classes of :data:`Message`, for ``isinstance`` checks."""


def result_message(
    call: ToolCall,
    content: tuple[Text | Image, ...],
    *,
    is_error: bool,
    details: Any = None,
    structured_content: Any = None,
) -> ToolResultMessage:
    """The result of ``call`` with ``content`` (blocks already checked: see
    ``_inputs.result_content`` for a tool's own), made now."""
    return ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=content,
        details=details,
        structured_content=structured_content,
        is_error=is_error,
        timestamp=time.time(),
    )


def make_result(call: ToolCall, text: str, *, is_error: bool) -> ToolResultMessage:
    """The result of ``call`` holding one text: the loop's own (not found, skipped,
    aborted, timed out...)."""
    return result_message(call, (Text(text=text),), is_error=is_error)
