"""A server-sent events decoder (sans-IO): bytes in, events out.

It follows the WHATWG event-stream rules with two deliberate choices:

- Lines end only at CR, LF or CRLF. A JSON string in a ``data:`` line may hold a raw
  U+2028, U+2029 or U+0085; splitting there (as ``str.splitlines`` does) would cut the
  frame in two. CR and LF are single bytes that never occur inside a multi-byte UTF-8
  sequence, so lines are split on bytes and each finished line is decoded on its own.
- The size of one event (its field lines, and a line still waiting for its end) is
  bounded: a server that never ends a line cannot make us buffer without limit.

``retry`` fields are ignored (we never reconnect), as is a half-received event when the
body ends (the spec discards it too).
"""

from __future__ import annotations

import re

import attrs

__all__ = ["SSEDecoder", "SSEEvent", "SSETooLarge"]

_EOL = re.compile(rb"\r\n|\r|\n")


@attrs.frozen(kw_only=True)
class SSEEvent:
    """One dispatched event: its ``event`` name (``message`` by default) and ``data``."""

    event: str = "message"
    data: str = ""


class SSETooLarge(ValueError):
    """One event (or one unfinished line) is larger than the decoder allows."""


class SSEDecoder:
    """Turns chunks of an event-stream body into :class:`SSEEvent` values.

    Args:
        max_event_bytes: the largest event accepted, counting the bytes of its lines.

    Not thread-safe; one per response body.
    """

    def __init__(self, *, max_event_bytes: int = 4 * 1024 * 1024) -> None:
        self._max = max_event_bytes
        self._partial = bytearray()
        self._skip_lf = False
        self._first = True
        self._event = ""
        self._data: list[str] = []
        self._size = 0
        self.lines = 0
        """Lines completed so far (comments and blank lines included): a sign of life
        that a server trickling bytes without ever ending a line does not give."""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Take the next chunk of the body; return the events it completed.

        Raises:
            SSETooLarge: the event being received grew past ``max_event_bytes``.
        """
        if self._skip_lf and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._skip_lf = False
        if not chunk:
            return []
        events: list[SSEEvent] = []
        start = 0
        for match in _EOL.finditer(chunk):
            if self._partial:
                self._partial += chunk[start : match.start()]
                line = bytes(self._partial)
                self._partial.clear()
            else:
                line = chunk[start : match.start()]
            start = match.end()
            event = self._line(line)
            if event is not None:
                events.append(event)
        if start < len(chunk):
            self._partial += chunk[start:]
        elif chunk[-1:] == b"\r":
            # A CR at the end of a chunk may be the first half of a CRLF.
            self._skip_lf = True
        if self._size + len(self._partial) > self._max:
            raise SSETooLarge(f"a server-sent event exceeded the {self._max}-byte limit")
        return events

    def _line(self, raw: bytes) -> SSEEvent | None:
        self.lines += 1
        if self._first:
            self._first = False
            if raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
        if not raw:
            return self._dispatch()
        self._size += len(raw) + 1
        if self._size > self._max:
            raise SSETooLarge(f"a server-sent event exceeded the {self._max}-byte limit")
        if raw[:1] == b":":
            return None
        line = raw.decode("utf-8", errors="replace")
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        return None

    def _dispatch(self) -> SSEEvent | None:
        data, name = self._data, self._event
        self._data, self._event, self._size = [], "", 0
        if not data:
            return None
        return SSEEvent(event=name or "message", data="\n".join(data))

    @property
    def mid_line(self) -> bool:
        """True if bytes of a line whose end has not arrived are waiting."""
        return bool(self._partial)

    @property
    def pending(self) -> bool:
        """True if an event was started but not finished (the body was cut short)."""
        return bool(self._data or self._event or self._partial)
