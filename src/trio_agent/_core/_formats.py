"""Values that travel in JSON as strings: dates and times, durations, UUIDs, decimals,
bytes and paths — one table, read by the schema function, the strict converter and the
validators of tool output schemas, so the three agree on what each string must be.

Theory of operation. Each entry of :data:`STRING_FORMATS` names a Python type, the JSON
Schema of its string (a standard ``format`` where JSON Schema has one, a ``pattern`` or a
``contentEncoding`` otherwise), how a string is read into a value (``parse``: the one
rule of what is accepted) and written from one (``write``), and the words an error uses
(``expected a date-time (ISO 8601)``). :func:`format_checks` turns the parsers into
jsonschema-rs format checkers, so a schema's ``format: date-time`` accepts exactly what
the converter reads — a naive ``2024-05-01T10:00:00`` too, which Python writes and RFC
3339 (the default checker's rule) refuses.

The choices, and why:

- ``datetime``, ``date``, ``time``: ISO 8601 as Python's ``fromisoformat`` reads it
  (``Z`` and offsets, or none), ``format`` ``date-time``, ``date``, ``time``: the
  formats pydantic and msgspec name, and OpenAI's strict mode supports.
- ``timedelta``: an ISO 8601 duration in days, hours, minutes and seconds
  (``P1DT2H30M``, ``-PT1.5S``; weeks are read too; years and months are refused, having
  no fixed length), ``format: duration`` — as pydantic and msgspec write it.
- ``UUID``: ``format: uuid``; read as ``uuid.UUID`` reads it, written hyphenated.
- ``Decimal``: a string matching a decimal-number ``pattern`` (``"-12.50"``,
  ``"1.5e3"``), not a JSON number: a number goes through a binary float in most JSON
  parsers and loses digits, and ``pattern`` is a keyword OpenAI's strict mode supports
  (pydantic writes a ``Decimal`` as a string too). Only finite values have a form.
- ``bytes``: standard base64 (``contentEncoding: base64``, as msgspec describes it).
- ``Path`` (and ``PurePath``): the path as a string, ``format: path`` (pydantic's name;
  a hint only, not checked).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import decimal
import pathlib
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

__all__ = [
    "STRING_FORMATS",
    "StringFormat",
    "expected_string",
    "format_checks",
    "string_format_of",
]


@attrs.frozen(kw_only=True)
class StringFormat:
    """How values of one Python type are written in JSON: as a string.

    Attributes:
        schema: the JSON Schema of the string.
        expected: what a wrong value is told it should be (``a date-time (ISO 8601)``).
        parse: the string read into a value; raises ``ValueError`` when it is not one.
        write: the value written as its string.
    """

    schema: Mapping[str, Any]
    expected: str
    parse: Callable[[str], Any]
    write: Callable[[Any], str]


def _parse_datetime(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text)


def _parse_date(text: str) -> datetime.date:
    return datetime.date.fromisoformat(text)


def _parse_time(text: str) -> datetime.time:
    return datetime.time.fromisoformat(text)


_DURATION = re.compile(
    r"(?P<sign>[-+])?P(?:(?P<weeks>\d+)W)?(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:[.,]\d+)?)S)?)?",
    re.ASCII,
)


def _parse_duration(text: str) -> datetime.timedelta:
    match = _DURATION.fullmatch(text)
    parts = match.groupdict() if match is not None else {}
    numbers = {k: v for k, v in parts.items() if k != "sign" and v is not None}
    if not numbers or text.endswith("T"):
        raise ValueError(f"not an ISO 8601 duration: {text!r}")
    seconds = decimal.Decimal(numbers.pop("seconds", "0").replace(",", "."))
    whole = {k: int(v) for k, v in numbers.items()}
    value = datetime.timedelta(**whole, microseconds=int(seconds * 1_000_000))
    return -value if parts["sign"] == "-" else value


def _write_duration(value: datetime.timedelta) -> str:
    sign = "-" if value < datetime.timedelta(0) else ""
    value = abs(value)
    hours, rest = divmod(value.seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    out = f"{sign}P{value.days}D" if value.days else f"{sign}P"
    clock = ""
    if hours:
        clock += f"{hours}H"
    if minutes:
        clock += f"{minutes}M"
    if seconds or value.microseconds or not (value.days or clock):
        fraction = f".{value.microseconds:06d}".rstrip("0") if value.microseconds else ""
        clock += f"{seconds}{fraction}S"
    return f"{out}T{clock}" if clock else out


DECIMAL_PATTERN: Final = r"^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$"
"""What a decimal's string is: optional minus, digits, optional fraction and exponent
(no lookaround: OpenAI's strict mode refuses it)."""
_DECIMAL = re.compile(DECIMAL_PATTERN, re.ASCII)


def _parse_decimal(text: str) -> decimal.Decimal:
    if _DECIMAL.match(text) is None:
        raise ValueError(f"not a decimal number: {text!r}")
    return decimal.Decimal(text)


def _write_decimal(value: decimal.Decimal) -> str:
    # Positional notation ("100", not "1E+2"); a non-finite value gives "NaN" or
    # "Infinity", which the pattern refuses.
    return format(value, "f")


def _parse_base64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise ValueError(str(exc)) from None


def _write_base64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _iso(value: Any) -> str:
    return str(value.isoformat())


def _string(schema: Mapping[str, Any], expected: str, parse: Any, write: Any) -> StringFormat:
    return StringFormat(
        schema={"type": "string", **schema}, expected=expected, parse=parse, write=write
    )


STRING_FORMATS: Final[Mapping[type, StringFormat]] = {
    datetime.datetime: _string(
        {"format": "date-time"}, "a date-time (ISO 8601)", _parse_datetime, _iso
    ),
    datetime.date: _string({"format": "date"}, "a date (ISO 8601)", _parse_date, _iso),
    datetime.time: _string({"format": "time"}, "a time (ISO 8601)", _parse_time, _iso),
    datetime.timedelta: _string(
        {"format": "duration"},
        "a duration (ISO 8601, like P1DT2H30M)",
        _parse_duration,
        _write_duration,
    ),
    uuid.UUID: _string({"format": "uuid"}, "a UUID", uuid.UUID, str),
    decimal.Decimal: _string(
        {"pattern": DECIMAL_PATTERN},
        'a decimal number in a string (like "-12.50")',
        _parse_decimal,
        _write_decimal,
    ),
    bytes: _string({"contentEncoding": "base64"}, "base64 data", _parse_base64, _write_base64),
    pathlib.Path: _string({"format": "path"}, "a path (a string)", pathlib.Path, str),
    pathlib.PurePath: _string({"format": "path"}, "a path (a string)", pathlib.PurePath, str),
}
"""Each type written as a JSON string, with its schema, parser and writer."""


def string_format_of(tp: Any) -> StringFormat | None:
    """The entry of :data:`STRING_FORMATS` for the class ``tp`` (or for the nearest of
    its bases that has one: a ``PosixPath`` is written as a ``Path``); None otherwise."""
    if not isinstance(tp, type):
        return None
    for base in tp.__mro__:
        found = STRING_FORMATS.get(base)
        if found is not None:
            return found
    return None


def _check(parse: Callable[[str], Any]) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        try:
            parse(text)
        except (ValueError, TypeError, OverflowError, decimal.InvalidOperation):
            return False
        return True

    return check


def format_checks() -> dict[str, Callable[[str], bool]]:
    """jsonschema-rs format checkers (``formats=``) for the ``format`` s of
    :data:`STRING_FORMATS`: each accepts what the converter reads."""
    out: dict[str, Callable[[str], bool]] = {}
    for entry in STRING_FORMATS.values():
        name = entry.schema.get("format")
        if isinstance(name, str) and name != "path" and name not in out:
            out[name] = _check(entry.parse)
    return out


def expected_string(kind: Any) -> str | None:
    """What a string should have been, for a jsonschema-rs error ``kind`` raised by a
    ``pattern`` or ``format`` of :data:`STRING_FORMATS` (``a date-time (ISO 8601)``);
    None for any other error."""
    wanted = getattr(kind, "pattern", None) or getattr(kind, "format", None)
    if not isinstance(wanted, str):
        return None
    return _EXPECTED.get(wanted)


_EXPECTED: Final = {
    str(entry.schema.get("pattern") or entry.schema.get("format")): entry.expected
    for entry in STRING_FORMATS.values()
    if "pattern" in entry.schema or "format" in entry.schema
}
