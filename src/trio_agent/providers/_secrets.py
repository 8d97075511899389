"""API keys that show up nowhere: :class:`Secret` and the hiding of URL credentials.

A key lives in a :class:`Secret`: stripped of surrounding whitespace when read, never in
a repr, and scrubbed from every error text in every form it can take there (raw,
escaped, repr'd, and in pieces: servers echo part of a rejected key, like
``sk-liv...Pg6E``). No run of :data:`MIN_RUN` or more consecutive characters of a key
is left in a text it scrubbed. Credentials in a URL (``https://user:key@host``) are cut
by :func:`without_userinfo`.
"""

from __future__ import annotations

import json
import re
import urllib.parse

__all__ = ["MIN_RUN", "Secret", "without_userinfo"]

MIN_RUN = 6
"""The shortest run of a key's consecutive characters that is hidden on its own (a
shorter key is hidden only whole): servers echo a rejected key in pieces — a prefix, a
suffix, a middle part. Shorter pieces are kept: they are no longer than ordinary words
(``sk-liv...Pg6E`` becomes ``[redacted]...Pg6E``)."""


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
    """Where ``text`` holds a run of at least :data:`MIN_RUN` consecutive characters of
    ``form`` (all of it when shorter): ``(start, end)`` of each, taken whole."""
    size = min(MIN_RUN, len(form))
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
        ``unicode_escape``d or URL-encoded; and in each form, any run of 6 or more
        consecutive characters of it (servers echo a rejected key in pieces: a prefix,
        a suffix, a middle part), taken whole. A key shorter than 6 characters is
        hidden only whole.
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


def without_userinfo(text: str) -> str:
    """``text`` with the credentials of any URL in it (``scheme://user:key@``) cut."""
    return _USERINFO.sub("", text)
