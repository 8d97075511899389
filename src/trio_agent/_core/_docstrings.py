"""Google-style docstrings: a function's ``Args:`` (the ``@tool`` parameters' descriptions)
and a class's ``Attributes:`` (structured output's field descriptions)."""

from __future__ import annotations

import inspect
import re

__all__ = ["ATTRIBUTE_SECTIONS", "parse_docstring"]


_SECTION = re.compile(r"([A-Z][A-Za-z ]*):\s*")
_ARG_SECTIONS = frozenset(
    {"Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments"}
)
ATTRIBUTE_SECTIONS = frozenset({"Attributes", "Fields", "Keys"})
"""The sections of a class docstring that describe its fields."""
_ENTRY = re.compile(r"\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)")


def parse_docstring(
    doc: str | None, *, sections: frozenset[str] = _ARG_SECTIONS
) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into the description and per-argument texts.

    Returns:
        The docstring without its ``Args:`` section (summary, body and any other
        section, blank-line runs collapsed), and ``{parameter: description}`` from the
        ``Args:`` section, continuation lines joined with spaces. ``sections`` names the
        sections read that way (``ATTRIBUTE_SECTIONS`` for a class's fields).
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    body: list[str] = []
    args: dict[str, str] = {}
    i = 0
    while i < len(lines):
        header = _SECTION.fullmatch(lines[i])
        if header is None or header.group(1) not in sections:
            body.append(lines[i].rstrip())
            i += 1
            continue
        i += 1
        entry_indent: int | None = None
        current: str | None = None
        # The section runs until the next line that starts at column 0.
        while i < len(lines) and (not lines[i].strip() or lines[i][0].isspace()):
            line = lines[i]
            i += 1
            text = line.strip()
            if not text:
                continue
            indent = len(line) - len(line.lstrip())
            if entry_indent is None:
                entry_indent = indent
            if indent <= entry_indent:
                entry = _ENTRY.fullmatch(text)
                current = None
                if entry is not None:
                    current = entry.group(1)
                    args[current] = entry.group(2).strip()
            elif current is not None:
                args[current] = f"{args[current]} {text}".strip()
    description = re.sub(r"\n{3,}", "\n\n", "\n".join(body)).strip()
    return description, args
