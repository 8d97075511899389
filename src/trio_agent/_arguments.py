"""Tool arguments: schema-driven lenient conversion, then strict validation.

``check_arguments(tool, raw)`` returns the arguments to pass to ``tool.execute`` or raises
:class:`InvalidArguments` whose ``text`` is the error result in pi's format::

    Validation failed for tool "<name>":
      - <path>: <message>
    Received arguments: {...}
"""

from __future__ import annotations

import json
import weakref
from typing import TYPE_CHECKING, Any

import jsonschema_rs

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._tools import Tool

__all__ = ["InvalidArguments", "check_arguments"]

MAX_ECHO = 2000
"""How many characters of the received arguments an error result repeats."""


class InvalidArguments(Exception):
    """The arguments do not validate; ``text`` is the tool result to send back."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


_validators: weakref.WeakKeyDictionary[Tool, Any] = weakref.WeakKeyDictionary()


def _validator(tool: Tool) -> Any:
    try:
        return _validators[tool]
    except KeyError:
        v = jsonschema_rs.validator_for(dict(tool.parameters))
        _validators[tool] = v
        return v


def _echo(arguments: Any) -> str:
    try:
        text = json.dumps(arguments, ensure_ascii=False, default=repr)
    except ValueError:
        text = repr(arguments)
    if len(text) > MAX_ECHO:
        text = f"{text[:MAX_ECHO]}… ({len(text) - MAX_ECHO} more characters)"
    return text


def check_arguments(tool: Tool, raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """Validate ``raw`` against ``tool.parameters``; every error is collected."""
    validator = _validator(tool)
    if validator.is_valid(raw):
        return raw
    lines = [f'Validation failed for tool "{tool.name}":']
    for err in validator.iter_errors(raw):
        path = "/".join(str(p) for p in err.instance_path) or "(root)"
        lines.append(f"  - {path}: {err.message}")
    lines.append(f"Received arguments: {_echo(raw)}")
    raise InvalidArguments("\n".join(lines))
