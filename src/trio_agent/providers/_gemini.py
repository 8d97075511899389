"""``Gemini``: the Google Gemini API (``streamGenerateContent``), streamed.

Wire format (``POST {base_url}/models/{model}:streamGenerateContent?alt=sse``, the key in
the ``x-goog-api-key`` header): ``data:`` frames, each a whole ``GenerateContentResponse``
holding the next parts of ``candidates[0].content`` and the usage so far
(``usageMetadata``). There is no terminator: the frame carrying the candidate's
``finishReason`` is the last one (a prompt refused outright says so in
``promptFeedback.blockReason`` instead). A frame with an ``error`` object is an error
reported mid-stream.

Parts: ``text`` (consecutive ones make one text block), ``text`` with ``thought: true``
(a thinking block), ``functionCall`` (``name`` and ``args``, whole in one part). A part
may carry a ``thoughtSignature``, which must go back on the same part: a text or
thought part keeps it as its block's ``signature``; a function call's is kept as the
signature of an empty thinking block placed just before the call. Gemini gives calls no
ids (newer models may): each call without one gets a stable id, ``call_`` and a hash of
the response id, its place in the reply, its name and its arguments — the same stream
always gives the same ids.

Stop reasons (``finishReason``): ``STOP`` → stop (tool_use when the reply holds calls),
``MAX_TOKENS`` → length; ``SAFETY``, ``RECITATION``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``,
``SPII``, ``MALFORMED_FUNCTION_CALL`` and anything else → error, naming the reason.

Usage: ``promptTokenCount`` counts cached tokens too (``cachedContentTokenCount``, ours
``cache_read_tokens``); output is ``candidatesTokenCount`` plus ``thoughtsTokenCount``.
"""

from __future__ import annotations

import hashlib
import json
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._core import (
    AssistantMessage,
    Image,
    Text,
    Thinking,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ._anthropic import thinking_budget
from ._history import merge_turn, prepare
from ._http import HTTPModel
from ._reply import ReplyBuilder, StreamFault, json_frame, str_field
from ._session import describe_error

if TYPE_CHECKING:
    from .._core import ModelRequest
    from .._core import events as ev
    from ._history import History
    from ._options import HTTPOptions
    from ._sse import SSEEvent

__all__ = ["Gemini", "gemini_contents"]

_TEXT = "text"
_THOUGHT = "thought"


class Gemini(HTTPModel):
    """A model behind the Google Gemini API, streamed over server-sent events.

    Args:
        model: the model name sent in each request, e.g. ``gemini-2.5-flash``
            (``ModelOptions.model`` overrides it).
        base_url: the API root (``/models/{model}:streamGenerateContent?alt=sse`` is
            appended).
        api_key: sent in the ``x-goog-api-key`` header — never in the URL, so it cannot
            reach a log line that records URLs; default ``GEMINI_API_KEY`` from the
            environment. Surrounding whitespace is stripped; the key never appears in
            a repr or an error message.
        provider: the name recorded in each ``AssistantMessage.provider``; thought
            signatures are sent back only to the same provider.
        headers: extra request headers; their values are kept out of error texts as
            the key is.
        http: timeouts, pool limits and retries.

    ``ModelOptions.reasoning`` (a level or a number of tokens) is sent as
    ``thinkingConfig`` with ``includeThoughts`` (so the thoughts stream as thinking),
    ``max_tokens`` as ``maxOutputTokens``; ``extra`` is merged into the body. Use
    ``async with Gemini(...) as model:`` (or ``aclose()``) to close its connections.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://generativelanguage.googleapis.com/v1beta",
        api_key: str | None = None,
        provider: str = "gemini",
        headers: Mapping[str, str] | None = None,
        http: HTTPOptions | None = None,
    ) -> None:
        super().__init__(
            model,
            provider=provider,
            base_url=base_url,
            api_key=api_key,
            key_env="GEMINI_API_KEY",
            headers=headers,
            http=http,
        )

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (no I/O; useful to inspect).

        Raises:
            ValueError: ``ModelOptions.reasoning`` is not a known level or a number.
        """
        options = request.options
        history = prepare(request.messages, provider=self.provider)
        body: dict[str, Any] = {"contents": gemini_contents(history, self.provider)}
        if request.system_prompt:
            body["systemInstruction"] = {"parts": [{"text": request.system_prompt}]}
        if request.tools:
            body["tools"] = [
                {
                    "functionDeclarations": [
                        {
                            "name": tool.name,
                            "description": tool.description,
                            "parametersJsonSchema": dict(tool.parameters),
                        }
                        for tool in request.tools
                    ]
                }
            ]
        config: dict[str, Any] = {}
        if options.max_tokens is not None:
            config["maxOutputTokens"] = options.max_tokens
        if options.temperature is not None:
            config["temperature"] = options.temperature
        budget = thinking_budget(options.reasoning)
        if budget is not None:
            config["thinkingConfig"] = {"includeThoughts": True, "thinkingBudget": budget}
        if config:
            body["generationConfig"] = config
        body.update(options.extra)
        return body

    def _request_path(self, request: ModelRequest) -> str:
        name = urllib.parse.quote(request.options.model or self.model, safe="")
        return f"/models/{name}:streamGenerateContent?alt=sse"

    def _auth_headers(self, key: str) -> dict[str, str]:
        return {"x-goog-api-key": key}

    def _decoder(self, builder: ReplyBuilder) -> _Decoder:
        return _Decoder(builder)


# --- request ------------------------------------------------------------------------


def _parts(blocks: tuple[Text | Image, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in blocks:
        if type(block) is Text:
            if block.text:
                out.append({"text": block.text})
        elif type(block) is Image:
            out.append({"inlineData": {"mimeType": block.mime_type, "data": block.data}})
    return out


def _model_parts(message: AssistantMessage, provider: str) -> list[dict[str, Any]]:
    same = message.provider == provider
    out: list[dict[str, Any]] = []
    pending: str | None = None  # a function call's signature, for the next call part
    for block in message.content:
        part: dict[str, Any] | None = None
        if type(block) is Text:
            if block.text:
                part = {"text": block.text}
                if same and block.signature:
                    part["thoughtSignature"] = block.signature
        elif type(block) is Thinking:
            if same and not block.thinking and block.signature:
                pending = block.signature
                continue
            if not block.thinking.strip() or block.redacted:
                continue
            if same:
                part = {"text": block.thinking, "thought": True}
                if block.signature:
                    part["thoughtSignature"] = block.signature
            else:
                # Another provider's reasoning is shown as text (as pi does).
                part = {"text": block.thinking}
        elif type(block) is ToolCall:
            part = {"functionCall": {"name": block.name, "args": dict(block.arguments)}}
            if pending is not None:
                part["thoughtSignature"] = pending
        if part is not None:
            out.append(part)
            pending = None
    return out


def _result_parts(message: ToolResultMessage) -> list[dict[str, Any]]:
    text = "\n".join(b.text for b in message.content if type(b) is Text)
    images = [b for b in message.content if type(b) is Image]
    if not text:
        text = "(see attached image)" if images else "(no output)"
    response = {"error": text} if message.is_error else {"output": text}
    parts: list[dict[str, Any]] = [
        {"functionResponse": {"name": message.tool_name, "response": response}}
    ]
    parts.extend(_parts(tuple(images)))
    return parts


def gemini_contents(history: History, provider: str) -> list[dict[str, Any]]:
    """The Gemini ``contents`` for a prepared history (system instruction aside).

    Roles are ``user`` and ``model``; consecutive turns of one role are merged, so the
    results of one reply go, in order, as ``functionResponse`` parts of one user turn
    (Gemini pairs them with the calls by order and name).
    """
    out: list[dict[str, Any]] = []
    for message in history:
        if type(message) is UserMessage:
            merge_turn(out, "user", "parts", _parts(message.content))
        elif type(message) is AssistantMessage:
            merge_turn(out, "model", "parts", _model_parts(message, provider))
        elif type(message) is ToolResultMessage:
            merge_turn(out, "user", "parts", _result_parts(message))
    return out


# --- response -----------------------------------------------------------------------


def _int(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


def gemini_usage(raw: Any) -> Usage:
    """Our ``Usage`` from a ``usageMetadata`` object (cached tokens apart)."""
    if not isinstance(raw, Mapping):
        return Usage()
    cached = _int(raw.get("cachedContentTokenCount"))
    return Usage(
        input_tokens=max(0, _int(raw.get("promptTokenCount")) - cached),
        output_tokens=_int(raw.get("candidatesTokenCount")) + _int(raw.get("thoughtsTokenCount")),
        cache_read_tokens=cached,
    )


def stable_call_id(response_id: str, position: int, name: str, arguments: Any) -> str:
    """The id given to a call Gemini sent without one (see the module docstring)."""
    canonical = json.dumps(arguments, sort_keys=True, ensure_ascii=False)
    seed = f"{response_id}\x00{position}\x00{name}\x00{canonical}"
    return "call_" + hashlib.sha256(seed.encode("utf-8", errors="replace")).hexdigest()[:16]


class _Decoder:
    """``GenerateContentResponse`` frames → assistant events (sans-IO)."""

    terminator = "a finishReason"

    def __init__(self, builder: ReplyBuilder) -> None:
        self.builder = builder
        self.finished = False
        self._reason = ""
        self._blocked = ""
        self._calls = 0
        self._response_id = ""

    def feed(self, event: SSEEvent) -> list[ev.AssistantEvent]:
        data = json_frame(event.data)
        if data.get("error"):
            described = describe_error(data) or event.data[:200]
            raise StreamFault(f"the server reported an error mid-stream: {described}")
        b = self.builder
        if "usageMetadata" in data:
            b.usage = gemini_usage(data["usageMetadata"])
        self._response_id = self._response_id or str_field(data, "responseId")
        out: list[ev.AssistantEvent] = []
        candidates = data.get("candidates")
        candidate = candidates[0] if isinstance(candidates, list) and candidates else None
        if isinstance(candidate, Mapping):
            content = candidate.get("content")
            parts = content.get("parts") if isinstance(content, Mapping) else None
            for part in parts if isinstance(parts, list) else []:
                if isinstance(part, Mapping):
                    self._part(part, out)
            reason = candidate.get("finishReason")
            if isinstance(reason, str) and reason:
                self._reason = reason
        feedback = data.get("promptFeedback")
        if isinstance(feedback, Mapping) and feedback.get("blockReason"):
            self._blocked = str(feedback["blockReason"])
        if self._reason or self._blocked:
            self.finished = True
            out.extend(b.close_all())
        return out

    def _part(self, part: Mapping[str, Any], out: list[ev.AssistantEvent]) -> None:
        b = self.builder
        signature = str_field(part, "thoughtSignature")
        call = part.get("functionCall")
        if isinstance(call, Mapping):
            out.extend(b.close_all())
            name = str_field(call, "name")
            args = call.get("args")
            args = args if isinstance(args, Mapping) else {}
            if signature:
                out.extend(b.thinking(("signature", self._calls), ""))
                b.signature(("signature", self._calls), signature)
                out.extend(b.close(("signature", self._calls)))
            call_id = str_field(call, "id") or stable_call_id(
                self._response_id, self._calls, name, args
            )
            key = ("call", self._calls)
            self._calls += 1
            out.extend(b.call_start(key, call_id, name))
            out.extend(b.call_delta(key, json.dumps(args, ensure_ascii=False)))
            out.extend(b.close(key))
            return
        if "text" not in part and not signature:
            return  # parts of other kinds (executable code, files) are not shown
        text = str_field(part, "text")
        if part.get("thought") is True:
            out.extend(b.close(_TEXT))
            out.extend(b.thinking(_THOUGHT, text))
            if signature:
                b.set_signature(_THOUGHT, signature)
            return
        out.extend(b.close(_THOUGHT))
        if text or not b.is_open(_TEXT):
            out.extend(b.text(_TEXT, text))
        if signature:
            b.set_signature(_TEXT, signature)

    def finish(self) -> ev.Done | ev.Error:
        b = self.builder
        if self._blocked:
            return b.finish("error", f"the provider blocked the prompt: {self._blocked}")
        reason = self._reason
        if reason == "STOP":
            return b.finish("tool_use" if b.has_calls else "stop")
        if reason == "MAX_TOKENS":
            return b.finish("length")
        return b.finish("error", f"the model stopped with finishReason {reason}")
