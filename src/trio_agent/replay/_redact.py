"""What a cassette never holds: credentials, found by the name they are stored under and
by the shape of well-known tokens.

A name is a credential's when, read case- and separator-insensitively (``api_key``,
``X-Api-Key``, ``xApiKey`` and ``XAPIKEY`` are one name), it ends with ``apikey``,
``accesskey``, ``secretkey``, ``privatekey``, ``sessionid``, ``secret``, ``token``,
``password``, ``passwd``, ``passphrase``, ``auth``, ``authorization``, ``credential(s)``,
``cookie`` or ``bearer``, or when its last word is ``key`` or ``pwd`` (``sort_key`` yes,
``keyword`` and ``monkey`` no). ``max_tokens`` is not one: it ends with ``tokens``.

A value is hidden wherever it has the shape of a well-known token (:data:`TOKEN_SHAPES`,
the one list): each shape starts with a fixed prefix or needs a digit, so ordinary text
never has it.
"""

from __future__ import annotations

import re
from typing import Any, Final

__all__ = ["REDACTED", "TOKEN_SHAPES", "is_secret_name", "redact", "redact_text"]

REDACTED: Final = "[redacted]"

TOKEN_SHAPES: Final[tuple[tuple[str, str], ...]] = (
    ("GitHub token (ghp_, gho_, ghu_, ghs_, ghr_)", r"gh[pousr]_[A-Za-z0-9]{20,}"),
    ("GitHub fine-grained token", r"github_pat_[A-Za-z0-9_]{20,}"),
    ("OpenAI or Anthropic key (sk-…, sk-ant-…)", r"sk-[A-Za-z0-9_-]{16,}"),
    ("AWS access key id", r"(?:AKIA|ASIA)[0-9A-Z]{16}"),
    ("Google API key", r"AIza[0-9A-Za-z_-]{35}"),
    ("Slack token", r"xox[abpr]-[0-9A-Za-z-]{10,}"),
    ("JSON Web Token", r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
    # The scheme and what follows it: 8 or more token characters, a digit among them
    # (so "Bearer bonds" or "basic training" stay).
    (
        "HTTP credentials (Bearer …, Basic …)",
        r"(?i:bearer|basic)\s+(?=[A-Za-z._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{8,}",
    ),
)
"""Well-known credential shapes, as ``(what, regular expression)``: each match is
replaced by ``[redacted]`` in every string a cassette stores in ``options.extra``."""

# Not inside a longer word: "task-…" holds no "sk-" key.
_TOKEN = re.compile(r"(?<![A-Za-z0-9_])(?:" + "|".join(p for _, p in TOKEN_SHAPES) + ")")

# The words of a name: "xApiKey" -> x, Api, Key; "APIKey" -> API, Key; "api_key" -> api, key.
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_SECRET_ENDINGS: Final = (
    "apikey",
    "accesskey",
    "secretkey",
    "privatekey",
    "sessionid",
    "secret",
    "token",
    "password",
    "passwd",
    "passphrase",
    "auth",
    "authorization",
    "credential",
    "credentials",
    "cookie",
    "bearer",
)
_SECRET_LAST_WORDS: Final = frozenset({"key", "pwd"})


def is_secret_name(name: str) -> bool:
    """Whether a value stored under ``name`` is a credential (see the module docstring)."""
    words = _WORD.findall(name)
    if not words:
        return False
    if words[-1].lower() in _SECRET_LAST_WORDS:
        return True
    return "".join(words).lower().endswith(_SECRET_ENDINGS)


def redact_text(text: str) -> str:
    """``text`` with every well-known token shape in it replaced by ``[redacted]``."""
    return _TOKEN.sub(REDACTED, text)


def redact(value: Any) -> Any:
    """A copy of the JSON value ``value`` without credentials: at any depth, the value of
    every entry whose name is a credential's becomes ``"[redacted]"``, and in every
    string each well-known token shape does."""
    if isinstance(value, dict):
        return {k: REDACTED if is_secret_name(str(k)) else redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
