"""``OpenAIResponses``: the OpenAI Responses API, streamed.

Wire format (``POST {base_url}/responses`` with ``stream: true``): named server-sent
events, each a JSON object with a ``type``. ``response.created`` / ``in_progress`` open
the reply; each output item comes as ``response.output_item.added`` → its deltas →
``response.output_item.done`` (the item whole), at its ``output_index``:

- ``message`` items: ``response.output_text.delta`` (and ``response.refusal.delta``, a
  refusal shown as text, as ``OpenAIChat`` does) per ``content_index``;
- ``function_call`` items (``call_id``, ``name``): ``response.function_call_arguments.delta``
  fragments of the argument JSON;
- ``reasoning`` items: ``response.reasoning_summary_text.delta`` per ``summary_index``
  (summary parts are joined by a blank line) and ``response.reasoning_text.delta``
  (raw reasoning, from servers that show it). The whole item, from
  ``output_item.done``, is the block's opaque signature: it holds the
  ``encrypted_content`` the next request must carry back (the API keeps nothing with
  ``store: false``).

The reply ends with ``response.completed``, ``response.incomplete`` or
``response.failed`` (the terminal frames; the body then ends without ``[DONE]``). An
``error`` event is an error reported mid-stream. Other events (``content_part``,
``*.done`` of deltas, annotations, server tools) add nothing the deltas did not carry.

Kept in the assistant message: each text block's ``signature`` is its message item's id;
each tool call's id is ``call_id|item_id`` (the wire's ``call_id`` and the item id the
API wants back with a reasoning item, as pi does; only ``call_id`` pairs the result);
each reasoning item is a ``Thinking`` block whose signature is the item's JSON. The next
request sends them back as the same items, in order — what was received on one turn is
what is sent on the next. Reasoning items from another provider, or without
``encrypted_content`` when nothing is stored, are left out (the API would answer that it
cannot find them).

Stop reasons: ``completed`` → stop (tool_use when the reply holds calls);
``incomplete`` with ``max_output_tokens`` → length, with ``content_filter`` → error;
``failed`` → error with the API's message.

Usage: ``input_tokens`` counts cached tokens too; ours excludes them (they are
``cache_read_tokens``). Reasoning tokens are part of ``output_tokens``.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any

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
from ._reply import ReplyBuilder, StreamFault, json_frame, str_field
from ._session import describe_error

if TYPE_CHECKING:
    from .._core import ModelRequest
    from .._core import events as ev
    from ._history import History
    from ._options import HTTPOptions
    from ._sse import SSEEvent

__all__ = ["OpenAIResponses", "responses_input", "split_call_id"]

_TERMINAL = ("response.completed", "response.incomplete", "response.failed")
_ENCRYPTED = "reasoning.encrypted_content"


class OpenAIResponses(HTTPModel):
    """A model behind the OpenAI Responses API (``/responses``), streamed.

    Stateless by default: each request carries the whole conversation (no
    ``previous_response_id``) with ``store: false``, and asks for the reasoning items'
    ``encrypted_content``, which the next request hands back so a reasoning model keeps
    its train of thought across tool calls.

    Args:
        model: the model name sent in each request (``ModelOptions.model`` overrides it).
        base_url: the API root (``/responses`` is appended).
        api_key: sent as a bearer token; default ``OPENAI_API_KEY`` from the
            environment. Surrounding whitespace is stripped; the key never appears in a
            repr or an error message.
        provider: the name recorded in each ``AssistantMessage.provider``; reasoning
            items are sent back only to the same provider.
        store: send ``store: true`` (the API keeps the responses; reasoning items without
            ``encrypted_content`` can then be referred to by id).
        headers: extra request headers; their values are kept out of error texts as
            the key is.
        http: timeouts, pool limits and retries.

    ``ModelOptions.reasoning`` is sent as ``reasoning.effort`` (with ``summary: auto``,
    so the summaries stream as thinking), ``max_tokens`` as ``max_output_tokens``, a
    string ``cache`` as ``prompt_cache_key``; ``extra`` is merged into the body. Use
    ``async with OpenAIResponses(...) as model:`` (or ``aclose()``) to close its
    connections.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        provider: str = "openai-responses",
        store: bool = False,
        headers: Mapping[str, str] | None = None,
        http: HTTPOptions | None = None,
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
        self._store = store

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (no I/O; useful to inspect)."""
        options = request.options
        history = prepare(request.messages, provider=self.provider, normalize_id=_fit_id)
        body: dict[str, Any] = {
            "model": options.model or self.model,
            "input": responses_input(history, self.provider, store=self._store),
            "stream": True,
            "store": self._store,
        }
        if not self._store:
            body["include"] = [_ENCRYPTED]
        if request.system_prompt:
            body["instructions"] = request.system_prompt
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": dict(tool.parameters),
                    "strict": False,
                }
                for tool in request.tools
            ]
        if options.max_tokens is not None:
            body["max_output_tokens"] = options.max_tokens
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if options.reasoning is not None and options.reasoning != "off":
            body["reasoning"] = {"effort": options.reasoning, "summary": "auto"}
        if isinstance(options.cache, str):
            body["prompt_cache_key"] = options.cache
        body.update(options.extra)
        return body

    _path = "/responses"

    def _auth_headers(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    def _decoder(self, builder: ReplyBuilder) -> _Decoder:
        return _Decoder(builder)


# --- request ------------------------------------------------------------------------


def split_call_id(call_id: str) -> tuple[str, str | None]:
    """A tool call's id as ``(call_id, item_id)``: ``call_1|fc_2`` → ``("call_1", "fc_2")``;
    an id without ``|`` (another provider's) has no item id."""
    call, bar, item = call_id.partition("|")
    return call, (item if bar and item else None)


def _fit_id(call_id: str) -> str:
    # The API accepts call ids of up to 64 characters; another provider's id must fit.
    return normalize_id(call_id, max_length=64)


def _user_content(blocks: tuple[Text | Image, ...]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if type(block) is Text:
            if block.text:
                parts.append({"type": "input_text", "text": block.text})
        elif type(block) is Image:
            parts.append(
                {"type": "input_image", "image_url": f"data:{block.mime_type};base64,{block.data}"}
            )
    return parts


def _reasoning_item(block: Thinking, store: bool) -> dict[str, Any] | None:
    if not block.signature:
        return None
    try:
        item = json.loads(block.signature)
    except ValueError:
        return None
    if not isinstance(item, dict) or item.get("type") != "reasoning":
        return None
    if not store and not item.get("encrypted_content"):
        return None  # nothing stored: the API could not find it by id
    return item


def _assistant_items(
    message: AssistantMessage, provider: str, *, store: bool
) -> list[dict[str, Any]]:
    same = message.provider == provider
    out: list[dict[str, Any]] = []
    for block in message.content:
        if type(block) is Text:
            if not block.text:
                continue
            part = {"type": "output_text", "text": block.text, "annotations": []}
            last = out[-1] if out else None
            if (
                last is not None
                and last.get("type") == "message"
                and block.signature is not None
                and last.get("id") == block.signature
            ):
                last["content"].append(part)
                continue
            item: dict[str, Any] = {
                "type": "message",
                "role": "assistant",
                "content": [part],
                "status": "completed",
            }
            if same and block.signature:
                item["id"] = block.signature
            out.append(item)
        elif type(block) is Thinking:
            reasoning = _reasoning_item(block, store) if same else None
            if reasoning is not None:
                out.append(reasoning)
            elif not same and block.thinking.strip() and not block.redacted:
                # Another provider's reasoning is shown as text (as pi does).
                out.append({"role": "assistant", "content": block.thinking})
        elif type(block) is ToolCall:
            call_id, item_id = split_call_id(block.id)
            call: dict[str, Any] = {
                "type": "function_call",
                "call_id": call_id,
                "name": block.name,
                "arguments": json.dumps(block.arguments),
            }
            if same and item_id:
                call["id"] = item_id
            out.append(call)
    return out


def _tool_output(message: ToolResultMessage) -> str | list[dict[str, Any]]:
    if not any(type(b) is Image for b in message.content):
        text = "\n".join(b.text for b in message.content if type(b) is Text)
        return text or "(no output)"
    return _user_content(message.content)


def responses_input(history: History, provider: str, *, store: bool = False) -> list[Any]:
    """The Responses API ``input`` items for a prepared history (instructions aside).

    User messages are ``message`` items; an assistant message becomes its items in
    order (text messages, reasoning items, ``function_call`` items); a tool result is a
    ``function_call_output`` (text, or input parts when it holds images).
    """
    out: list[Any] = []
    for message in history:
        if type(message) is UserMessage:
            content = _user_content(message.content)
            if content:
                out.append({"role": "user", "content": content})
        elif type(message) is AssistantMessage:
            out.extend(_assistant_items(message, provider, store=store))
        elif type(message) is ToolResultMessage:
            out.append(
                {
                    "type": "function_call_output",
                    "call_id": split_call_id(message.tool_call_id)[0],
                    "output": _tool_output(message),
                }
            )
    return out


# --- response -----------------------------------------------------------------------


def _int(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


def responses_usage(raw: Any) -> Usage:
    """Our ``Usage`` from a Responses API ``usage`` object (cached tokens apart)."""
    if not isinstance(raw, Mapping):
        return Usage()
    details = raw.get("input_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, Mapping) else 0
    return Usage(
        input_tokens=max(0, _int(raw.get("input_tokens")) - cached),
        output_tokens=_int(raw.get("output_tokens")),
        cache_read_tokens=cached,
    )


def _index(data: Mapping[str, Any], key: str = "output_index") -> int:
    index = data.get(key)
    if type(index) is not int:
        raise StreamFault(f"malformed stream event: no {key} in {json.dumps(data)[:200]}")
    return index


class _Decoder:
    """Responses API stream events → assistant events (sans-IO)."""

    terminator = "response.completed"

    def __init__(self, builder: ReplyBuilder) -> None:
        self.builder = builder
        self.finished = False
        self._status = ""
        self._detail = ""
        # Summary parts of a reasoning item seen so far (a new one starts a paragraph).
        self._summaries: dict[int, set[int]] = {}

    def feed(self, event: SSEEvent) -> list[ev.AssistantEvent]:
        data = json_frame(event.data)
        kind = data.get("type") or event.event
        b = self.builder
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            key = ("text", _index(data), _index(data, "content_index"))
            return b.text(key, str_field(data, "delta"))
        if kind == "response.function_call_arguments.delta":
            index = _index(data)
            if not b.is_open(("item", index)):
                raise StreamFault(f"function_call_arguments.delta for item {index}, not a call")
            return b.call_delta(("item", index), str_field(data, "delta"))
        if kind == "response.reasoning_summary_text.delta":
            return self._reasoning(data, "summary_index")
        if kind == "response.reasoning_text.delta":
            return self._reasoning(data, "content_index")
        if kind == "response.output_item.added":
            return self._item_added(data)
        if kind == "response.output_item.done":
            return self._item_done(data)
        if kind in _TERMINAL:
            return self._end(kind, data)
        if kind == "error":
            # {"type": "error", "code", "message", "param"} (the type says nothing), or
            # an error object nested under "error" as in an error response.
            code, message = data.get("code"), data.get("message")
            if isinstance(data.get("error"), Mapping):
                described = describe_error(data) or event.data[:200]
            elif code and message:
                described = f"{code}: {message}"
            else:
                described = str(message or event.data[:200])
            raise StreamFault(f"the server reported an error mid-stream: {described}")
        return []

    def _reasoning(self, data: Mapping[str, Any], part_key: str) -> list[ev.AssistantEvent]:
        index = _index(data)
        part = data.get(part_key, 0)
        seen = self._summaries.setdefault(index, set())
        out: list[ev.AssistantEvent] = []
        if part not in seen:
            if seen:
                out.extend(self.builder.thinking(("item", index), "\n\n"))
            seen.add(part)
        out.extend(self.builder.thinking(("item", index), str_field(data, "delta")))
        return out

    def _item(self, data: Mapping[str, Any]) -> Mapping[str, Any]:
        item = data.get("item")
        if not isinstance(item, Mapping):
            raise StreamFault(f"malformed stream event: no item in {json.dumps(data)[:200]}")
        return item

    def _item_added(self, data: Mapping[str, Any]) -> list[ev.AssistantEvent]:
        index, item = _index(data), self._item(data)
        b = self.builder
        if item.get("type") == "function_call":
            call_id, item_id = str_field(item, "call_id"), str_field(item, "id")
            out = b.call_start(
                ("item", index),
                f"{call_id}|{item_id}" if item_id else call_id,
                str_field(item, "name"),
            )
            arguments = str_field(item, "arguments")
            if arguments:
                out.extend(b.call_delta(("item", index), arguments))
            return out
        if item.get("type") == "reasoning":
            return b.thinking(("item", index), "")
        return []

    def _item_done(self, data: Mapping[str, Any]) -> list[ev.AssistantEvent]:
        index, item = _index(data), self._item(data)
        b = self.builder
        kind = item.get("type")
        key = ("item", index)
        out: list[ev.AssistantEvent] = []
        if kind == "message":
            content = item.get("content")
            parts = content if isinstance(content, list) else []
            item_id = str_field(item, "id")
            for position, part in enumerate(parts):
                text_key: Hashable = ("text", index, position)
                if not b.is_open(text_key) and isinstance(part, Mapping):
                    # A part that came whole, without deltas.
                    whole = str_field(part, "text") or str_field(part, "refusal")
                    if whole:
                        out.extend(b.text(text_key, whole))
                if b.is_open(text_key):
                    if item_id:
                        b.set_signature(text_key, item_id)
                    out.extend(b.close(text_key))
        elif kind == "function_call":
            if not b.is_open(key):
                out.extend(self._item_added(data))
            out.extend(b.close(key))
        elif kind == "reasoning":
            if not b.is_open(key):
                out.extend(b.thinking(key, ""))
            b.signature(key, json.dumps(item, ensure_ascii=False))
            out.extend(b.close(key))
        return out

    def _end(self, kind: str, data: Mapping[str, Any]) -> list[ev.AssistantEvent]:
        self.finished = True
        response = data.get("response")
        response = response if isinstance(response, Mapping) else {}
        self.builder.usage = responses_usage(response.get("usage"))
        self._status = kind.removeprefix("response.")
        if kind == "response.incomplete":
            details = response.get("incomplete_details")
            if isinstance(details, Mapping):
                self._detail = str(details.get("reason") or "")
            return self.builder.close_all()
        if kind == "response.failed":
            self._detail = describe_error(response) or "the response failed"
            return []
        return self.builder.close_all()

    def finish(self) -> ev.Done | ev.Error:
        b = self.builder
        if self._status == "failed":
            return b.fail(f"the provider reported the response failed: {self._detail}")
        stop: StopReason
        if self._status == "incomplete":
            if self._detail == "max_output_tokens":
                return b.finish("length")
            reason = self._detail or "unknown"
            if reason == "content_filter":
                return b.finish("error", "the provider's content filter stopped the reply")
            return b.finish("error", f"the reply is incomplete: {reason}")
        stop = "tool_use" if b.has_calls else "stop"
        return b.finish(stop)
