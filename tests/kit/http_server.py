"""A small HTTP/1.1 server on 127.0.0.1 for provider tests (plain ``trio.serve_tcp``).

Every response is scripted byte by byte, so a test can send what real servers and
broken proxies send: chunked event streams split anywhere, a malformed frame, a body
that ends without its terminator, a connection dropped mid-chunk, a stall. Requests are
recorded. Each request is answered by the next handler queued with :meth:`Server.add`
(or by ``Server.default`` when the queue is empty); a connection stays open for the next
request unless the handler closed it.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import trio

STREAMS = Path(__file__).resolve().parent.parent / "data" / "streams"


@attrs.define
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = attrs.field(factory=trio.current_time)
    """When the request had arrived (trio clock)."""

    def json(self) -> Any:
        return json.loads(self.body)


class Responder:
    """Writes one response on a connection."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.closed = False

    async def head(
        self,
        status: int = 200,
        headers: Sequence[tuple[str, str]] = (),
        *,
        content_type: str = "text/event-stream",
    ) -> None:
        lines = [f"HTTP/1.1 {status} Status\r\n", f"content-type: {content_type}\r\n"]
        lines.append("transfer-encoding: chunked\r\n")
        lines.extend(f"{k}: {v}\r\n" for k, v in headers)
        lines.append("\r\n")
        await self.stream.send_all("".join(lines).encode())

    async def chunk(self, data: bytes) -> None:
        if data:
            await self.stream.send_all(b"%x\r\n%s\r\n" % (len(data), data))

    async def end(self) -> None:
        await self.stream.send_all(b"0\r\n\r\n")

    async def body(self, data: bytes, *, split: int | None = None, delay: float = 0.0) -> None:
        """Send ``data`` as chunks of ``split`` bytes (one chunk if None)."""
        size = split or max(1, len(data))
        for i in range(0, len(data), size):
            await self.chunk(data[i : i + size])
            if delay:
                await trio.sleep(delay)

    async def json(
        self, status: int, payload: Any, headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        data = json.dumps(payload).encode()
        lines = [f"HTTP/1.1 {status} Status\r\n", "content-type: application/json\r\n"]
        lines.append(f"content-length: {len(data)}\r\n")
        lines.extend(f"{k}: {v}\r\n" for k, v in headers)
        lines.append("\r\n")
        await self.stream.send_all("".join(lines).encode() + data)

    async def close(self) -> None:
        """Drop the connection now (an abrupt close, mid-response if one started)."""
        self.closed = True
        await self.stream.aclose()

    async def wait_disconnect(self) -> None:
        """Wait until the client closes the connection."""
        try:
            while await self.stream.receive_some(65536):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        self.closed = True


Handler = Callable[[Received, Responder], Awaitable[None]]


async def _read_request(stream: trio.SocketStream, buf: bytearray) -> Received | None:
    while b"\r\n\r\n" not in buf:
        data = await stream.receive_some(65536)
        if not data:
            return None
        buf += data
    head, _, rest = bytes(buf).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        data = await stream.receive_some(65536)
        if not data:
            return None
        rest += data
    buf[:] = rest[length:]
    return Received(method=method, path=path, headers=headers, body=rest[:length])


async def _not_scripted(request: Received, r: Responder) -> None:
    await r.json(599, {"error": {"message": f"no response scripted for {request.path}"}})


@attrs.define(eq=False)
class Server:
    port: int = 0
    requests: list[Received] = attrs.field(factory=list)
    handlers: deque[Handler] = attrs.field(factory=deque)
    default: Handler = _not_scripted
    connections: int = 0
    open_connections: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, *handlers: Handler) -> None:
        self.handlers.extend(handlers)

    async def _serve(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        self.open_connections += 1
        buf = bytearray()
        try:
            while True:
                request = await _read_request(stream, buf)
                if request is None:
                    return
                self.requests.append(request)
                handler = self.handlers.popleft() if self.handlers else self.default
                responder = Responder(stream)
                await handler(request, responder)
                if responder.closed:
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self.open_connections -= 1
            with trio.CancelScope(shield=True):
                await stream.aclose()


@asynccontextmanager
async def serve() -> AsyncIterator[Server]:
    server = Server()
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, server._serve, 0, host="127.0.0.1"))
        server.port = listeners[0].socket.getsockname()[1]
        yield server
        nursery.cancel_scope.cancel()


# --- handler factories ----------------------------------------------------------------


def sse(
    data: bytes | str,
    *,
    split: int | None = None,
    delay: float = 0.0,
    end: str = "clean",
    status: int = 200,
    headers: Sequence[tuple[str, str]] = (),
) -> Handler:
    """An event-stream response with body ``data``.

    ``end``: ``clean`` (the terminating chunk), ``abort`` (drop the connection after the
    data), ``stall`` (send nothing more until the client leaves), ``cut`` (drop the
    connection in the middle of a chunk).
    """
    payload = data.encode() if isinstance(data, str) else data

    async def handler(request: Received, r: Responder) -> None:
        await r.head(status, headers)
        if end == "cut":
            await r.body(payload, split=split, delay=delay)
            await r.stream.send_all(b"400\r\npartial")
            await r.close()
            return
        await r.body(payload, split=split, delay=delay)
        if end == "clean":
            await r.end()
        elif end == "abort":
            await r.close()
        elif end == "stall":
            await r.wait_disconnect()
        else:
            raise ValueError(end)

    return handler


@attrs.define(eq=False)
class Stall:
    """A handler sending the whole frames in the first ``fraction`` of ``data``, then
    waiting for the client to leave. ``arrived``: those frames were sent; ``left``: the
    client closed the connection."""

    data: str
    fraction: float = 0.5
    arrived: trio.Event = attrs.field(factory=trio.Event)
    left: trio.Event = attrs.field(factory=trio.Event)

    async def __call__(self, request: Received, r: Responder) -> None:
        part = self.data[: int(len(self.data) * self.fraction)].rsplit("\n\n", 1)[0] + "\n\n"
        await r.head()
        await r.body(part.encode())
        self.arrived.set()
        await r.wait_disconnect()
        self.left.set()


def recorded(name: str, **kwargs: Any) -> Handler:
    """An event-stream response replaying ``streams/<name>``."""
    return sse((STREAMS / name).read_bytes(), **kwargs)


def error(status: int, payload: Any, headers: Sequence[tuple[str, str]] = ()) -> Handler:
    async def handler(request: Received, r: Responder) -> None:
        await r.json(status, payload, headers)

    return handler


async def hang_up(request: Received, r: Responder) -> None:
    """Close the connection without answering."""
    await r.close()


def frames(*events: Any, named: bool = False) -> str:
    """An event-stream body: one ``data:`` frame per JSON value (strings sent as is).

    With ``named`` each frame also gets an ``event:`` line from the value's ``type``.
    """
    out = []
    for event in events:
        data = event if isinstance(event, str) else json.dumps(event)
        if named and not isinstance(event, str):
            out.append(f"event: {event['type']}\ndata: {data}\n\n")
        else:
            out.append(f"data: {data}\n\n")
    return "".join(out)
