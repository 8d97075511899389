"""The JSON Schema of a Python type."""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["json_schema"]


def json_schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema of values of type ``tp`` (an attrs class, a dataclass, a
    ``TypedDict``, a primitive, a container of these...), as plain JSON data.

    A named class is described inline at the top, the classes it refers to under
    ``$defs``.

    Raises:
        TypeError: ``tp`` has no JSON Schema.
    """
    try:
        raw = msgspec.json.decode(msgspec.json.encode(msgspec.json.schema(tp)))
    except (TypeError, ValueError, NameError) as exc:
        raise TypeError(f"no JSON Schema for {tp!r}: {exc}") from exc
    ref = raw.get("$ref")
    if not isinstance(ref, str):
        return dict(raw)
    defs: dict[str, Any] = dict(raw.get("$defs", {}))
    top: dict[str, Any] = dict(defs.pop(ref.rsplit("/", 1)[-1]))
    if defs:
        top["$defs"] = defs
    return top
