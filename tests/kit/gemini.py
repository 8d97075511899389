"""Gemini API streams for tests: a writer of ``streamGenerateContent?alt=sse`` bodies, and
the official ``google-genai`` SDK's own stream reading and response types as the oracle.

A reply is a list of parts (:class:`Part`), a ``finishReason`` and a usage; :func:`body`
writes the frames the API sends: text and thoughts cut into pieces over several frames
(each a whole ``GenerateContentResponse``), a function call whole in one frame, and the
``finishReason`` with the final ``usageMetadata`` in the last frame.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

import attrs

from tests.kit.http_server import frames

if TYPE_CHECKING:
    from collections.abc import Iterable

    from trio_agent import AssistantMessage


@attrs.frozen
class Part:
    kind: str
    """``text``, ``thought`` or ``call``."""
    text: str = ""
    name: str = ""
    args: Any = None
    signature: str | None = None
    """A thought signature (base64), on the part's last piece."""
    id: str | None = None


@attrs.frozen
class Reply:
    parts: tuple[Part, ...]
    finish: str | None = "STOP"
    usage: tuple[int, int, int, int] = (100, 20, 0, 0)
    """prompt tokens (cached included), candidates, thoughts, cached."""
    pieces: int = 5
    response_id: str = "resp-g1"
    blocked: str | None = None


def signature(seed: str) -> str:
    return base64.b64encode(f"sig:{seed}".encode()).decode()


def _usage(reply: Reply, last: bool) -> dict[str, Any]:
    prompt, candidates, thoughts, cached = reply.usage
    usage: dict[str, Any] = {"promptTokenCount": prompt}
    if last:
        usage |= {
            "candidatesTokenCount": candidates,
            "thoughtsTokenCount": thoughts,
            "totalTokenCount": prompt + candidates + thoughts,
        }
        if cached:
            usage["cachedContentTokenCount"] = cached
    return usage


def chunks(reply: Reply) -> list[dict[str, Any]]:
    """The frames' payloads for ``reply``."""
    pieces: list[dict[str, Any]] = []
    for part in reply.parts:
        if part.kind == "call":
            call: dict[str, Any] = {"name": part.name, "args": part.args}
            if part.id:
                call["id"] = part.id
            wire: dict[str, Any] = {"functionCall": call}
            if part.signature:
                wire["thoughtSignature"] = part.signature
            pieces.append(wire)
            continue
        text = part.text
        cut = [text[i : i + reply.pieces] for i in range(0, len(text), reply.pieces)] or [""]
        for n, piece in enumerate(cut):
            wire = {"text": piece}
            if part.kind == "thought":
                wire["thought"] = True
            if part.signature and n == len(cut) - 1:
                wire["thoughtSignature"] = part.signature
            pieces.append(wire)
    out: list[dict[str, Any]] = []
    for n, wire in enumerate(pieces):
        last = n == len(pieces) - 1
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [wire]}, "index": 0}
        if last and reply.finish:
            candidate["finishReason"] = reply.finish
        out.append(
            {
                "candidates": [candidate],
                "usageMetadata": _usage(reply, last),
                "modelVersion": "gemini-2.5-flash",
                "responseId": reply.response_id,
            }
        )
    if reply.blocked:
        out.append(
            {
                "promptFeedback": {"blockReason": reply.blocked},
                "usageMetadata": _usage(reply, True),
                "modelVersion": "gemini-2.5-flash",
                "responseId": reply.response_id,
            }
        )
    elif not pieces and reply.finish:
        out.append(
            {
                "candidates": [
                    {"content": {"role": "model", "parts": []}, "finishReason": reply.finish}
                ],
                "usageMetadata": _usage(reply, True),
                "responseId": reply.response_id,
            }
        )
    return out


def body(reply: Reply) -> str:
    return frames(*chunks(reply))


# --- comparing with the SDK ----------------------------------------------------------------


@attrs.frozen
class Decoded:
    text: str
    thoughts: str
    calls: tuple[tuple[str, Any], ...]
    signatures: tuple[bytes, ...]
    finish: str | None
    blocked: str | None
    usage: tuple[int, int, int]
    """prompt tokens (cached included), output tokens (thoughts included), cached."""


def sdk_decode(data: Iterable[bytes]) -> Decoded:
    """Decode a body with google-genai: its own stream reader (``HttpResponse.segments``
    over an httpx2 response carrying these chunks), its wire-to-type conversion and its
    ``GenerateContentResponse`` type, chunk by chunk, as ``generate_content_stream``
    yields them."""
    import httpx2
    from google.genai import types
    from google.genai._api_client import HttpResponse
    from google.genai.models import _GenerateContentResponse_from_mldev

    response = httpx2.Response(200, content=iter(list(data)))
    text, thoughts = [], []
    calls: list[tuple[str, Any]] = []
    signatures: list[bytes] = []
    finish = blocked = None
    usage = (0, 0, 0)
    for segment in HttpResponse(headers={}, response_stream=response).segments():
        chunk = types.GenerateContentResponse._from_response(
            response=_GenerateContentResponse_from_mldev(segment), kwargs={}
        )
        if chunk.prompt_feedback is not None and chunk.prompt_feedback.block_reason:
            blocked = chunk.prompt_feedback.block_reason.value
        meta = chunk.usage_metadata
        if meta is not None:
            usage = (
                meta.prompt_token_count or 0,
                (meta.candidates_token_count or 0) + (meta.thoughts_token_count or 0),
                meta.cached_content_token_count or 0,
            )
        for candidate in chunk.candidates or []:
            if candidate.finish_reason is not None:
                finish = candidate.finish_reason.value
            for part in (candidate.content.parts if candidate.content else None) or []:
                if part.thought_signature:
                    signatures.append(part.thought_signature)
                if part.function_call is not None:
                    calls.append((part.function_call.name or "", part.function_call.args))
                elif part.thought:
                    thoughts.append(part.text or "")
                elif part.text is not None:
                    text.append(part.text)
    return Decoded(
        text="".join(text),
        thoughts="".join(thoughts),
        calls=tuple(calls),
        signatures=tuple(signatures),
        finish=finish,
        blocked=blocked,
        usage=usage,
    )


def ours_view(message: AssistantMessage) -> Decoded:
    """The same view of our message (signatures decoded from base64 as the SDK does)."""
    from trio_agent import Text, Thinking

    signatures = tuple(
        base64.b64decode(b.signature)
        for b in message.content
        if (type(b) is Text or type(b) is Thinking) and b.signature
    )
    u = message.usage
    return Decoded(
        text=message.text,
        thoughts="".join(b.thinking for b in message.content if type(b) is Thinking),
        calls=tuple((c.name, dict(c.arguments)) for c in message.tool_calls),
        signatures=signatures,
        finish=None,
        blocked=None,
        usage=(u.input_tokens + u.cache_read_tokens, u.output_tokens, u.cache_read_tokens),
    )
