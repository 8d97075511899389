"""A fake vLLM-compatible chat-completions server, for tests, examples and benchmarks.

It speaks the OpenAI chat-completions wire format (streamed and not) with vLLM's token
extension: ``prompt_token_ids`` and per-choice ``token_ids`` when the request says
``return_token_ids``, ``logprobs.content`` when it says ``logprobs``. Its "tokenizer" is
a toy with the property real chat templates are meant to have: rendering a history that
ends with an assistant message gives the previous request's prompt followed by that
reply's completion ids, so the prompts of one run extend each other exactly.

Token ids: ``BOS`` (1), one role id per message (``ROLE_IDS``), the UTF-8 bytes of the
content shifted by ``BYTE_OFFSET``, ``CALL_ID`` before each tool call's name and
arguments (``json.dumps(arguments, sort_keys=True)``), ``END`` (2) after each message;
the prompt ends with the assistant role id (the generation prompt). Log-probabilities
are ``-(id % 97) / 100``: any value, but the same one for the same token every time.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import trio

__all__ = [
    "VLLMReply",
    "completion_ids",
    "fake_logprobs",
    "render_prompt",
    "scripted_policy",
    "serve_fake_vllm",
    "vllm_response",
]

BOS = 1
END = 2
CALL_ID = 3
ROLE_IDS: Mapping[str, int] = {"system": 4, "user": 5, "assistant": 6, "tool": 7}
BYTE_OFFSET = 16


def _encode(text: str) -> list[int]:
    return [b + BYTE_OFFSET for b in text.encode("utf-8")]


def _call_ids(name: str, arguments: Any) -> list[int]:
    return [CALL_ID, *_encode(name), *_encode(json.dumps(arguments, sort_keys=True))]


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return ""


def _message_ids(message: Mapping[str, Any]) -> list[int]:
    ids = [
        ROLE_IDS.get(str(message.get("role")), 0),
        *_encode(_content_text(message.get("content"))),
    ]
    for call in message.get("tool_calls") or ():
        function = call.get("function", {})
        ids += _call_ids(function.get("name", ""), json.loads(function.get("arguments") or "{}"))
    ids.append(END)
    return ids


def render_prompt(body: Mapping[str, Any]) -> list[int]:
    """The prompt ids of a chat-completions request body (its ``messages``)."""
    ids = [BOS]
    for message in body.get("messages", ()):
        ids += _message_ids(message)
    ids.append(ROLE_IDS["assistant"])
    return ids


@attrs.frozen(kw_only=True)
class VLLMReply:
    """One reply the fake server sends.

    Attributes:
        text: the reply's text.
        calls: its tool calls, ``(id, name, arguments)``.
        model: the ``model`` the server reports.
    """

    text: str = ""
    calls: Sequence[tuple[str, str, Mapping[str, Any]]] = ()
    model: str = "policy-v1"


def completion_ids(reply: VLLMReply) -> list[int]:
    """The ids the fake model "generates" for ``reply``."""
    ids = _encode(reply.text)
    for _, name, arguments in reply.calls:
        ids += _call_ids(name, arguments)
    ids.append(END)
    return ids


def fake_logprobs(ids: Sequence[int]) -> list[float]:
    """The log-probability the fake server reports for each id."""
    return [-(i % 97) / 100 for i in ids]


def _tool_calls(reply: VLLMReply) -> list[dict[str, Any]]:
    return [
        {
            "index": i,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        for i, (call_id, name, arguments) in enumerate(reply.calls)
    ]


def _logprob_entries(ids: Sequence[int]) -> list[dict[str, Any]]:
    # vLLM sends ``top_logprobs`` (empty unless asked for) on every entry; some clients
    # iterate it without a check.
    return [
        {"token": f"token_id:{i}", "logprob": lp, "top_logprobs": []}
        for i, lp in zip(ids, fake_logprobs(ids), strict=True)
    ]


def _response(
    reply: VLLMReply,
    body: Mapping[str, Any],
    key: str,
    part: dict[str, Any],
    ids: list[int],
    finish: str | None,
) -> dict[str, Any]:
    """A response object (or chunk) whose one choice holds ``part`` (its ``message``
    or ``delta``) and, as the request asked, ``ids`` and their logprobs."""
    choice: dict[str, Any] = {"index": 0, key: part, "finish_reason": finish}
    if body.get("return_token_ids"):
        choice["token_ids"] = ids
    if body.get("logprobs"):
        choice["logprobs"] = {"content": _logprob_entries(ids)}
    kind = "chat.completion" if key == "message" else "chat.completion.chunk"
    return {"object": kind, "model": reply.model, "choices": [choice]}


def vllm_response(reply: VLLMReply, body: Mapping[str, Any], *, pieces: int = 3) -> bytes:
    """The response body for request ``body``: an event stream if it asked for one
    (the text and its ids in ``pieces`` chunks), else one ``chat.completion`` object."""
    tokens = bool(body.get("return_token_ids"))
    prompt = render_prompt(body)
    ids = completion_ids(reply)
    finish = "tool_calls" if reply.calls else "stop"
    usage = {"prompt_tokens": len(prompt), "completion_tokens": len(ids)}
    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.calls:
            message["tool_calls"] = _tool_calls(reply)
        response = _response(reply, body, "message", message, ids, finish)
        response["usage"] = usage
        if tokens:
            response["prompt_token_ids"] = prompt
        return json.dumps(response).encode()
    # Streamed: the text in pieces, each chunk carrying the ids of its piece.
    step = max(1, -(-len(reply.text) // pieces))
    texts = [reply.text[i : i + step] for i in range(0, len(reply.text), step)]
    deltas: list[tuple[dict[str, Any], list[int]]] = []
    used = 0
    for text in texts:
        n = len(_encode(text))
        deltas.append(({"content": text}, ids[used : used + n]))
        used += n
    if reply.calls:
        deltas.append(({"tool_calls": _tool_calls(reply)}, ids[used:-1]))
        used = len(ids) - 1
    deltas.append(({}, ids[used:]))
    frames = []
    for n, (delta, chunk_ids) in enumerate(deltas):
        last = n == len(deltas) - 1
        chunk = _response(reply, body, "delta", delta, chunk_ids, finish if last else None)
        if tokens and n == 0:
            chunk["prompt_token_ids"] = prompt
        frames.append(chunk)
    frames.append({"object": "chat.completion.chunk", "choices": [], "usage": usage})
    out = "".join(f"data: {json.dumps(f)}\n\n" for f in frames) + "data: [DONE]\n\n"
    return out.encode()


Policy = Callable[[Mapping[str, Any]], VLLMReply]


def scripted_policy(replies: Sequence[VLLMReply]) -> Policy:
    """A policy answering the n-th request of a conversation (n = the assistant
    messages its body holds) with ``replies[n]``, the last one once they run out."""

    def policy(body: Mapping[str, Any]) -> VLLMReply:
        n = sum(1 for m in body.get("messages", ()) if m.get("role") == "assistant")
        return replies[min(n, len(replies) - 1)]

    return policy


async def _read_request(stream: trio.SocketStream, buf: bytearray) -> bytes | None:
    while b"\r\n\r\n" not in buf:
        data = await stream.receive_some(65536)
        if not data:
            return None
        buf += data
    end = buf.index(b"\r\n\r\n") + 4
    length = 0
    for line in bytes(buf[:end]).split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(buf) < end + length:
        data = await stream.receive_some(65536)
        if not data:
            return None
        buf += data
    body = bytes(buf[end : end + length])
    del buf[: end + length]
    return body


async def _serve(policy: Policy, stream: trio.SocketStream) -> None:
    buf = bytearray()
    try:
        while True:
            raw = await _read_request(stream, buf)
            if raw is None:
                return
            body = json.loads(raw)
            payload = vllm_response(policy(body), body)
            kind = "text/event-stream" if body.get("stream") else "application/json"
            head = (
                f"HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {len(payload)}\r\n\r\n"
            )
            await stream.send_all(head.encode() + payload)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await trio.aclose_forcefully(stream)


@asynccontextmanager
async def serve_fake_vllm(policy: Policy) -> AsyncIterator[str]:
    """Serve ``policy`` on 127.0.0.1 (a free port) while the block runs.

    Yields the base URL to give ``OpenAIChat`` (``http://127.0.0.1:PORT/v1``). Each
    request is answered with ``vllm_response(policy(body), body)``; connections are
    kept alive. Leaving the block stops the server (and its connections).
    """
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            partial(trio.serve_tcp, partial(_serve, policy), 0, host="127.0.0.1")
        )
        port = listeners[0].socket.getsockname()[1]
        yield f"http://127.0.0.1:{port}/v1"
        nursery.cancel_scope.cancel()
