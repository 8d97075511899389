"""The names the model calls a server's tools by.

MCP allows tool names the model APIs (OpenAI, Anthropic) refuse: dots, other characters,
any length. The APIs take ``[A-Za-z0-9_-]``, at most 64 characters. So each tool gets a
name of that shape, ``{prefix}__{name}`` when the server has a prefix, and calls still go
to the server under its own name. The rules, in this order:

1. A name the APIs accept as it is, prefix included, keeps it.
2. Otherwise every other character becomes ``_`` — if that name is free and fits.
3. Otherwise (it is taken, or too long): the name is cut to fit with ``_`` and 8 hex
   digits of its SHA-256 after it, a suffix that depends only on the server's name.

Rule 1 goes first for every tool, so a real ``a_b`` always keeps its name, and ``a.b`` on
the same server becomes ``a_b_3f0c9e21``; among changed names the one listed first gets
rule 2. So the same list gives the same names at every start, and a tool added to the end
of the list later renames no other tool (unless it takes an existing tool's name as its
own by rule 1). The mapping is injective by construction (a set of names taken).
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["MAX_NAME", "SEPARATOR", "model_names", "sanitised_name"]

MAX_NAME = 64
"""The longest tool name the model APIs accept."""
SEPARATOR = "__"
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]")
_ALLOWED = re.compile(r"[A-Za-z0-9_-]+")
_DIGITS = 8


def _full(prefix: str | None, name: str) -> str:
    return f"{prefix}{SEPARATOR}{name}" if prefix else name


def sanitised_name(prefix: str | None, name: str) -> str:
    """``{prefix}__{name}`` with every character the APIs refuse replaced by ``_`` (rule
    2, before any check that it is free or fits)."""
    return _full(prefix, _NOT_ALLOWED.sub("_", name))


def _suffixed(prefix: str | None, name: str, attempt: int) -> str:
    key = name if attempt == 0 else f"{name}\0{attempt}"
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGITS]
    room = MAX_NAME - len(_full(prefix, "")) - 1 - _DIGITS
    return _full(prefix, f"{_NOT_ALLOWED.sub('_', name)[:room]}_{digest}")


def model_names(prefix: str | None, names: Iterable[str]) -> dict[str, str]:
    """The model's name for each of ``names`` (distinct, non-empty server names, in the
    server's order), by the rules of this module. ``prefix`` must leave room: at most 40
    characters of ``[A-Za-z0-9_-]``."""
    names = list(names)
    out: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        full = _full(prefix, name)
        if len(full) <= MAX_NAME and _ALLOWED.fullmatch(name):
            out[name] = full
            taken.add(full)
    for name in names:
        if name in out:
            continue
        candidate = sanitised_name(prefix, name)
        attempt = 0
        # Two suffixes could meet (or meet a real name): the next attempt hashes again.
        while len(candidate) > MAX_NAME or candidate in taken:
            candidate = _suffixed(prefix, name, attempt)
            attempt += 1
        out[name] = candidate
        taken.add(candidate)
    return {name: out[name] for name in names}
