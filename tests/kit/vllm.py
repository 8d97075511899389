"""The fake vLLM server's replies as handlers of the test server (tests/kit/http_server):
streamed or whole as the request asks, cut short, or with fields broken."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tests.kit.http_server import sse
from trio_agent.testing import VLLMReply, vllm_response

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.kit.http_server import Handler, Received, Responder


def vllm(
    reply: VLLMReply,
    *,
    cut: bool = False,
    edit: Callable[[dict[str, Any]], None] | None = None,
    **kwargs: Any,
) -> Handler:
    """Answer like vLLM: an event stream if the request asked for one, else JSON.

    ``cut``: send the first half of the stream, then drop the connection. ``edit``
    changes each JSON frame (or the whole response) before it is sent.
    """

    async def handler(request: Received, r: Responder) -> None:
        body = request.json()
        payload = vllm_response(reply, body)
        if not body.get("stream"):
            response = json.loads(payload)
            if edit is not None:
                edit(response)
            await r.json(200, response)
            return
        if edit is not None:
            frames = []
            for frame in payload.decode().split("\n\n"):
                data = frame.removeprefix("data: ")
                if data and data != "[DONE]":
                    value = json.loads(data)
                    edit(value)
                    data = json.dumps(value)
                frames.append(f"data: {data}" if data else "")
            payload = "\n\n".join(frames).encode()
        if cut:
            half = payload[: len(payload) // 2].rsplit(b"\n\n", 1)[0] + b"\n\n"
            await sse(half, end="abort", **kwargs)(request, r)
            return
        await sse(payload, **kwargs)(request, r)

    return handler
