"""``Anthropic``: the Anthropic Messages API, streamed.

Wire format (``POST {base_url}/v1/messages`` with ``stream: true``): named server-sent
events — ``message_start`` (usage so far), then per content block ``content_block_start``
→ ``content_block_delta``… → ``content_block_stop``, then ``message_delta`` (stop reason,
final usage) and ``message_stop``; ``ping`` and ``error`` (such as ``overloaded_error``,
sent with HTTP status 200) may come anywhere. Deltas: ``text_delta``,
``thinking_delta``, ``signature_delta`` (the thinking block's signature, needed to send
it back), ``input_json_delta`` (fragments of a tool call's input, parsed at the block's
end; no fragment means ``{}``). ``redacted_thinking`` blocks carry opaque ``data``, kept as
the signature of a ``Thinking(redacted=True)``. Blocks of other types (server tools,
citations) are ignored.

Stop reasons: ``end_turn``, ``stop_sequence``, ``pause_turn`` → stop; ``max_tokens``,
``model_context_window_exceeded`` → length; ``tool_use`` → tool_use; ``refusal`` (and
anything unknown) → error. Anthropic's ``input_tokens`` already excludes cached tokens.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import attrs

from .._core import (
    REASONING_LEVELS,
    AssistantMessage,
    Image,
    StopReason,
    Text,
    Thinking,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ._history import merge_turn, normalize_id, prepare
from ._http import HTTPModel
from ._reply import ReplyBuilder, StreamFault, json_frame, str_field
from ._session import describe_error

if TYPE_CHECKING:
    from .._core import ModelRequest
    from .._core import events as ev
    from ._history import History
    from ._options import HTTPOptions
    from ._sse import SSEEvent

__all__ = ["THINKING_BUDGETS", "Anthropic", "anthropic_messages", "thinking_budget"]

API_VERSION = "2023-06-01"

THINKING_BUDGETS: Mapping[str, int] = dict(
    zip(REASONING_LEVELS, (1024, 2048, 8192, 16384, 32000), strict=True)
)
"""``ModelOptions.reasoning`` level → thinking budget in tokens (pi's defaults)."""

_EPHEMERAL = {"type": "ephemeral"}


class Anthropic(HTTPModel):
    """A Claude model behind the Anthropic Messages API.

    Args:
        model: the model name sent in each request (``ModelOptions.model`` overrides it).
        base_url: the API root (``/v1/messages`` is appended).
        api_key: sent as ``x-api-key``; default ``ANTHROPIC_API_KEY`` from the environment.
            Surrounding whitespace is stripped; the key never appears in a repr or an
            error message.
        max_tokens: ``max_tokens`` when ``ModelOptions.max_tokens`` is not set (the API
            requires one). With thinking on, the thinking budget is added to it.
        prompt_cache: mark cache breakpoints (``cache_control``) when
            ``ModelOptions.cache`` is None: on the system prompt, the last tool, the last
            user turn and the user turn before it (at most 4, the API's limit), so a long
            agent run re-reads its history from the prompt cache. ``ModelOptions.cache``
            False or True overrides it per request.
        headers: extra request headers (``anthropic-beta``...); their values are kept
            out of error texts as the key is.
        http: timeouts, pool limits and retries.

    ``ModelOptions.reasoning`` (``minimal``/``low``/``medium``/``high``/``xhigh``, or a
    number of tokens) turns on extended thinking with that budget (and then no
    ``temperature`` is sent: the API refuses both). ``extra`` is merged into the body.

    Structured output (a run's ``output_type``): ``auto`` picks ``tool`` here
    (:attr:`structured_output`): the final-answer tool, with ``tool_choice: {"type":
    "any"}`` so the reply calls a tool — left out when thinking is on, which the API
    allows only with ``auto`` tool choice. Every Claude model with tools takes it.
    ``native`` sends ``output_config.format`` (a ``json_schema`` with the strict form of
    the schema, else the schema as it is), which only the newer models accept; choose
    it with ``StructuredOutput(..., mode="native")``.
    """

    structured_output: Literal["native", "tool", "prompted"] = "tool"
    """The structured-output mode ``auto`` uses for this model: ``tool``."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.anthropic.com",
        api_key: str | None = None,
        max_tokens: int = 8192,
        prompt_cache: bool = True,
        headers: Mapping[str, str] | None = None,
        http: HTTPOptions | None = None,
    ) -> None:
        super().__init__(
            model,
            provider="anthropic",
            base_url=base_url,
            api_key=api_key,
            key_env="ANTHROPIC_API_KEY",
            headers=headers,
            http=http,
        )
        self._max_tokens = max_tokens
        self._cache = prompt_cache

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (no I/O; useful to inspect).

        Raises:
            ValueError: ``ModelOptions.reasoning`` is not a known level or a number.
        """
        options = request.options
        cache = self._cache if options.cache is None else bool(options.cache)
        history = prepare(request.messages, provider=self.provider, normalize_id=_fit_id)
        body: dict[str, Any] = {
            "model": options.model or self.model,
            "max_tokens": options.max_tokens or self._max_tokens,
            "messages": anthropic_messages(history, self.provider, cache=cache),
            "stream": True,
        }
        if request.system_prompt:
            system: dict[str, Any] = {"type": "text", "text": request.system_prompt}
            if cache:
                system["cache_control"] = dict(_EPHEMERAL)
            body["system"] = [system]
        if request.tools:
            body["tools"] = [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": {"type": "object", **tool.parameters},
                }
                for tool in request.tools
            ]
            if cache:
                # The tool list comes first in the prompt: one breakpoint caches it all.
                body["tools"][-1]["cache_control"] = dict(_EPHEMERAL)
        budget = thinking_budget(options.reasoning)
        if budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            body["max_tokens"] += budget
        elif options.temperature is not None:
            body["temperature"] = options.temperature
        output = request.output
        if output is not None:
            if output.mode == "native":
                strict = output.strict_schema
                schema = dict(strict if strict is not None else output.schema)
                body["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
            elif output.mode == "tool" and budget is None:
                body["tool_choice"] = {"type": "any"}
        body.update(options.extra)
        return body

    _path = "/v1/messages"
    _fixed_headers: Mapping[str, str] = {"anthropic-version": API_VERSION}

    def _auth_headers(self, key: str) -> dict[str, str]:
        return {"x-api-key": key}

    def _decoder(self, builder: ReplyBuilder) -> _Decoder:
        return _Decoder(builder)


# --- request ------------------------------------------------------------------------


def _fit_id(call_id: str) -> str:
    # Anthropic requires ids matching ^[a-zA-Z0-9_-]+$, at most 64 characters.
    return normalize_id(call_id, max_length=64, pattern=r"[^a-zA-Z0-9_-]")


def thinking_budget(level: str | None) -> int | None:
    """The thinking budget in tokens for ``ModelOptions.reasoning`` (None: no thinking).

    Raises:
        ValueError: ``level`` is not a known level, ``off`` or a number.
    """
    if level is None or level == "off":
        return None
    if level in THINKING_BUDGETS:
        return THINKING_BUDGETS[level]
    if level.isdigit():
        return int(level)
    raise ValueError(
        f"unknown reasoning level {level!r}: use one of {', '.join(THINKING_BUDGETS)}, "
        "'off', or a number of tokens"
    )


def _image(image: Image) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": image.mime_type, "data": image.data},
    }


def _blocks(content: tuple[Text | Image, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in content:
        if type(block) is Text:
            # The API rejects empty text blocks.
            if block.text.strip():
                out.append({"type": "text", "text": block.text})
        elif type(block) is Image:
            out.append(_image(block))
    return out


def _assistant_blocks(message: AssistantMessage, provider: str) -> list[dict[str, Any]]:
    same = message.provider == provider
    out: list[dict[str, Any]] = []
    for block in message.content:
        if type(block) is Text:
            if block.text.strip():
                out.append({"type": "text", "text": block.text})
        elif type(block) is Thinking:
            if same and block.redacted and block.signature:
                out.append({"type": "redacted_thinking", "data": block.signature})
            elif same and block.signature and not block.redacted:
                out.append(
                    {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
                )
            elif block.thinking.strip() and not block.redacted:
                # Without a valid signature the API rejects a thinking block: another
                # model's reasoning goes back as text (as pi does).
                out.append({"type": "text", "text": block.thinking})
        elif type(block) is ToolCall:
            out.append(
                {
                    "type": "tool_use",
                    "id": block.id,
                    "name": block.name,
                    "input": dict(block.arguments),
                }
            )
    return out


def anthropic_messages(
    history: History, provider: str, *, cache: bool = False
) -> list[dict[str, Any]]:
    """The Messages API ``messages`` for a prepared history.

    The results of one assistant message go, in order, as ``tool_result`` blocks of the
    next user turn (followed by any user message that came after them: consecutive
    turns of one role are merged, as the API would do). With ``cache`` the last block of
    the last user turn, and of the user turn before it, are cache breakpoints: the
    second is where the previous request of an agent run put its last one, so its
    cached prefix is found again however many blocks were added since.
    """
    out: list[dict[str, Any]] = []
    for message in history:
        if type(message) is UserMessage:
            merge_turn(out, "user", "content", _blocks(message.content))
        elif type(message) is AssistantMessage:
            merge_turn(out, "assistant", "content", _assistant_blocks(message, provider))
        elif type(message) is ToolResultMessage:
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
            content = _blocks(message.content)
            if content:
                result["content"] = content
            if message.is_error:
                result["is_error"] = True
            merge_turn(out, "user", "content", [result])
    if cache:
        users = [turn for turn in out if turn["role"] == "user"][-2:]
        for turn in users:
            turn["content"][-1] = {**turn["content"][-1], "cache_control": dict(_EPHEMERAL)}
    return out


# --- response -----------------------------------------------------------------------


def _int(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _usage(previous: Usage, raw: Any) -> Usage:
    """``previous`` updated with the counts present in ``raw`` (absent ones are kept)."""
    if not isinstance(raw, Mapping):
        return previous
    changes: dict[str, int] = {}
    for ours, theirs in (
        ("input_tokens", "input_tokens"),
        ("output_tokens", "output_tokens"),
        ("cache_read_tokens", "cache_read_input_tokens"),
        ("cache_write_tokens", "cache_creation_input_tokens"),
    ):
        value = _int(raw.get(theirs))
        if value is not None:
            changes[ours] = value
    return attrs.evolve(previous, **changes) if changes else previous


_STOP: Mapping[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_use",
}


class _Decoder:
    """Messages API stream events → assistant events (sans-IO)."""

    terminator = "message_stop"

    def __init__(self, builder: ReplyBuilder) -> None:
        self.builder = builder
        self.finished = False
        self._stop_reason: str | None = None
        self._ignored: set[int] = set()

    def feed(self, event: SSEEvent) -> list[ev.AssistantEvent]:
        data = json_frame(event.data)
        kind = data.get("type") or event.event
        b = self.builder
        if kind == "content_block_delta":
            index = self._index(data)
            delta = data.get("delta")
            if index in self._ignored or not isinstance(delta, Mapping):
                return []
            dtype = delta.get("type")
            if dtype == "text_delta":
                return b.text(index, str_field(delta, "text"))
            if dtype == "input_json_delta":
                if not b.is_open(index):
                    raise StreamFault(
                        f"input_json_delta for block {index}, which is not a tool call"
                    )
                return b.call_delta(index, str_field(delta, "partial_json"))
            if dtype == "thinking_delta":
                return b.thinking(index, str_field(delta, "thinking"))
            if dtype == "signature_delta":
                return b.signature(index, str_field(delta, "signature"))
            return []
        if kind == "content_block_start":
            return self._block_start(data)
        if kind == "content_block_stop":
            index = self._index(data)
            if index in self._ignored:
                return []
            return b.close(index)
        if kind == "message_start":
            message = data.get("message")
            if isinstance(message, Mapping):
                b.usage = _usage(b.usage, message.get("usage"))
            return []
        if kind == "message_delta":
            delta = data.get("delta")
            if isinstance(delta, Mapping) and delta.get("stop_reason"):
                self._stop_reason = str(delta["stop_reason"])
            b.usage = _usage(b.usage, data.get("usage"))
            return []
        if kind == "message_stop":
            self.finished = True
            return b.close_all()
        if kind == "error":
            described = describe_error(data) or event.data[:200]
            raise StreamFault(f"the server reported an error mid-stream: {described}")
        # ping, and event types added to the API later.
        return []

    @staticmethod
    def _index(data: Mapping[str, Any]) -> int:
        index = data.get("index")
        if type(index) is not int:
            raise StreamFault(f"malformed stream event: no block index in {json.dumps(data)[:200]}")
        return index

    def _block_start(self, data: Mapping[str, Any]) -> list[ev.AssistantEvent]:
        b = self.builder
        index = self._index(data)
        block = data.get("content_block")
        if not isinstance(block, Mapping):
            raise StreamFault(f"malformed content_block_start: {json.dumps(data)[:200]}")
        btype = block.get("type")
        self._ignored.discard(index)
        if btype == "text":
            return b.text(index, str_field(block, "text"))
        if btype == "thinking":
            out = b.thinking(index, str_field(block, "thinking"))
            signature = str_field(block, "signature")
            if signature:
                out.extend(b.signature(index, signature))
            return out
        if btype == "redacted_thinking":
            return b.redacted_thinking(index, str_field(block, "data"))
        if btype == "tool_use":
            out = b.call_start(index, str_field(block, "id"), str_field(block, "name"))
            initial = block.get("input")
            if isinstance(initial, Mapping) and initial:
                # Input given whole at the start (no input_json_delta will follow).
                out.extend(b.call_delta(index, json.dumps(initial)))
            return out
        self._ignored.add(index)
        return []

    def finish(self) -> ev.Done | ev.Error:
        reason = self._stop_reason
        if reason is None:
            return self.builder.finish("tool_use" if self.builder.has_calls else "stop")
        stop = _STOP.get(reason)
        if stop is not None:
            return self.builder.finish(stop)
        if reason == "refusal":
            return self.builder.finish("error", "the model refused to answer (stop_reason refusal)")
        return self.builder.finish(
            "error", f"the model ended the reply with stop_reason {reason!r}"
        )
