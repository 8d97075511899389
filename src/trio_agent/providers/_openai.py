"""``OpenAIChat``: the OpenAI chat-completions API, streamed (OpenAI, vLLM, llama.cpp, Ollama).

Wire format (``POST {base_url}/chat/completions`` with ``stream: true``): ``data:`` frames
holding ``chat.completion.chunk`` objects, then ``data: [DONE]``. Each chunk's
``choices[0].delta`` may carry ``content`` (text; a ``refusal`` is shown as text too), a
reasoning field (``reasoning_content``
from llama.cpp and vLLM, ``reasoning`` or ``reasoning_text`` elsewhere) and
``tool_calls`` fragments ``{index, id?, function: {name?, arguments?}}`` — accumulated by
``index``, the first fragment carrying the id and name. ``finish_reason`` ends the
choice; with ``stream_options.include_usage`` a last chunk has empty ``choices`` and the
``usage``. A frame with a top-level ``error`` is an error reported mid-stream.

Stop reasons: ``stop`` → stop, ``length`` → length, ``tool_calls``/``function_call`` →
tool_use, ``content_filter`` → error. A ``stop`` that comes with tool calls is read as
tool_use: several servers (Ollama, older vLLM, even OpenAI's gpt-4o, see
ollama/ollama#7963) finish a tool-calling reply with ``stop``.

Usage: ``prompt_tokens`` counts cached prompt tokens too; ``input_tokens`` excludes them
(they are ``cache_read_tokens``).

With ``stream=False`` the request asks for one ``chat.completion`` object: its
``choices[0].message`` is read like one big delta. With ``tokens=True`` the request asks
for ``return_token_ids`` and ``logprobs`` (vLLM, SGLang) and the finished reply keeps
them as ``AssistantMessage.tokens`` (see ``_tokens``).
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from .._core import (
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
from ._history import normalize_id, prepare
from ._http import HTTPModel
from ._reply import ReplyBuilder, StreamFault, json_frame
from ._session import describe_error
from ._tokens import TokenCollector

if TYPE_CHECKING:
    from .._core import ModelRequest
    from .._core import events as ev
    from ._history import History
    from ._options import HTTPOptions
    from ._sse import SSEEvent

__all__ = ["OpenAIChat", "openai_messages"]

_REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
_TEXT: Hashable = "text"
_THINKING: Hashable = "thinking"
_IMAGES_NOTE = "Attached image(s) from tool result:"


class OpenAIChat(HTTPModel):
    """A model behind an OpenAI-compatible chat-completions endpoint.

    Args:
        model: the model name sent in each request (``ModelOptions.model`` overrides it).
        base_url: the API root, e.g. ``http://localhost:8000/v1`` for vLLM,
            ``http://localhost:8080/v1`` for llama.cpp, ``http://localhost:11434/v1``
            for Ollama.
        api_key: sent as a bearer token; default ``OPENAI_API_KEY`` from the
            environment; none at all is fine for local servers. Surrounding whitespace
            is stripped; the key never appears in a repr or an error message.
        provider: the name recorded in each ``AssistantMessage.provider``.
        headers: extra request headers; their values are kept out of error texts as
            the key is (one may carry a token).
        max_tokens_field: where ``ModelOptions.max_tokens`` goes:
            ``max_completion_tokens`` (OpenAI) or ``max_tokens`` (older servers).
        http: timeouts, pool limits and retries.
        tokens: ask the server for the exact token ids and log-probabilities of each
            reply (``return_token_ids`` and ``logprobs``, a vLLM or SGLang server) and
            keep them as ``AssistantMessage.tokens`` of each finished reply. A reply
            without them (a server that does not support it), or with log-probabilities
            that are not one per generated id, ends with an ``Error``.
        stream: False asks for the whole reply as one JSON response instead of an
            event stream (the events are then produced when it arrived).

    ``ModelOptions.reasoning`` is sent as ``reasoning_effort``, a string ``cache`` as
    ``prompt_cache_key``, ``extra`` is merged into the request body. Use
    ``async with OpenAIChat(...) as model:`` (or ``aclose()``) to
    close its connections.

    Structured output (a run's ``output_type``): ``native`` (what ``auto`` picks here,
    :attr:`structured_output`) sends ``response_format`` with a ``json_schema`` — the
    strict form of the schema with ``strict: true`` when it has one (every property
    required, optional ones nullable, ``additionalProperties: false``), else the schema
    as it is with ``strict: false``; ``tool`` mode sends ``tool_choice: "required"``, so
    every reply calls a tool (the final-answer tool or another).
    """

    structured_output: Literal["native", "tool", "prompted"] = "native"
    """The structured-output mode ``auto`` uses for this model: ``native``."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        provider: str = "openai",
        headers: Mapping[str, str] | None = None,
        max_tokens_field: str = "max_completion_tokens",
        http: HTTPOptions | None = None,
        tokens: bool = False,
        stream: bool = True,
    ) -> None:
        super().__init__(
            model,
            provider=provider,
            base_url=base_url,
            api_key=api_key,
            key_env="OPENAI_API_KEY",
            headers=headers,
            http=http,
        )
        self._max_tokens_field = max_tokens_field
        self.tokens = tokens
        """Whether each reply's token ids and log-probabilities are asked for and kept."""
        self._streamed = stream
        if not stream:
            self._headers["Accept"] = "application/json"

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (no I/O; useful to inspect)."""
        messages: list[dict[str, Any]] = []
        if request.system_prompt:
            messages.append({"role": "system", "content": request.system_prompt})
        history = prepare(request.messages, provider=self.provider, normalize_id=_fit_id)
        messages.extend(openai_messages(history, self.provider))
        options = request.options
        body: dict[str, Any] = {
            "model": options.model or self.model,
            "messages": messages,
            "stream": self._streamed,
        }
        if self._streamed:
            body["stream_options"] = {"include_usage": True}
        if self.tokens:
            body["return_token_ids"] = True
            body["logprobs"] = True
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": dict(tool.parameters),
                    },
                }
                for tool in request.tools
            ]
        if options.max_tokens is not None:
            body[self._max_tokens_field] = options.max_tokens
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if options.reasoning is not None and options.reasoning != "off":
            body["reasoning_effort"] = options.reasoning
        if isinstance(options.cache, str):
            body["prompt_cache_key"] = options.cache
        output = request.output
        if output is not None:
            if output.mode == "native":
                strict = output.strict_schema
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {
                        "name": output.name,
                        "description": output.description,
                        "schema": dict(strict if strict is not None else output.schema),
                        "strict": strict is not None,
                    },
                }
            elif output.mode == "tool":
                body["tool_choice"] = "required"
        body.update(options.extra)
        return body

    _path = "/chat/completions"

    def _auth_headers(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    def _decoder(self, builder: ReplyBuilder) -> _Decoder:
        return _Decoder(
            builder, tokens=TokenCollector() if self.tokens else None, whole=not self._streamed
        )


# --- request ------------------------------------------------------------------------


def _fit_id(call_id: str) -> str:
    # OpenAI rejects tool-call ids longer than 40 characters (other providers' ids).
    return normalize_id(call_id, max_length=40)


def _image_part(image: Image) -> dict[str, Any]:
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{image.mime_type};base64,{image.data}"},
    }


def _user_content(blocks: tuple[Text | Image, ...]) -> str | list[dict[str, Any]] | None:
    # Text-only content goes as a plain string: every compatible server accepts that.
    if all(type(b) is Text for b in blocks):
        text = "\n".join(b.text for b in blocks if type(b) is Text)
        return text or None
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if type(block) is Text:
            if block.text:
                parts.append({"type": "text", "text": block.text})
        elif type(block) is Image:
            parts.append(_image_part(block))
    return parts or None


def _assistant(message: AssistantMessage, provider: str) -> dict[str, Any] | None:
    same = message.provider == provider
    texts: list[str] = []
    reasoning: dict[str, list[str]] = {}
    calls: list[dict[str, Any]] = []
    for block in message.content:
        if type(block) is Text:
            if block.text.strip():
                texts.append(block.text)
        elif type(block) is Thinking:
            if not block.thinking.strip() or block.redacted:
                continue
            if same and block.signature in _REASONING_FIELDS:
                # Handed back in the field it came in (llama.cpp's gpt-oss needs it).
                reasoning.setdefault(block.signature, []).append(block.thinking)
            elif not same:
                # Another provider's reasoning is shown as text (as pi does).
                texts.append(block.thinking)
        elif type(block) is ToolCall:
            calls.append(
                {
                    "id": block.id,
                    "type": "function",
                    "function": {"name": block.name, "arguments": json.dumps(block.arguments)},
                }
            )
    if not texts and not calls:
        return None
    entry: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    for field, parts in reasoning.items():
        entry[field] = "\n".join(parts)
    if calls:
        entry["tool_calls"] = calls
    return entry


def openai_messages(history: History, provider: str) -> list[dict[str, Any]]:
    """The chat-completions ``messages`` for a prepared history (system prompt aside).

    Tool results are ``tool`` messages with text content; their images follow the run
    of results as one user message (chat completions has no images in tool messages).
    """
    out: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for message in history:
        if images and type(message) is not ToolResultMessage:
            out.append(
                {"role": "user", "content": [{"type": "text", "text": _IMAGES_NOTE}, *images]}
            )
            images = []
        if type(message) is UserMessage:
            content = _user_content(message.content)
            if content is not None:
                out.append({"role": "user", "content": content})
        elif type(message) is AssistantMessage:
            entry = _assistant(message, provider)
            if entry is not None:
                out.append(entry)
        elif type(message) is ToolResultMessage:
            text = "\n".join(b.text for b in message.content if type(b) is Text)
            pictures = [_image_part(b) for b in message.content if type(b) is Image]
            images.extend(pictures)
            if not text:
                text = "(see attached image)" if pictures else "(no output)"
            out.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": text})
    if images:
        out.append({"role": "user", "content": [{"type": "text", "text": _IMAGES_NOTE}, *images]})
    return out


# --- response -----------------------------------------------------------------------


def _int(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


def _usage(raw: Mapping[str, Any]) -> Usage:
    prompt = _int(raw.get("prompt_tokens"))
    details = raw.get("prompt_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, Mapping) else 0
    return Usage(
        input_tokens=max(0, prompt - cached),
        output_tokens=_int(raw.get("completion_tokens")),
        cache_read_tokens=cached,
    )


class _Decoder:
    """Chat-completion chunks → assistant events (sans-IO)."""

    terminator = "data: [DONE]"

    def __init__(
        self, builder: ReplyBuilder, *, tokens: TokenCollector | None = None, whole: bool = False
    ) -> None:
        self.builder = builder
        self._tokens = tokens
        self._whole = whole  # the response is one chat.completion object, not chunks
        self.finished = False
        self._finish_reason: str | None = None
        self._calls: dict[Any, Hashable] = {}
        self._count = 0

    def feed(self, event: SSEEvent) -> list[ev.AssistantEvent]:
        data = event.data
        if data.strip() == "[DONE]":
            self.finished = True
            return self.builder.close_all()
        chunk = json_frame(data)
        if chunk.get("error") or chunk.get("object") == "error":
            raise StreamFault(
                f"the server reported an error mid-stream: {describe_error(chunk) or data[:200]}"
            )
        out: list[ev.AssistantEvent] = []
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            self.builder.usage = _usage(usage)
        if self._tokens is not None:
            self._tokens.response(chunk)
        choices = chunk.get("choices")
        if isinstance(choices, list):
            for choice in choices:
                # n > 1 is not supported: only the first choice is the reply.
                if isinstance(choice, Mapping) and choice.get("index", 0) == 0:
                    self._choice(choice, out)
                    if self._tokens is not None:
                        self._tokens.choice(choice)
        if self._whole:
            self.finished = True
            out.extend(self.builder.close_all())
        return out

    def _choice(self, choice: Mapping[str, Any], out: list[ev.AssistantEvent]) -> None:
        b = self.builder
        # A streamed chunk's ``delta``; a whole response's ``message`` reads the same way.
        delta = choice.get("message" if self._whole else "delta")
        if isinstance(delta, Mapping):
            for field in _REASONING_FIELDS:
                value = delta.get(field)
                if isinstance(value, str) and value:
                    if not b.is_open(_THINKING):
                        out.extend(b.close(_TEXT))
                        out.extend(b.thinking(_THINKING, ""))
                        b.signature(_THINKING, field)
                    out.extend(b.thinking(_THINKING, value))
                    break
            # A refusal (OpenAI's structured outputs) is the reply's text.
            for field in ("content", "refusal"):
                content = delta.get(field)
                if isinstance(content, str) and content:
                    out.extend(b.close(_THINKING))
                    out.extend(b.text(_TEXT, content))
            calls = delta.get("tool_calls")
            if isinstance(calls, list):
                for position, fragment in enumerate(calls):
                    if isinstance(fragment, Mapping):
                        self._call(position, fragment, out)
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason:
            self._finish_reason = reason
            out.extend(b.close_all())

    def _call(
        self, position: int, fragment: Mapping[str, Any], out: list[ev.AssistantEvent]
    ) -> None:
        b = self.builder
        index = fragment.get("index", position)
        call_id = fragment.get("id") or ""
        function = fragment.get("function")
        if not isinstance(function, Mapping):
            function = {}
        name = function.get("name") or ""
        arguments = function.get("arguments") or ""
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise StreamFault(f"malformed tool-call fragment: {json.dumps(fragment)[:200]}")
        if not isinstance(arguments, str):
            # A few servers send the arguments as an object rather than JSON text.
            arguments = json.dumps(arguments)
        key = self._calls.get(index)
        if key is not None and b.is_open(key) and call_id and b.call_id(key) not in ("", call_id):
            # A server that reuses an index for a new call (a new id): close the old one.
            out.extend(b.close(key))
            key = None
        if key is None or not b.is_open(key):
            out.extend(b.close(_TEXT))
            out.extend(b.close(_THINKING))
            key = ("call", self._count)
            self._count += 1
            self._calls[index] = key
            out.extend(b.call_start(key, call_id, name))
        else:
            b.call_update(key, call_id=call_id, name=name)
        out.extend(b.call_delta(key, arguments))

    def finish(self) -> ev.Done | ev.Error:
        reason = self._finish_reason
        has_calls = self.builder.has_calls
        stop: StopReason
        message = None
        if reason is None or reason == "stop":
            stop = "tool_use" if has_calls else "stop"
        elif reason == "length":
            stop = "length"
        elif reason in ("tool_calls", "function_call"):
            stop = "tool_use"
        elif reason == "content_filter":
            stop, message = "error", "the provider's content filter stopped the reply"
        else:
            stop, message = "error", f"the provider ended the reply with finish_reason {reason!r}"
        if self._tokens is not None and message is None:
            try:
                self.builder.tokens = self._tokens.result()
            except StreamFault as fault:
                stop, message = "error", str(fault)
        return self.builder.finish(stop, message)
