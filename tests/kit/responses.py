"""OpenAI Responses API streams for tests: a writer of the event grammar, and the
official ``openai`` SDK's own stream parser and accumulation as the oracle.

A reply is described by its output items (:class:`Reasoning`, :class:`Message`,
:class:`Call`), its end (``completed``, ``incomplete`` with a reason, ``failed``) and its
usage; :func:`events` writes the server-sent events the API sends for it, as the API
reference lists them (``response.created``, per item ``output_item.added`` → content
parts and deltas → ``output_item.done``, then the terminal event with the whole
response).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import attrs

from tests.kit.http_server import frames

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence


@attrs.frozen
class Reasoning:
    summary: tuple[str, ...] = ()
    encrypted: str | None = None
    id: str = "rs_1"


@attrs.frozen
class Message:
    parts: tuple[str, ...] = ("",)
    refusal: bool = False
    id: str = "msg_1"


@attrs.frozen
class Call:
    call_id: str
    name: str
    arguments: str
    id: str = "fc_1"


Item = Reasoning | Message | Call


@attrs.frozen
class Reply:
    items: tuple[Item, ...]
    status: str | None = "completed"
    reason: str | None = None
    """``incomplete_details.reason`` (``max_output_tokens``, ``content_filter``), or the
    error message of a ``failed`` response."""
    usage: tuple[int, int, int] = (120, 30, 0)
    """input tokens (cached included), output tokens, cached input tokens."""
    pieces: int = 5


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _whole(item: Item) -> dict[str, Any]:
    if isinstance(item, Reasoning):
        whole: dict[str, Any] = {
            "type": "reasoning",
            "id": item.id,
            "summary": [{"type": "summary_text", "text": t} for t in item.summary],
        }
        if item.encrypted is not None:
            whole["encrypted_content"] = item.encrypted
        return whole
    if isinstance(item, Message):
        kind = "refusal" if item.refusal else "output_text"
        content = [
            {"type": kind, kind if item.refusal else "text": t}
            | ({} if item.refusal else {"annotations": []})
            for t in item.parts
        ]
        return {
            "type": "message",
            "id": item.id,
            "role": "assistant",
            "status": "completed",
            "content": content,
        }
    return {
        "type": "function_call",
        "id": item.id,
        "call_id": item.call_id,
        "name": item.name,
        "arguments": item.arguments,
        "status": "completed",
    }


def _response(reply: Reply, status: str, output: list[Any]) -> dict[str, Any]:
    response: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1764700000,
        "model": "gpt-5-mini",
        "status": status,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "error": None,
        "incomplete_details": None,
    }
    if status == "incomplete":
        response["incomplete_details"] = {"reason": reply.reason}
    if status == "failed":
        response["error"] = {"code": "server_error", "message": reply.reason or "failed"}
    if status in ("completed", "incomplete", "failed"):
        total, out, cached = reply.usage
        response["usage"] = {
            "input_tokens": total,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": total + out,
        }
    return response


def events(reply: Reply) -> list[dict[str, Any]]:
    """The stream of server-sent event payloads for ``reply``."""
    out: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response(reply, "in_progress", [])},
        {"type": "response.in_progress", "response": _response(reply, "in_progress", [])},
    ]
    done: list[dict[str, Any]] = []
    n = reply.pieces
    for index, item in enumerate(reply.items):
        whole = _whole(item)
        added = dict(whole)
        common = {"item_id": item.id, "output_index": index}
        if isinstance(item, Reasoning):
            added["summary"] = []
            added.pop("encrypted_content", None)
            out.append({"type": "response.output_item.added", "output_index": index, "item": added})
            for s, text in enumerate(item.summary):
                part = {"type": "summary_text", "text": ""}
                out.append(
                    {"type": "response.reasoning_summary_part.added", **common}
                    | {"summary_index": s, "part": part}
                )
                for piece in _pieces(text, n):
                    out.append(
                        {"type": "response.reasoning_summary_text.delta", **common}
                        | {"summary_index": s, "delta": piece}
                    )
                out.append(
                    {"type": "response.reasoning_summary_text.done", **common}
                    | {"summary_index": s, "text": text}
                )
        elif isinstance(item, Message):
            added["content"] = []
            added["status"] = "in_progress"
            out.append({"type": "response.output_item.added", "output_index": index, "item": added})
            kind = "refusal" if item.refusal else "output_text"
            for c, text in enumerate(item.parts):
                empty = (
                    {"type": "refusal", "refusal": ""}
                    if item.refusal
                    else {"type": "output_text", "text": "", "annotations": []}
                )
                out.append(
                    {"type": "response.content_part.added", **common}
                    | {"content_index": c, "part": empty}
                )
                for piece in _pieces(text, n):
                    delta: dict[str, Any] = {"type": f"response.{kind}.delta", **common}
                    delta |= {"content_index": c, "delta": piece}
                    if not item.refusal:
                        delta["logprobs"] = []
                    out.append(delta)
                finished: dict[str, Any] = {"type": f"response.{kind}.done", **common}
                finished |= {"content_index": c, kind if item.refusal else "text": text}
                if not item.refusal:
                    finished["logprobs"] = []
                out.append(finished)
                out.append(
                    {"type": "response.content_part.done", **common}
                    | {"content_index": c, "part": whole["content"][c]}
                )
        else:
            added["arguments"] = ""
            added["status"] = "in_progress"
            out.append({"type": "response.output_item.added", "output_index": index, "item": added})
            for piece in _pieces(item.arguments, n):
                out.append(
                    {"type": "response.function_call_arguments.delta", **common, "delta": piece}
                )
            out.append(
                {
                    "type": "response.function_call_arguments.done",
                    **common,
                    "arguments": item.arguments,
                }
            )
        out.append({"type": "response.output_item.done", "output_index": index, "item": whole})
        done.append(whole)
    if reply.status is not None:
        out.append(
            {"type": f"response.{reply.status}", "response": _response(reply, reply.status, done)}
        )
    for number, event in enumerate(out):
        event["sequence_number"] = number
    return out


def body(reply: Reply) -> str:
    return frames(*events(reply), named=True)


# --- the oracle: the openai SDK's stream parser and Responses accumulation --------------


@attrs.frozen
class Decoded:
    """What a reply says, in terms both decoders can be compared on."""

    texts: tuple[str, ...]
    calls: tuple[tuple[str, str, Any], ...]
    reasoning: tuple[tuple[str, str | None], ...]
    status: str
    reason: str | None
    usage: tuple[int, int, int]


def sdk_decode(chunks: Iterable[bytes]) -> Decoded:
    """Decode a body with the openai SDK: its SSE decoder over the same byte chunks, its
    event types, and ``ResponseStreamState``'s accumulation (what ``responses.stream``
    uses). Raises whatever the SDK raises on a bad stream."""
    from openai._models import construct_type
    from openai._streaming import SSEDecoder
    from openai._types import omit
    from openai.lib.streaming.responses._responses import ResponseStreamState
    from openai.types.responses import ResponseStreamEvent

    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    final: Any = None
    for sse in SSEDecoder().iter_bytes(iter(chunks)):
        if not sse.data:
            continue
        event: Any = construct_type(type_=ResponseStreamEvent, value=sse.json())
        for out in state.handle_event(event):
            if out.type in ("response.completed", "response.incomplete", "response.failed"):
                final = out.response
    assert final is not None, "the SDK saw no terminal event"
    texts: list[str] = []
    calls: list[tuple[str, str, Any]] = []
    reasoning: list[tuple[str, str | None]] = []
    for item in final.output:
        if item.type == "message":
            for part in item.content:
                texts.append(part.text if part.type == "output_text" else part.refusal)
        elif item.type == "function_call":
            calls.append((item.call_id, item.name, json.loads(item.arguments or "{}")))
        elif item.type == "reasoning":
            summary = "\n\n".join(s.text for s in item.summary)
            reasoning.append((summary, item.encrypted_content))
    details = final.incomplete_details
    usage = final.usage
    return Decoded(
        texts=tuple(texts),
        calls=tuple(calls),
        reasoning=tuple(reasoning),
        status=final.status,
        reason=details.reason if details is not None else None,
        usage=(
            usage.input_tokens,
            usage.output_tokens,
            usage.input_tokens_details.cached_tokens,
        ),
    )


def chunked(data: bytes, cuts: Sequence[int]) -> Iterator[bytes]:
    """``data`` cut at the given offsets (sorted, deduplicated, inside the data)."""
    last = 0
    for cut in sorted({c for c in cuts if 0 < c < len(data)}):
        yield data[last:cut]
        last = cut
    yield data[last:]
