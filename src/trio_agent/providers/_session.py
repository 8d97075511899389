"""One model's HTTP client and how a request is sent: retries, error texts, the body.

:meth:`Session.open` sends a request, retrying — with exponential backoff and jitter, or
the server's ``Retry-After`` — on connect errors, 408, 409, 429 and 5xx, bounded by
:class:`RetryPolicy`. Retries happen only before any byte of the stream arrived: the
failed attempts were error responses, never part of a reply. The waits are plain
``trio.sleep`` calls, so a cancel stops them. An error response becomes a
:class:`StreamFault` whose message is the API's own error text, credentials hidden.

Closing a response goes through :class:`Body`, which lets httpx2's chain of async
generators finish by an exception instead of leaving them suspended for the garbage
collector (trio warns about those).
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import httpx2
import trio

from .._core import CONTEXT_OVERFLOW, parse_json
from ._reply import StreamFault
from ._secrets import MIN_RUN, Secret, without_userinfo

if TYPE_CHECKING:
    from ._options import HTTPOptions

__all__ = ["Body", "Session", "describe_error", "describe_exception"]

# Bounds on clean-up work done while cancelled: closing a socket is immediate, so these
# only matter if something is badly wrong.
_CLOSE_GRACE = 5.0
# After the terminal frame, how long to wait for the end of the body so the connection
# can be reused (the end normally comes in the same packet).
_DRAIN_GRACE = 1.0
_DRAIN_LIMIT = 64 * 1024
_RETRY_STATUSES = frozenset({408, 409, 429})


def describe_error(payload: Any) -> str | None:
    """The human part of an API's error object (OpenAI, Anthropic, Gemini, vLLM, Ollama
    shapes).

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
    kind = error.get("type") or error.get("status") or error.get("code")
    if isinstance(message, Mapping | list):
        message = json.dumps(message)
    if not message:
        return str(kind) if kind else None
    return f"{kind}: {message}" if kind and isinstance(kind, str) else str(message)


def is_overflow_error(status: int, body: bytes) -> bool:
    """Whether an error response says the request is longer than the model's context
    window, as the APIs document it: OpenAI's error ``code`` ``context_length_exceeded``
    (status 400), Anthropic's ``invalid_request_error`` whose message starts ``prompt is
    too long`` (status 400), or a 413 ``request_too_large``."""
    if status not in (400, 413):
        return False
    try:
        payload = parse_json(body.decode("utf-8", errors="replace"))
    except ValueError:
        return False
    error = payload.get("error") if isinstance(payload, Mapping) else None
    if not isinstance(error, Mapping):
        return False
    message = error.get("message")
    return (
        error.get("code") == "context_length_exceeded"
        or error.get("type") == "request_too_large"
        or (isinstance(message, str) and message.lower().startswith("prompt is too long"))
    )


def _error_text(body: bytes) -> str:
    text = body.decode("utf-8", errors="replace")
    try:
        described = describe_error(parse_json(text))
    except ValueError:  # not JSON, or nested too deeply: the text itself, cut
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


def describe_exception(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Body:
    """A streamed response body: chunks, a bounded drain, and a clean close."""

    def __init__(
        self, response: httpx2.Response, release: Callable[[], None] | None = None
    ) -> None:
        self._response = response
        self._chunks = response.aiter_bytes()
        self._release = release  # the request's connection slot, freed by close()

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
        try:
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
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


class Session:
    """One model's HTTP client (created on first use) and its request policy.

    Args:
        base_url: the API's base URL; request paths are appended to it.
        options: timeouts, pool limits, retries.
        secret: the API key (may be unset).
        key_hint: how to set the key, for the message of a 401/403 without one.
        also_hidden: other values kept out of every error text as the key is (the
            values of the caller's extra headers, which may carry a token). One
            shorter than :data:`MIN_RUN` characters is not hidden: it cannot hold a
            piece that long, and hiding it whole would hide ordinary words.
    """

    def __init__(
        self,
        *,
        base_url: str,
        options: HTTPOptions,
        secret: Secret,
        key_hint: str,
        also_hidden: Iterable[str] = (),
    ) -> None:
        try:
            url = httpx2.URL(base_url)
        except httpx2.InvalidURL as exc:
            raise ValueError(
                f"base_url is not a valid URL ({without_userinfo(str(exc))}): "
                f"{without_userinfo(base_url)!r}"
            ) from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"base_url must be an http(s) URL, got {without_userinfo(base_url)!r}")
        self.base_url = base_url.rstrip("/")
        # For messages and reprs: never show credentials embedded in the URL.
        self.shown_url = str(url.copy_with(username=None, password=None)).rstrip("/")
        self.options = options
        self.secret = secret
        # Credentials in the URL are secrets too: the password, or a lone user name
        # (``https://TOKEN@host``, a common way to pass a token).
        userinfo = url.password or url.username
        others = [userinfo] if userinfo else []
        others += [v for v in also_hidden if len(v.strip()) >= MIN_RUN]
        self._secrets = (secret, *(Secret(v) for v in others))
        self._key_hint = key_hint
        self._client: httpx2.AsyncClient | None = None
        # One slot per connection the pool may open: a request waits for a slot before
        # its HTTP request object is built, so the requests waiting for a connection
        # (thousands, with thousands of runs at once) hold a place in a queue and
        # nothing of the HTTP client's. A slot is held from the send until the response
        # is closed, as the pool holds the connection.
        limit = options.max_connections
        self._slots = trio.Semaphore(limit) if limit is not None and limit > 0 else None

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
        """``text`` with the API key, credentials in ``base_url`` and the other hidden
        values (``also_hidden``) hidden, in pieces too (see :meth:`Secret.redact`)."""
        for secret in self._secrets:
            text = secret.redact(text)
        return text

    async def open(
        self, path: str, headers: Mapping[str, str], body: bytes, *, streamed: bool = True
    ) -> tuple[httpx2.Response, Body]:
        """Send the request and return the streaming response (status 2xx, event stream;
        with ``streamed=False``, a JSON body instead).

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
            try:
                response = await self._send(client, url, body, headers)
            except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
                problem = f"cannot connect to {shown}: {describe_exception(exc)}"
                wait = retry.delay(attempt)
            except httpx2.TimeoutException as exc:
                raise StreamFault(
                    f"no response from {shown} within {self.options.idle_timeout:g}s "
                    f"(idle_timeout): {describe_exception(exc)}"
                ) from None
            except httpx2.HTTPError as exc:
                raise StreamFault(
                    f"the request to {shown} failed: {describe_exception(exc)}"
                ) from None
            else:
                status = response.status_code
                content_type = response.headers.get("content-type", "")
                expected = "text/event-stream" if streamed else "application/json"
                if 200 <= status < 300 and content_type.partition(";")[0].strip().lower() == (
                    expected
                ):
                    return response, Body(response, self._release)
                reader = Body(response, self._release)
                try:
                    raw = await reader.read_limited(self.options.max_error_bytes)
                finally:
                    await reader.close()  # noqa: ASYNC102 - close() shields itself, bounded
                if 200 <= status < 300:
                    wanted = "an event stream" if streamed else "JSON"
                    raise StreamFault(
                        f"{shown} answered {status} with {content_type or 'no content type'}"
                        f" instead of {wanted} ({expected}): {_error_text(raw)}"
                    )
                problem = f"HTTP {status} {response.reason_phrase} from {shown}: {_error_text(raw)}"
                if is_overflow_error(status, raw):
                    # The mark the loop recognises (``is_context_overflow``).
                    problem = f"{CONTEXT_OVERFLOW}: {problem}"
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

    async def _send(
        self, client: httpx2.AsyncClient, url: str, body: bytes, headers: Mapping[str, str]
    ) -> httpx2.Response:
        """Wait for a connection slot, then send the request (the response streams). On
        any failure, a cancel included, the slot is freed again; on success the
        response's :class:`Body` frees it when closed."""
        if self._slots is not None:
            await self._slots.acquire()
        try:
            request = client.build_request("POST", url, content=body, headers=headers)
            return await client.send(request, stream=True)
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        if self._slots is not None:
            self._slots.release()
