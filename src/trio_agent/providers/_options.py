"""A provider model's connection settings: timeouts, pool limits and the retry policy."""

from __future__ import annotations

import random

import attrs

from .._core import seconds

__all__ = ["HTTPOptions", "RetryPolicy"]


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

    connect_timeout: float = attrs.field(default=10.0, validator=seconds(optional=False))
    idle_timeout: float = attrs.field(default=120.0, validator=seconds(optional=False))
    progress_timeout: float | None = attrs.field(default=300.0, validator=seconds(optional=True))
    write_timeout: float = attrs.field(default=60.0, validator=seconds(optional=False))
    max_connections: int = 32
    max_keepalive_connections: int = 8
    keepalive_expiry: float = attrs.field(
        default=30.0, validator=seconds(optional=False, zero=True)
    )
    max_event_bytes: int = 4 * 1024 * 1024
    max_error_bytes: int = 64 * 1024
    retry: RetryPolicy = attrs.field(factory=RetryPolicy)
    trust_env: bool = True
