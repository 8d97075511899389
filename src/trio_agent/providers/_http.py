"""The HTTP side shared by the providers: one client per model, retries, the stream task.

Theory of operation
-------------------
``HTTPModel.stream(request)`` returns ``trio.as_safe_channel(produce)(...)``: the events
are produced by an async generator running in its own task, handed over through a
memory channel. :func:`produce` is the whole life of one request:

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
``finally`` closes the response under a bounded shield. Closing goes through
:class:`_Body`, which lets httpx2's chain of async generators finish by an exception
instead of leaving them suspended for the garbage collector (trio warns about those).

API keys live in a :class:`Secret`: stripped of surrounding whitespace when read, never
in a repr, and scrubbed from every error text in every form they can take there (raw,
escaped, repr'd, partly: servers sometimes echo part of a rejected key). Credentials in
``base_url`` (``https://user:key@host``) are shown nowhere either.
"""

from __future__ import annotations

import email.utils
import json
import os
import random
import re
import time
import urllib.parse
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, Self

import attrs
import httpx2
import trio

from .. import _events as ev
from ._reply import ReplyBuilder, StreamFault
from ._sse import SSEDecoder, SSEEvent, SSETooLarge

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType

    from .._model import ModelRequest

__all__ = [
    "HTTPModel",
    "HTTPOptions",
    "RetryPolicy",
    "Secret",
    "Session",
    "describe_error",
    "produce",
]

# Bounds on clean-up work done while cancelled: closing a socket is immediate, so these
# only matter if something is badly wrong.
_CLOSE_GRACE = 5.0
# After the terminal frame, how long to wait for the end of the body so the connection
# can be reused (the end normally comes in the same packet).
_DRAIN_GRACE = 1.0
_DRAIN_LIMIT = 64 * 1024
_RETRY_STATUSES = frozenset({408, 409, 429})


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """When and how long to wait before sending a failed request again.

    A request is retried on a connect error or a 408, 409, 429 or 5xx response — never
    after a byte of the reply arrived. The n-th retry (0-based) waits the server's
    ``Retry-After`` (or ``retry-after-ms``) if it is between 0 and ``max_retry_after``
    seconds, else ``min(max_delay, initial_delay * 2**n)`` scaled by a random factor in
    [0.5, 1] (jitter spreads out clients that failed together).

    Attributes:
        max_retries: retries after the first attempt (0 disables retrying).
        initial_delay: seconds before the first retry, before jitter.
        max_delay: the cap of the exponential delay, in seconds.
        max_retry_after: the longest ``Retry-After`` honoured, in seconds.
    """

    max_retries: int = 3
    initial_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based)."""
        if retry_after is not None and 0 <= retry_after <= self.max_retry_after:
            return retry_after
        base = min(self.max_delay, self.initial_delay * 2.0**attempt)
        return base * random.uniform(0.5, 1.0)


def _seconds(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{attribute.name} must be a positive number of seconds, not {value!r}")


def _seconds_or_none(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        _seconds(_, attribute, value)


@attrs.frozen(kw_only=True)
class HTTPOptions:
    """Connection settings of a provider model (one HTTP client per model).

    Attributes:
        connect_timeout: seconds to open a connection.
        idle_timeout: the longest wait for the response, and then the longest the
            stream may go without a whole line (keep-alives count; bytes trickling in
            without ending a line do not); then the reply ends with an ``Error``.
            Default 2 minutes. A server that thinks silently for longer (a reasoning
            model that streams no reasoning) needs more.
        progress_timeout: the longest the stream may go without a frame that adds to
            the reply (text, thinking, a tool call, its end), however many keep-alives
            arrive meanwhile: SSE comments like ``: ping``, Anthropic ``ping`` events,
            empty frames. Default 5 minutes — room for the pings a model sends while it
            thinks. None: keep-alives keep a stream alive forever.
        write_timeout: seconds to send a piece of the request.
        max_connections: connections open at once; further requests wait for a free
            one (without a time limit; they can be cancelled).
        max_keepalive_connections: idle connections kept for reuse.
        keepalive_expiry: seconds an idle connection is kept.
        max_event_bytes: the largest server-sent event accepted.
        max_error_bytes: how much of an error response's body is read for its message.
        retry: the :class:`RetryPolicy`.
        trust_env: honour proxy and certificate settings from the environment.
    """

    connect_timeout: float = 10.0
    idle_timeout: float = attrs.field(default=120.0, validator=_seconds)
    progress_timeout: float | None = attrs.field(default=300.0, validator=_seconds_or_none)
    write_timeout: float = 60.0
    max_connections: int = 32
    max_keepalive_connections: int = 8
    keepalive_expiry: float = 30.0
    max_event_bytes: int = 4 * 1024 * 1024
    max_error_bytes: int = 64 * 1024
    retry: RetryPolicy = attrs.field(factory=RetryPolicy)
    trust_env: bool = True


# The shortest run of a key's characters that is hidden on its own (a shorter key is
# hidden only whole): servers echo a rejected key partly, as a prefix or a suffix.
_MIN_RUN = 8


def _forms(value: str) -> tuple[str, ...]:
    """The ways ``value`` can be written into an error text: as is, escaped for JSON,
    a Python ``repr`` (of the text or of its bytes), ``unicode_escape``, URL-encoded."""
    forms = {
        value,
        repr(value)[1:-1],
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(value.encode("utf-8", "surrogatepass"))[2:-1],
        value.encode("unicode_escape").decode("ascii"),
        urllib.parse.quote(value, safe=""),
        urllib.parse.quote_plus(value, safe=""),
    }
    forms.discard("")
    return tuple(sorted(forms, key=len, reverse=True))


def _runs(text: str, form: str) -> list[tuple[int, int]]:
    """Where ``text`` holds a run of at least ``_MIN_RUN`` consecutive characters of
    ``form`` (all of it when shorter): ``(start, end)`` of each, taken whole."""
    size = min(_MIN_RUN, len(form))
    starts: set[int] = set()
    for piece in {form[i : i + size] for i in range(len(form) - size + 1)}:
        at = text.find(piece)
        while at >= 0:
            starts.add(at)
            at = text.find(piece, at + 1)
    runs: list[tuple[int, int]] = []
    covered = 0
    for start in sorted(starts):
        if start + size <= covered:
            continue  # inside a run already found
        end = start + size
        while end < len(text) and text[start : end + 1] in form:
            end += 1
        runs.append((start, end))
        covered = max(covered, end)
    return runs


class Secret:
    """A credential that never shows up in a repr, a log or an error message.

    Surrounding whitespace is stripped when it is read (a key read from a file or a
    secret store often ends with a newline, which the HTTP layer would refuse).
    :meth:`redact` hides it in every form it can take in a text.
    """

    __slots__ = ("_forms", "_value")

    def __init__(self, value: str | None) -> None:
        self._value = value.strip() if value else None
        self._value = self._value or None
        self._forms = _forms(self._value) if self._value else ()

    def __repr__(self) -> str:
        return "Secret(<set>)" if self._value else "Secret(<unset>)"

    def __bool__(self) -> bool:
        return self._value is not None

    def reveal(self) -> str:
        """The key itself, for a request header. Raises ValueError if unset."""
        if self._value is None:
            raise ValueError("no API key is set")
        return self._value

    def redact(self, text: str) -> str:
        """``text`` with the key replaced by ``[redacted]``.

        Every form the key can take in a message is hidden: as is, JSON-escaped,
        ``repr``'d (a text or bytes repr, as exceptions show a refused header),
        ``unicode_escape``d or URL-encoded; and in each form, any run of 8 or more
        consecutive characters of it (servers echo a rejected key partly: a prefix, a
        suffix), taken whole. A key shorter than 8 characters is hidden only whole.
        """
        runs = sorted(run for form in self._forms for run in _runs(text, form))
        if not runs:
            return text
        # Runs of different forms may overlap (a piece of the key is the same in each):
        # hide their union.
        out: list[str] = []
        done = 0
        for start, end in runs:
            if end <= done:
                continue
            if start > done or not out:
                out.append(text[done:start])
                out.append("[redacted]")
            done = end
        out.append(text[done:])
        return "".join(out)


_USERINFO = re.compile(r"(?<=://)[^/?#\s]*@")


def _without_userinfo(text: str) -> str:
    """``text`` with the credentials of any URL in it (``scheme://user:key@``) cut."""
    return _USERINFO.sub("", text)


def describe_error(payload: Any) -> str | None:
    """The human part of an API's error object (OpenAI, Anthropic, vLLM, Ollama shapes).

    Returns ``"<type>: <message>"`` (or just the message), None if there is none.
    """
    if not isinstance(payload, Mapping):
        return None
    error: Any = payload.get("error", payload)
    if isinstance(error, str):
        return error
    if not isinstance(error, Mapping):
        return None
    message = error.get("message")
    kind = error.get("type") or error.get("code")
    if isinstance(message, Mapping | list):
        message = json.dumps(message)
    if not message:
        return str(kind) if kind else None
    return f"{kind}: {message}" if kind and isinstance(kind, str) else str(message)


def _error_text(body: bytes) -> str:
    text = body.decode("utf-8", errors="replace")
    try:
        described = describe_error(json.loads(text))
    except ValueError:
        described = None
    if described:
        return described
    text = " ".join(text.split())
    if not text:
        return "(empty body)"
    return text if len(text) <= 500 else text[:500] + "…"


def _retry_after(headers: httpx2.Headers) -> float | None:
    """The server's requested wait in seconds, from ``retry-after-ms`` or ``Retry-After``."""
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return float(value) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _describe_exception(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _Body:
    """A streamed response body: chunks, a bounded drain, and a clean close."""

    def __init__(self, response: httpx2.Response) -> None:
        self._response = response
        self._chunks = response.aiter_bytes()

    async def read(self) -> bytes | None:
        """The next chunk, None at the end. Raises httpx2 errors."""
        try:
            return await self._chunks.__anext__()
        except StopAsyncIteration:
            return None

    async def read_limited(self, limit: int) -> bytes:
        """Up to ``limit`` bytes of the body (errors end the read early)."""
        parts: list[bytes] = []
        size = 0
        try:
            while size < limit:
                chunk = await self.read()
                if chunk is None:
                    break
                parts.append(chunk)
                size += len(chunk)
        except httpx2.HTTPError:
            pass
        return b"".join(parts)[:limit]

    async def drain(self) -> None:
        """Read what is left (briefly, and bounded) so the connection can be reused."""
        with trio.move_on_after(_DRAIN_GRACE):
            size = 0
            try:
                while size <= _DRAIN_LIMIT:
                    chunk = await self.read()
                    if chunk is None:
                        return
                    size += len(chunk)
            except httpx2.HTTPError:
                pass

    async def close(self) -> None:
        """Release the connection. Never raises; safe to call when cancelled.

        Closing the response closes the connection (or returns it to the pool if the
        body was read to its end). Then the chunk iterator is resumed once: its next
        read fails on the closed stream, and that exception finishes every generator of
        httpx2's chain (``aclose()`` would leave the innermost ones suspended).
        """
        with trio.move_on_after(_CLOSE_GRACE, shield=True):
            try:
                await self._response.aclose()
            except httpx2.HTTPError:
                pass
            for _ in range(16):
                try:
                    await self._chunks.__anext__()
                except StopAsyncIteration:
                    break
                except Exception:
                    break


class Session:
    """One model's HTTP client (created on first use) and its request policy.

    Args:
        base_url: the API's base URL; request paths are appended to it.
        options: timeouts, pool limits, retries.
        secret: the API key (may be unset).
        key_hint: how to set the key, for the message of a 401/403 without one.
    """

    def __init__(
        self, *, base_url: str, options: HTTPOptions, secret: Secret, key_hint: str
    ) -> None:
        try:
            url = httpx2.URL(base_url)
        except httpx2.InvalidURL as exc:
            raise ValueError(
                f"base_url is not a valid URL ({_without_userinfo(str(exc))}): "
                f"{_without_userinfo(base_url)!r}"
            ) from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(
                f"base_url must be an http(s) URL, got {_without_userinfo(base_url)!r}"
            )
        self.base_url = base_url.rstrip("/")
        # For messages and reprs: never show credentials embedded in the URL.
        self.shown_url = str(url.copy_with(username=None, password=None)).rstrip("/")
        self.options = options
        self.secret = secret
        # Credentials in the URL are secrets too: the password, or a lone user name
        # (``https://TOKEN@host``, a common way to pass a token).
        userinfo = url.password or url.username
        self._secrets = (secret, Secret(userinfo)) if userinfo else (secret,)
        self._key_hint = key_hint
        self._client: httpx2.AsyncClient | None = None

    @property
    def client(self) -> httpx2.AsyncClient:
        """The shared client, created on first use (no checkpoint)."""
        if self._client is None:
            o = self.options
            self._client = httpx2.AsyncClient(
                timeout=httpx2.Timeout(
                    connect=o.connect_timeout,
                    read=o.idle_timeout,
                    write=o.write_timeout,
                    pool=None,
                ),
                limits=httpx2.Limits(
                    max_connections=o.max_connections,
                    max_keepalive_connections=o.max_keepalive_connections,
                    keepalive_expiry=o.keepalive_expiry,
                ),
                trust_env=o.trust_env,
                follow_redirects=False,
            )
        return self._client

    async def aclose(self) -> None:
        """Close the client and its connections (a later request opens a new one)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def redact(self, text: str) -> str:
        """``text`` with the API key and credentials in ``base_url`` hidden."""
        for secret in self._secrets:
            text = secret.redact(text)
        return text

    async def open(
        self, path: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[httpx2.Response, _Body]:
        """Send the request and return the streaming response (status 2xx, event stream).

        Retries as :class:`RetryPolicy` says. Cancelling stops it at any point (the
        connection is released by httpx2's pool).

        Raises:
            StreamFault: the request failed for good; the message says why.
        """
        client = self.client
        retry = self.options.retry
        url = self.base_url + path
        shown = self.shown_url + path
        attempt = 0
        while True:
            request = client.build_request("POST", url, content=body, headers=headers)
            try:
                response = await client.send(request, stream=True)
            except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
                problem = f"cannot connect to {shown}: {_describe_exception(exc)}"
                wait = retry.delay(attempt)
            except httpx2.TimeoutException as exc:
                raise StreamFault(
                    f"no response from {shown} within {self.options.idle_timeout:g}s "
                    f"(idle_timeout): {_describe_exception(exc)}"
                ) from None
            except httpx2.HTTPError as exc:
                raise StreamFault(
                    f"the request to {shown} failed: {_describe_exception(exc)}"
                ) from None
            else:
                status = response.status_code
                content_type = response.headers.get("content-type", "")
                if 200 <= status < 300 and content_type.partition(";")[0].strip().lower() == (
                    "text/event-stream"
                ):
                    return response, _Body(response)
                reader = _Body(response)
                try:
                    raw = await reader.read_limited(self.options.max_error_bytes)
                finally:
                    await reader.close()  # noqa: ASYNC102 - close() shields itself, bounded
                if 200 <= status < 300:
                    raise StreamFault(
                        f"{shown} answered {status} with {content_type or 'no content type'}"
                        f" instead of an event stream (text/event-stream): {_error_text(raw)}"
                    )
                problem = f"HTTP {status} {response.reason_phrase} from {shown}: {_error_text(raw)}"
                if status in (401, 403) and not self.secret:
                    problem += f" (no API key is set: {self._key_hint})"
                if status not in _RETRY_STATUSES and status < 500:
                    raise StreamFault(problem)
                wait = retry.delay(attempt, _retry_after(response.headers))
            if attempt >= retry.max_retries:
                if attempt:
                    problem += f" (gave up after {attempt} retr{'y' if attempt == 1 else 'ies'})"
                raise StreamFault(problem)
            attempt += 1
            await trio.sleep(wait)


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


def _read_fault(exc: httpx2.HTTPError, idle: float) -> str:
    if isinstance(exc, httpx2.ReadTimeout):
        return f"the stream stalled: no data for {idle:g}s (idle_timeout)"
    if isinstance(exc, httpx2.NetworkError | httpx2.RemoteProtocolError):
        return f"the connection was lost mid-stream: {_describe_exception(exc)}"
    return f"reading the stream failed: {_describe_exception(exc)}"


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
    """The events of one reply (see the module docstring). Run via ``as_safe_channel``."""
    yield ev.Start()
    try:
        prepared = prepare()
    except Exception as exc:
        yield builder.fail(session.redact(f"cannot build the request: {_describe_exception(exc)}"))
        return
    decoder = prepared.decoder
    try:
        _, body = await session.open(prepared.path, prepared.headers, prepared.body)
    except StreamFault as fault:
        yield builder.fail(session.redact(str(fault)))
        return
    except Exception as exc:
        # Not a network fault (a header value httpx2 refuses, say): still an Error.
        yield builder.fail(
            session.redact(f"the request could not be sent: {_describe_exception(exc)}")
        )
        return
    sse = SSEDecoder(max_event_bytes=session.options.max_event_bytes)
    watch = _Watch(session.options)
    final: ev.Done | ev.Error
    try:
        try:
            while True:
                with trio.move_on_at(watch.deadline()) as timer:
                    chunk = await body.read()
                if timer.cancelled_caught:
                    raise StreamFault(watch.fault())
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
                session.redact(f"decoding the stream failed: {_describe_exception(exc)}")
            )
    finally:
        await body.close()  # noqa: ASYNC102 - close() shields itself, bounded
    yield final


_safe_produce = trio.as_safe_channel(produce)


class HTTPModel:
    """Shared behaviour of the HTTP models: key and client, ``stream``, the repr.

    Args:
        model: the default model name.
        provider: recorded in each ``AssistantMessage.provider``.
        base_url: the API root.
        api_key: the key; None reads the environment variable ``key_env``. Surrounding
            whitespace (a newline left by a file) is stripped; empty means no key.
        key_env: where the key comes from by default.
        headers: extra request headers.
        http: timeouts, pool limits and retries.

    Attributes:
        model / provider: as given.
        server_address / server_port: the host and port of ``base_url`` (the port
            implied by the scheme when the URL names none), for telemetry; never the
            credentials a URL may carry.

    Subclasses define ``_path``, :meth:`request_body`, :meth:`_auth_headers` and
    :meth:`_decoder`.
    """

    _path: str

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
        self.provider = provider
        # Where the requests go, for telemetry (``server.address``/``server.port``):
        # the host only, never the credentials a URL may carry.
        url = urllib.parse.urlsplit(base_url)
        self.server_address: str | None = url.hostname
        self.server_port: int | None = url.port or {"https": 443, "http": 80}.get(url.scheme)
        self._session = Session(
            base_url=base_url,
            options=http if http is not None else HTTPOptions(),
            secret=Secret(api_key if api_key is not None else os.environ.get(key_env)),
            key_hint=f"pass api_key= or set {key_env}",
        )
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            **(headers or {}),
        }

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (no I/O)."""
        raise NotImplementedError

    def _auth_headers(self, key: str) -> dict[str, str]:
        raise NotImplementedError

    def _decoder(self, builder: ReplyBuilder) -> Decoder:
        raise NotImplementedError

    def _prepare(self, request: ModelRequest, builder: ReplyBuilder) -> Prepared:
        headers = dict(self._headers)
        if self._session.secret:
            headers.update(self._auth_headers(self._session.secret.reveal()))
        # Lone surrogates (from bad input) cannot be encoded: send U+FFFD instead.
        body = json.dumps(self.request_body(request), ensure_ascii=False)
        return Prepared(
            path=self._path,
            headers=headers,
            body=body.encode("utf-8", errors="replace"),
            decoder=self._decoder(builder),
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
        builder = ReplyBuilder(model=request.options.model or self.model, provider=self.provider)
        return _safe_produce(self._session, lambda: self._prepare(request, builder), builder)

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._session.base_url

    @property
    def options(self) -> HTTPOptions:
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
