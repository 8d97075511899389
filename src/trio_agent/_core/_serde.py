"""The one cattrs converter, and ``dumps``/``loads`` for transcripts.

Unions are tagged (``type`` for blocks and events, ``role`` for messages) with
``cattrs.strategies.configure_tagged_union``. Primitives are structured strictly: cattrs'
default coercions (``"false"`` → True, ``None`` → ``"None"``) would silently corrupt a
transcript. Structuring errors become :class:`TranscriptFormatError` naming the path of
the first bad field, like ``$[3].content[0].type``.

Text is written as UTF-8 JSON, except for surrogate code points (U+D800–U+DFFF), which
UTF-8 cannot encode: they come from undecodable file names (``os.fsdecode`` gives
``"caf\\udce9.txt"``) or from a UTF-16 pair a stream split in two. They are written as
JSON ``\\uXXXX`` escapes, which read back as the same code points, so any string the loop
can hold is written and read back. One case cannot be told apart in JSON: a high
surrogate directly followed by a low one is, by JSON's rules, the character the pair
encodes in UTF-16 (``"\\ud83d\\ude00"`` is 😀), so it reads back joined; lone surrogates
read back as they were.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import sys
import typing
from array import array
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import cattrs
from cattrs.gen import make_dict_unstructure_fn, override
from cattrs.preconf.json import make_converter

from . import _events as ev
from ._errors import TranscriptFormatError
from ._formats import STRING_FORMATS, StringFormat
from ._messages import (
    AssistantMessage,
    ContentBlock,
    CustomMessage,
    Image,
    Message,
    Text,
    Thinking,
    Tokens,
    ToolCall,
    ToolResultMessage,
)
from ._validators import as_history

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_VALUE_DEPTH",
    "JsonTooDeep",
    "check_json",
    "check_message",
    "dumps",
    "event_to_json",
    "from_jsonable",
    "join_surrogate_pairs",
    "json_text",
    "loads",
    "message_to_json",
    "parse_json",
    "strict_converter",
    "structure_errors",
    "to_jsonable",
]

T = TypeVar("T")


def _strict_str(value: Any, _: type) -> str:
    if type(value) is not str:
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _strict_int(value: Any, _: type) -> int:
    if type(value) is not int:
        raise TypeError(f"expected an integer, got {type(value).__name__}")
    return value


def _strict_float(value: Any, _: type) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    raise TypeError(f"expected a number, got {type(value).__name__}")


def _strict_bool(value: Any, _: type) -> bool:
    if type(value) is not bool:
        raise TypeError(f"expected true or false, got {type(value).__name__}")
    return value


def _json_object(value: Any, _: type) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"expected a JSON object, got {type(value).__name__}")
    return value


def _string_hooks(
    entry: StringFormat,
) -> tuple[Callable[[Any, Any], Any], Callable[[Any], str]]:
    """The structure and unstructure hooks of a type written as a string (see
    ``_formats``): a value that is not a string, or not one of the type, is an error
    saying what was expected (``expected a date-time (ISO 8601)``)."""
    expected = f"expected {entry.expected}"

    def structure(value: Any, _: Any) -> Any:
        if type(value) is not str:
            raise TypeError(f"{expected}, got {type(value).__name__}")
        try:
            return entry.parse(value)
        except (ValueError, TypeError, OverflowError, ArithmeticError):
            raise ValueError(expected) from None

    return structure, entry.write


class _BadTag(ValueError):
    """An unknown or missing union tag; reported at the tag's own path."""

    def __init__(self, message: str, tag_name: str) -> None:
        super().__init__(message)
        self.tag_name = tag_name


def _configure_tagged_union(conv: cattrs.Converter, union: Any, tag_name: str) -> None:
    """Structure and unstructure ``union`` as JSON objects tagged by ``tag_name``.

    Like ``cattrs.strategies.configure_tagged_union``, but an unknown tag is reported as
    such at the tag's own path (cattrs reports a missing field at the object's path).
    """
    classes = typing.get_args(union)
    by_tag: dict[str, type] = {getattr(cl, tag_name): cl for cl in classes}
    known = ", ".join(repr(t) for t in by_tag)
    for cl in classes:
        tag = getattr(cl, tag_name)
        if cl not in _tag_unstructurers:
            base = (
                conv.get_unstructure_hook(cl)
                if cl is ev.MessageUpdate
                else make_dict_unstructure_fn(cl, conv, **_OMITTED_IF_UNSET.get(cl, {}))
            )
            _tag_unstructurers[cl] = _add_tag(base, tag_name, tag)
            conv.register_unstructure_hook(cl, _tag_unstructurers[cl])

    def structure(data: Any, _: Any) -> Any:
        if not isinstance(data, dict):
            raise TypeError(f"expected a JSON object, got {type(data).__name__}")
        tag = data.get(tag_name)
        cl = by_tag.get(tag) if isinstance(tag, str) else None
        if cl is None:
            what = "missing" if tag is None else f"unknown {tag_name} {tag!r}"
            raise _BadTag(f"{what} (expected one of {known})", tag_name)
        fields = dict(data)
        del fields[tag_name]
        return conv.structure(fields, cl)

    conv.register_structure_hook_func(lambda t: t == union, structure)


_tag_unstructurers: dict[type, Callable[[Any], dict[str, Any]]] = {}
# Fields left out of a line when they hold their default: lines written before the
# field existed stay byte-for-byte what they were.
# --- tokens: packed arrays -----------------------------------------------------------
#
# A reply's token ids and log-probabilities are written as base64 text of packed
# little-endian arrays (ids: unsigned 32-bit; log-probabilities: IEEE 754 doubles, so
# every float reads back bit for bit): about 5.3 characters per id, instead of a JSON
# number (or object) per token. ``"pack": "le"`` names that encoding.

_ID_CODE = "I" if array("I").itemsize == 4 else "L"
_PACK = "le"


def _pack(values: tuple[Any, ...], code: str) -> str:
    packed = array(code, values)
    if sys.byteorder == "big":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def _unpack(text: Any, code: str) -> tuple[Any, ...]:
    if type(text) is not str:
        raise TypeError(f"expected base64 text of packed values, got {type(text).__name__}")
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"malformed base64 ({exc})") from None
    packed = array(code)
    if len(raw) % packed.itemsize:
        raise ValueError(
            f"packed values must be a multiple of {packed.itemsize} bytes, got {len(raw)}"
        )
    packed.frombytes(raw)
    if sys.byteorder == "big":
        packed.byteswap()
    return tuple(packed)


def _unstructure_tokens(tokens: Tokens) -> dict[str, Any]:
    out: dict[str, Any] = {
        "pack": _PACK,
        "prompt_ids": _pack(tokens.prompt_ids, _ID_CODE),
        "completion_ids": _pack(tokens.completion_ids, _ID_CODE),
    }
    if tokens.logprobs:
        out["logprobs"] = _pack(tokens.logprobs, "d")
    if tokens.model_version is not None:
        out["model_version"] = tokens.model_version
    return out


def _structure_tokens(data: Any, _: type) -> Tokens:
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object, got {type(data).__name__}")
    if data.get("pack") != _PACK:
        raise ValueError(f"unknown token packing {data.get('pack')!r} (expected {_PACK!r})")
    version = data.get("model_version")
    if version is not None and type(version) is not str:
        raise TypeError(f"model_version: expected a string, got {type(version).__name__}")
    return Tokens(
        prompt_ids=_unpack(data.get("prompt_ids"), _ID_CODE),
        completion_ids=_unpack(data.get("completion_ids"), _ID_CODE),
        logprobs=_unpack(data.get("logprobs", ""), "d"),
        model_version=version,
    )


_OMITTED_IF_UNSET: dict[type, dict[str, Any]] = {
    AssistantMessage: {"tokens": override(omit_if_default=True)},
    ToolResultMessage: {"structured_content": override(omit_if_default=True)},
    ToolCall: {"raw_arguments": override(omit_if_default=True)},
}
"""Fields added after transcripts were first written: left out of the JSON while they
hold their default, so a line without them means the same as before, both ways."""


def _add_tag(
    base: Callable[[Any], dict[str, Any]], tag_name: str, tag: str
) -> Callable[[Any], dict[str, Any]]:
    def unstructure(value: Any) -> dict[str, Any]:
        d = base(value)
        d[tag_name] = tag
        return d

    return unstructure


def strict_converter() -> cattrs.Converter:
    """A new JSON converter that structures primitives strictly (``"false"`` is not a
    bool, ``1.5`` not an int, ``None`` not a str); the base of the transcripts' converter
    and of structured output's. Dates, times, durations, UUIDs, decimals, bytes and
    paths are read and written as the strings ``_formats`` describes (bytes as base64),
    a wrong string an error naming what was expected."""
    conv = make_converter(prefer_attrib_converters=False)
    conv.register_structure_hook(str, _strict_str)
    conv.register_structure_hook(int, _strict_int)
    conv.register_structure_hook(float, _strict_float)
    conv.register_structure_hook(bool, _strict_bool)
    conv.register_structure_hook_func(lambda t: t == Mapping[str, Any], _json_object)
    for tp, entry in STRING_FORMATS.items():
        structure, unstructure = _string_hooks(entry)
        conv.register_structure_hook(tp, structure)
        conv.register_unstructure_hook(tp, unstructure)
    return conv


def structure_errors(exc: Exception) -> list[tuple[str, str]]:
    """What a structuring error of a converter from :func:`strict_converter` says:
    ``(path, message)`` for each failure, the path starting at ``$`` (``$.items[2]``)."""
    if not isinstance(exc, cattrs.BaseValidationError):
        return [("$", _describe(exc, None))]
    out = []
    for line in cattrs.transform_error(exc, path="$", format_exception=_describe):
        message, _, path = line.rpartition(" @ ")
        out.append((path or "$", message or line))
    return out


def _make() -> cattrs.Converter:
    conv = strict_converter()
    conv.register_unstructure_hook(Tokens, _unstructure_tokens)
    conv.register_structure_hook(Tokens, _structure_tokens)

    for union in (Text | Image, Text | Thinking | ToolCall, ContentBlock, ev.AssistantEvent):
        _configure_tagged_union(conv, union, "type")
    _configure_tagged_union(conv, Message, "role")

    # A MessageUpdate holds a lazy snapshot; on the wire it is a plain message.
    def unstructure_update(u: ev.MessageUpdate) -> dict[str, Any]:
        return {
            "message": conv.unstructure(u.message, AssistantMessage),
            "event": conv.unstructure(u.event, ev.AssistantEvent),
        }

    def structure_update(d: Any, _: type) -> ev.MessageUpdate:
        return ev.MessageUpdate(
            message=conv.structure(d["message"], AssistantMessage),
            event=conv.structure(d["event"], ev.AssistantEvent),  # type: ignore[arg-type]
        )

    conv.register_unstructure_hook(ev.MessageUpdate, unstructure_update)
    conv.register_structure_hook(ev.MessageUpdate, structure_update)
    _configure_tagged_union(conv, ev.AgentEvent, "type")
    return conv


_converter = _make()


def _describe(exc: BaseException, type_: Any) -> str:
    if isinstance(exc, _BadTag):
        return f"{exc}\x00{exc.tag_name}"
    if isinstance(exc, KeyError):
        return "required field missing"
    if typing.get_origin(type_) is typing.Literal:
        allowed = ", ".join(repr(a) for a in typing.get_args(type_))
        return f"expected one of {allowed}"
    if isinstance(exc, TypeError | ValueError) and str(exc):
        return str(exc)
    return cattrs.v.format_exception(exc, type_)


def _format_error(exc: Exception, root: str) -> TranscriptFormatError:
    if isinstance(exc, cattrs.BaseValidationError):
        details = cattrs.transform_error(exc, path=root, format_exception=_describe)
        first = details[0] if details else str(exc)
        message, _, path = first.rpartition(" @ ")
        if not message:
            message, path = first, root
    else:
        message = _describe(exc, None)
        path = root
    message, _, tag = message.partition("\x00")
    if tag:
        path = f"{path}.{tag}"
    return TranscriptFormatError(f"{message} at {path}", path=path)


def to_jsonable(value: Any, cl: Any = None) -> Any:
    """Unstructure a message, block or event into JSON-ready Python values."""
    return _converter.unstructure(value, cl if cl is not None else type(value))


def from_jsonable(data: Any, cl: type[T] | Any, *, path: str = "$") -> T:
    """Structure JSON values into ``cl``; raises :class:`TranscriptFormatError`."""
    try:
        return _converter.structure(data, cl)  # type: ignore[no-any-return]
    except Exception as exc:
        raise _format_error(exc, path) from None


_SURROGATE = re.compile("[\ud800-\udfff]")
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_text(value: Any) -> str:
    """Compact JSON text of ``value`` that encodes as UTF-8 whatever strings it holds.

    Non-ASCII characters stay as they are (readable); surrogate code points, which UTF-8
    cannot encode, become ``\\uXXXX`` escapes. They can only occur inside JSON strings,
    where an escape is the same value.
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(_escape, text)


def _join_pair(match: re.Match[str]) -> str:
    pair = match.group()
    return chr(0x10000 + ((ord(pair[0]) - 0xD800) << 10) + (ord(pair[1]) - 0xDC00))


def join_surrogate_pairs(text: str) -> str:
    """``text`` with every high surrogate directly followed by a low one replaced by the
    character the pair encodes in UTF-16 (``"\\ud83d\\ude00"`` → ``"😀"``).

    Such pairs appear when a stream sends the two halves of a character as JSON escapes
    in separate pieces. Lone surrogates are left as they are. Returns ``text`` itself
    when there is nothing to join.
    """
    if _PAIR.search(text) is None:
        return text
    return _PAIR.sub(_join_pair, text)


def check_json(value: Any, what: str) -> None:
    """Check that ``value`` can be written to a transcript — encoded exactly as the
    writers encode it (sets become JSON lists; bytes, paths, dates and times, durations,
    UUIDs and decimals become strings) —
    so that a value that cannot is refused where it enters a run instead of failing the
    sink that writes it later.

    Raises:
        TypeError: it cannot (also when it nests deeper than ``MAX_VALUE_DEPTH``
            levels: its line would be too deep to read back); the message starts with
            ``what``.
    """
    try:
        jsonable = to_jsonable(value)
        text = json_text(jsonable)
    except (TypeError, ValueError, RecursionError) as exc:
        raise TypeError(f"{what} is not JSON data: {exc}") from None
    # What is written must read back: the readers refuse deeper lines (parse_json).
    if _openings(text) > MAX_VALUE_DEPTH and _too_deep(jsonable, MAX_VALUE_DEPTH):
        raise TypeError(
            f"{what} is not JSON data a transcript can hold: arrays and objects nested "
            f"deeper than {MAX_VALUE_DEPTH} levels"
        )


def check_message(message: Message, what: str) -> None:
    """Check the free-form values of ``message`` (``what`` names it in the error): a
    custom message's ``content`` and ``details``, a tool result's ``details`` and
    ``structured_content``, the
    arguments of an assistant message's tool calls. The other fields are typed blocks
    and strings, which every writer can encode.

    Raises:
        TypeError: one of them is not JSON data (see :func:`check_json`).
    """
    if type(message) is CustomMessage:
        if message.content is not None:
            check_json(message.content, f"{what}.content")
        if message.details is not None:
            check_json(message.details, f"{what}.details")
    elif type(message) is ToolResultMessage:
        if message.details is not None:
            check_json(message.details, f"{what}.details")
        if message.structured_content is not None:
            check_json(message.structured_content, f"{what}.structured_content")
    elif type(message) is AssistantMessage:
        for i, block in enumerate(message.content):
            if type(block) is ToolCall:
                check_json(block.arguments, f"{what}.content[{i}].arguments")


def message_to_json(message: Message) -> str:
    """One message as compact JSON text (one line) that encodes as UTF-8."""
    return json_text(to_jsonable(message, Message))


def event_to_json(event: ev.AgentEvent) -> str:
    """One loop event as compact JSON text (one line) that encodes as UTF-8."""
    return json_text(to_jsonable(event, ev.AgentEvent))


def dumps(messages: Iterable[Message]) -> str:
    """Serialize messages to a JSON array (text). ``loads(dumps(x)) == tuple(x)``.

    The text always encodes as UTF-8: surrogate code points (from undecodable file
    names, say) are written as ``\\uXXXX`` escapes. A high surrogate directly followed
    by a low one reads back as the one character that pair encodes (JSON cannot tell
    them apart); lone surrogates read back unchanged.

    Raises:
        TypeError: ``messages`` is not a sequence of messages (a ``str``, a bare
            message...), or an item is not a message (``messages[i] is ...``): what
            :func:`loads` would refuse is never written. Also a message holding a value
            that is not JSON.
    """
    return json_text([to_jsonable(m, Message) for m in as_history(messages, "messages")])


MAX_JSON_DEPTH = 256
"""How deeply arrays and objects may nest in JSON that trio-agent reads from outside
(transcripts, cassettes, task files): deeper, and converting the values recursively
(what writing them back, or a cassette's request digest, does) would exhaust Python's
recursion; a run cannot hold such a value in the first place."""


MAX_VALUE_DEPTH = MAX_JSON_DEPTH - 16
"""How deeply a value a run holds (arguments, details, custom content) may nest: its
line on disk adds the levels of the message around it (a tool call's arguments sit
three deep), and the line must stay within :data:`MAX_JSON_DEPTH`."""


class JsonTooDeep(ValueError):
    """JSON text whose arrays and objects nest deeper than :data:`MAX_JSON_DEPTH`."""


def _too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``value`` nests deeper than ``limit`` (walked without recursion, so any
    depth is measured)."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def _openings(text: str | bytes) -> int:
    if isinstance(text, bytes):
        return text.count(b"[") + text.count(b"{")
    return text.count("[") + text.count("{")


def parse_json(text: str | bytes) -> Any:
    """``json.loads(text)``, for JSON text from outside (a file, a cassette, a task).

    Arrays and objects nested deeper than :data:`MAX_JSON_DEPTH` levels raise
    :class:`JsonTooDeep`, a ``ValueError`` like any other malformed JSON — never
    ``RecursionError``, however deep — so every reader reports it as the format error
    it is, naming the line.

    Raises:
        ValueError: malformed JSON (``json.JSONDecodeError``), text that is not UTF-8
            (``UnicodeDecodeError``), or :class:`JsonTooDeep`.
    """
    too_deep = f"arrays and objects nested deeper than {MAX_JSON_DEPTH} levels"
    try:
        value = json.loads(text)
    except RecursionError:
        raise JsonTooDeep(too_deep) from None
    # Text with fewer opening brackets than the limit cannot nest deeper: no walk.
    if _openings(text) > MAX_JSON_DEPTH and _too_deep(value):
        raise JsonTooDeep(too_deep)
    return value


def loads(text: str | bytes) -> tuple[Message, ...]:
    """Read messages written by :func:`dumps`.

    Raises:
        TranscriptFormatError: malformed JSON, a value that is not an array, an unknown
            tag, a missing field or a value of the wrong type; ``.path`` names the field.
    """
    try:
        data = parse_json(text)
    except ValueError as exc:
        raise TranscriptFormatError(f"malformed JSON at $: {exc}", path="$") from None
    if not isinstance(data, list):
        raise TranscriptFormatError(
            f"expected a JSON array of messages at $, got {type(data).__name__}", path="$"
        )
    return tuple(from_jsonable(item, Message, path=f"$[{i}]") for i, item in enumerate(data))
