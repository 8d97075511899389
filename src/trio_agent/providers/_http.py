"""The HTTP side shared by the providers: the model class and the stream task.

Around it: ``_options`` (timeouts, pool limits, :class:`RetryPolicy`), ``_secrets`` (the
API key, kept out of every text), ``_session`` (the client, retries, error texts, the
response body), ``_sse`` (the event-stream decoder) and ``_reply`` (the reply builder).

Theory of operation
-------------------
``HTTPModel.stream(request)`` returns a :class:`ReplyStream`: the events are produced by
the async generator :func:`produce`, run in the consumer's own task (no task, nursery or
channel per request: with thousands of runs at once those would be most of what a
waiting request costs), and closed — ``aclose()`` — when the ``async with`` is left.
That is safe because no ``yield`` of :func:`produce` is inside a cancel scope or a
nursery: each timeout wraps one read, and the one shielded scope is in the ``finally``
that closes the response. :func:`produce` is the whole life of one request:

1. ``Start``; build the request body (a failure is an ``Error``).
2. :meth:`Session.open` sends it, retrying — with exponential backoff and jitter, or the
   server's ``Retry-After`` — on connect errors, 408, 409, 429 and 5xx, bounded by
   :class:`RetryPolicy`. Retries happen only before any byte of the stream arrived: the
   failed attempts were error responses, never part of a reply. The waits are plain
   ``trio.sleep`` calls, so a cancel stops them.
3. The body is decoded (``_sse.SSEDecoder``) and handed to the provider's decoder,
   which answers with assistant events. Two clocks bound a stream that stops moving
   (:class:`HTTPOptions`): ``idle_timeout`` since the last whole line (a keep-alive
   counts, bytes trickling in without a line end do not) and ``progress_timeout``
   since the last frame that added to the reply (keep-alives do not count). The reply
   succeeds only when the provider's terminal frame arrives (``[DONE]`` /
   ``message_stop``): a body that ends without it is a connection that died, never a
   success.
4. After the terminal frame the rest of the body is drained briefly so the connection
   goes back to the pool; on any fault it is closed instead. Either way the connection
   is released *before* the terminal event is yielded, so a consumer that leaves right
   after ``Done`` leaves nothing behind.

Every fault ends as an ``Error`` event whose message says what happened, with the partial
content kept. An abort is a cancel: leaving the ``async with`` cancels the task, whose
``finally`` closes the response under a bounded shield (``_session.Body.close``).

API keys live in a :class:`Secret`: never in a repr, and scrubbed from every error text
in every form they can take there. Credentials in ``base_url``
(``https://user:key@host``) are shown nowhere either.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, Self

import attrs
import httpx2
import trio

from .._core import events as ev
from ._options import HTTPOptions
from ._reply import ReplyBuilder, StreamFault
from ._secrets import Secret
from ._session import Session, describe_exception
from ._sse import SSEDecoder, SSEEvent, SSETooLarge

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType

    from .._core import ModelRequest

__all__ = ["Decoder", "HTTPModel", "Prepared", "ReplyStream", "produce"]


class Decoder(Protocol):
    """A provider's stream decoder (sans-IO)."""

    builder: ReplyBuilder
    finished: bool
    """True once the provider's terminal frame arrived."""
    terminator: str
    """How the terminal frame is named in messages (``data: [DONE]``)."""

    def feed(self, event: SSEEvent) -> list[ev.AssistantEvent]:
        """Events for one server-sent event. Raises StreamFault."""
        ...

    def finish(self) -> ev.Done | ev.Error:
        """The terminal event once ``finished``."""
        ...


@attrs.frozen(kw_only=True)
class Prepared:
    """One request, ready to send: where, with which headers, and how to decode it."""

    path: str
    headers: Mapping[str, str]
    body: bytes
    decoder: Decoder
    streamed: bool = True
    """False: the response is one JSON object, handed to the decoder whole as one
    event's data once the body ended (the decoder then sets ``finished``)."""


class _WholeBody:
    """A response body that is one JSON value: kept whole (bounded), read at its end."""

    mid_line = False

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._parts: list[bytes] = []
        self._size = 0
        self.lines = 0  # every chunk is life: the watch counts it as a line

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        self._size += len(chunk)
        if self._size > self._max:
            raise SSETooLarge(f"the response is larger than {self._max} bytes (max_event_bytes)")
        self._parts.append(chunk)
        self.lines += 1
        return []

    def event(self) -> SSEEvent:
        return SSEEvent(data=b"".join(self._parts).decode("utf-8", errors="replace"))


def _read_fault(exc: httpx2.HTTPError, idle: float) -> str:
    if isinstance(exc, httpx2.ReadTimeout):
        return f"the stream stalled: no data for {idle:g}s (idle_timeout)"
    if isinstance(exc, httpx2.NetworkError | httpx2.RemoteProtocolError):
        return f"the connection was lost mid-stream: {describe_exception(exc)}"
    return f"reading the stream failed: {describe_exception(exc)}"


class _Watch:
    """When the stream last showed life, and how long it may go without.

    Two clocks: a whole line (keep-alives included) resets ``idle_timeout``; a frame
    that adds to the reply resets ``progress_timeout``. Time spent handing events to the
    consumer is not the server's: the clocks are read when reading resumes.
    """

    def __init__(self, options: HTTPOptions) -> None:
        self._idle = options.idle_timeout
        self._progress = options.progress_timeout
        self._line = self._moved = trio.current_time()
        self._mid_line = False

    def deadline(self) -> float:
        deadline = self._line + self._idle
        if self._progress is not None:
            deadline = min(deadline, self._moved + self._progress)
        return deadline

    def saw(self, *, line: bool, mid_line: bool, progress: bool) -> None:
        """A chunk was read (and its events handed over): it ended ``line``s, left a
        line unfinished (``mid_line``), added to the reply (``progress``)."""
        now = trio.current_time()
        if line:
            self._line = now
        self._mid_line = mid_line
        if progress:
            self._moved = now

    def fault(self) -> str:
        """Why the stream was given up when ``deadline()`` passed."""
        if self._progress is not None and self._moved + self._progress <= self._line + self._idle:
            return (
                f"the stream made no progress for {self._progress:g}s: nothing but "
                "keep-alives or unfinished events arrived (progress_timeout)"
            )
        if self._mid_line:
            return (
                f"the stream stalled: bytes trickled in but no whole line for "
                f"{self._idle:g}s (idle_timeout)"
            )
        return f"the stream stalled: no data for {self._idle:g}s (idle_timeout)"


async def produce(
    session: Session,
    prepare: Callable[[], Prepared],
    builder: ReplyBuilder,
) -> AsyncGenerator[ev.AssistantEvent, None]:
    """The events of one reply (see the module docstring). Run by :class:`ReplyStream`:
    no ``yield`` here may be inside a cancel scope or a nursery."""
    yield ev.Start()
    try:
        prepared = prepare()
    except Exception as exc:
        yield builder.fail(session.redact(f"cannot build the request: {describe_exception(exc)}"))
        return
    decoder = prepared.decoder
    streamed = prepared.streamed
    try:
        _, body = await session.open(
            prepared.path, prepared.headers, prepared.body, streamed=streamed
        )
    except StreamFault as fault:
        yield builder.fail(session.redact(str(fault)))
        return
    except Exception as exc:
        # Not a network fault (a header value httpx2 refuses, say): still an Error.
        yield builder.fail(
            session.redact(f"the request could not be sent: {describe_exception(exc)}")
        )
        return
    max_bytes = session.options.max_event_bytes
    sse = SSEDecoder(max_event_bytes=max_bytes) if streamed else _WholeBody(max_bytes)
    watch = _Watch(session.options)
    final: ev.Done | ev.Error
    try:
        try:
            while True:
                with trio.move_on_at(watch.deadline()) as timer:
                    chunk = await body.read()
                if timer.cancelled_caught:
                    raise StreamFault(watch.fault())
                if chunk is None and isinstance(sse, _WholeBody):
                    for event in decoder.feed(sse.event()):
                        yield event
                    if decoder.finished:
                        break
                if chunk is None:
                    raise StreamFault(
                        f"the stream ended before {decoder.terminator} "
                        "(the server or a proxy closed it early; the reply is incomplete)"
                    )
                lines = sse.lines
                progress = False
                for item in sse.feed(chunk):
                    # A frame that adds nothing to the reply (a ping) is a keep-alive.
                    events = decoder.feed(item)
                    progress = progress or bool(events) or decoder.finished
                    for event in events:
                        yield event
                    if decoder.finished:
                        break
                if decoder.finished:
                    break
                watch.saw(line=sse.lines != lines, mid_line=sse.mid_line, progress=progress)
            await body.drain()
            final = decoder.finish()
        except StreamFault as fault:
            final = builder.fail(session.redact(str(fault)))
        except SSETooLarge as exc:
            final = builder.fail(session.redact(str(exc)))
        except httpx2.HTTPError as exc:
            final = builder.fail(session.redact(_read_fault(exc, session.options.idle_timeout)))
        except Exception as exc:
            final = builder.fail(
                session.redact(f"decoding the stream failed: {describe_exception(exc)}")
            )
    finally:
        await body.close()  # noqa: ASYNC102 - close() shields itself, bounded
    yield final


class ReplyStream:
    """What ``HTTPModel.stream`` returns: an async context manager whose value is the
    events of one reply (an async iterator), produced in the task that iterates it.

    Leaving the ``async with`` — normally, by an exception or a cancel — closes the
    producer (``aclose()``): a request still open is abandoned and its connection
    closed (under a bounded shield) before ``__aexit__`` returns, so nothing of the
    request outlives the block.
    """

    __slots__ = ("_events",)

    def __init__(self, events: AsyncGenerator[ev.AssistantEvent, None]) -> None:
        self._events = events

    async def __aenter__(self) -> AsyncGenerator[ev.AssistantEvent, None]:
        return self._events

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._events.aclose()


class HTTPModel:
    """Shared behaviour of the HTTP models: key and client, ``stream``, the repr.

    Args:
        model: the default model name.
        provider: recorded in each ``AssistantMessage.provider``.
        base_url: the API root.
        api_key: the key; None reads the environment variable ``key_env``. Surrounding
            whitespace (a newline left by a file) is stripped; empty means no key.
        key_env: where the key comes from by default.
        headers: extra request headers. Their values are kept out of every error text
            as the key is (in pieces of 6 or more characters too): one may carry a
            token.
        http: timeouts, pool limits and retries.

    Subclasses define ``_path``, :meth:`request_body`, :meth:`_auth_headers` and
    :meth:`_decoder`.
    """

    _path: str
    _fixed_headers: Mapping[str, str] = {}
    """Headers the provider itself sends (under the caller's ``headers``)."""
    _streamed = True
    """False: requests ask for one JSON response instead of an event stream."""

    def __init__(
        self,
        model: str,
        *,
        provider: str,
        base_url: str,
        api_key: str | None,
        key_env: str,
        headers: Mapping[str, str] | None,
        http: HTTPOptions | None,
    ) -> None:
        self.model = model
        """The model name sent in each request unless ``ModelOptions.model`` overrides it."""
        self.provider = provider
        """The name recorded in each reply's ``AssistantMessage.provider``."""
        # Where the requests go, for telemetry (``server.address``/``server.port``):
        # the host only, never the credentials a URL may carry.
        url = urllib.parse.urlsplit(base_url)
        self.server_address: str | None = url.hostname
        """The host of ``base_url``, for telemetry (never the credentials a URL may
        carry); None if the URL names none."""
        self.server_port: int | None = url.port or {"https": 443, "http": 80}.get(url.scheme)
        """The port of ``base_url``, or the one its scheme implies; for telemetry."""
        self._session = Session(
            base_url=base_url,
            options=http if http is not None else HTTPOptions(),
            secret=Secret(api_key if api_key is not None else os.environ.get(key_env)),
            key_hint=f"pass api_key= or set {key_env}",
            also_hidden=(headers or {}).values(),
        )
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            **self._fixed_headers,
            **(headers or {}),
        }

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (no I/O)."""
        raise NotImplementedError

    def _auth_headers(self, key: str) -> dict[str, str]:
        raise NotImplementedError

    def _decoder(self, builder: ReplyBuilder) -> Decoder:
        raise NotImplementedError

    def _request_path(self, request: ModelRequest) -> str:
        """Where ``request`` goes, under ``base_url`` (``_path`` unless a provider
        puts the model name in it)."""
        return self._path

    def _prepare(self, request: ModelRequest, builder: ReplyBuilder) -> Prepared:
        headers = dict(self._headers)
        if self._session.secret:
            headers.update(self._auth_headers(self._session.secret.reveal()))
        # Lone surrogates (from bad input) cannot be encoded: send U+FFFD instead.
        body = json.dumps(self.request_body(request), ensure_ascii=False)
        return Prepared(
            path=self._request_path(request),
            headers=headers,
            body=body.encode("utf-8", errors="replace"),
            decoder=self._decoder(builder),
            streamed=self._streamed,
        )

    def stream(
        self, request: ModelRequest
    ) -> AbstractAsyncContextManager[AsyncIterable[ev.AssistantEvent]]:
        """Stream one reply (the ``Model`` protocol).

        Returns an async context manager whose value is a receive channel of assistant
        events: ``Start``, block events, then one ``Done`` or ``Error``. Nothing is sent
        until the first event is asked for. Leaving the ``async with`` cancels the
        request and closes its connection. Faults never raise: they end the stream
        with an ``Error`` (stop reason ``error``) keeping the partial content.
        """
        asked = request.output
        builder = ReplyBuilder(
            model=request.options.model or self.model,
            provider=self.provider,
            final_answer=asked.name if asked is not None and asked.mode == "tool" else None,
        )
        return ReplyStream(produce(self._session, lambda: self._prepare(request, builder), builder))

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._session.base_url

    @property
    def options(self) -> HTTPOptions:
        """The ``HTTPOptions`` the model was made with (timeouts, pool limits, retries)."""
        return self._session.options

    async def aclose(self) -> None:
        """Close the model's HTTP client and its connections. A checkpoint."""
        await self._session.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        key = "<set>" if self._session.secret else "<unset>"
        return (
            f"{type(self).__name__}(model={self.model!r}, "
            f"base_url={self._session.shown_url!r}, api_key={key})"
        )
